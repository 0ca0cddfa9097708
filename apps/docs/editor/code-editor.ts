/**
 * The CodeMirror 6 editor of an example: TypeScript highlighting, undo, long lines wrapped (never
 * cut off), and the type checker's problems underlined in the text. CodeEditor.vue mounts it.
 */
import { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands'
import { javascript } from '@codemirror/lang-javascript'
import { bracketMatching, defaultHighlightStyle, syntaxHighlighting } from '@codemirror/language'
import { type Diagnostic, lintGutter, setDiagnostics } from '@codemirror/lint'
import { EditorState } from '@codemirror/state'
import { EditorView, highlightActiveLine, keymap, lineNumbers } from '@codemirror/view'

/** A problem to underline, with offsets into the text. */
export interface EditorProblem {
  readonly from: number
  readonly to: number
  readonly severity: 'error' | 'warning'
  readonly message: string
}

export interface CodeEditor {
  /** Replaces the whole text (a reset), unless it is already that text. */
  setText(text: string): void
  /** Underlines these problems, replacing the previous ones. */
  setProblems(problems: readonly EditorProblem[]): void
  destroy(): void
}

/** Creates an editor in `parent` holding `text`; `onChange` gets the text after each edit. */
export function createCodeEditor(parent: HTMLElement, text: string, onChange: (text: string) => void): CodeEditor {
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc: text,
      extensions: [
        lineNumbers(),
        highlightActiveLine(),
        history(),
        bracketMatching(),
        keymap.of([...defaultKeymap, ...historyKeymap, indentWithTab]),
        javascript({ typescript: true }),
        syntaxHighlighting(defaultHighlightStyle),
        lintGutter(),
        EditorView.lineWrapping,
        EditorView.contentAttributes.of({ 'aria-label': 'example source, editable' }),
        EditorView.updateListener.of((update) => {
          if (update.docChanged) onChange(update.state.doc.toString())
        }),
      ],
    }),
  })
  return {
    setText(next) {
      if (next !== view.state.doc.toString()) view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: next } })
    },
    setProblems(problems) {
      const length = view.state.doc.length
      const diagnostics: Diagnostic[] = problems.map((p) => ({
        from: Math.min(p.from, length),
        to: Math.min(Math.max(p.to, p.from), length),
        severity: p.severity,
        message: p.message,
      }))
      view.dispatch(setDiagnostics(view.state, diagnostics))
    },
    destroy: () => view.destroy(),
  }
}
