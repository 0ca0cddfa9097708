/**
 * Runs an example as a reader edited it in the page. TypeScript's own transpiler strips the types
 * and turns the imports into `require` calls; each `require` gets one of the real packages the page
 * has already loaded (the same modules the unedited example runs on). No DOM here: a Node test runs
 * every example through this function and compares the output with the example's own.
 */
import type TypeScript from 'typescript'

/** The packages an edited example can import, by specifier. */
export type ModuleTable = Readonly<Record<string, unknown>>

/** What an example's `run()` returns; `lines` is what the page shows. */
export interface ExampleOutput {
  readonly lines: readonly string[]
}

/** Why an edited example did not run to the end: it did not compile, imported what the page lacks, or threw. */
export class ExampleError extends Error {
  readonly phase: 'compile' | 'import' | 'run'
  constructor(phase: 'compile' | 'import' | 'run', message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'ExampleError'
    this.phase = phase
  }
}

/** Compiles TypeScript to a CommonJS function body; syntax errors (not type errors) fail it. */
function transpile(ts: typeof TypeScript, source: string): string {
  const out = ts.transpileModule(source, {
    fileName: 'example.ts',
    reportDiagnostics: true,
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, sourceMap: false, inlineSourceMap: false },
  })
  const errors = (out.diagnostics ?? []).filter((d) => d.category === ts.DiagnosticCategory.Error)
  if (errors.length > 0) {
    const lines = errors.map((d) => {
      const where = d.file && d.start !== undefined ? `line ${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: ` : ''
      return `${where}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`
    })
    throw new ExampleError('compile', lines.join('\n'))
  }
  return out.outputText
}

/**
 * Compiles `source`, runs it with `modules` as the only importable packages, calls its exported
 * `run()` and returns what it returned. Every failure is an {@link ExampleError} saying which phase.
 */
export async function runSource(ts: typeof TypeScript, source: string, modules: ModuleTable): Promise<ExampleOutput> {
  const js = transpile(ts, source)
  const exports: Record<string, unknown> = {}
  const require = (specifier: string): unknown => {
    if (!Object.hasOwn(modules, specifier)) {
      throw new ExampleError('import', `cannot import '${specifier}' here: an example in this page can import ${Object.keys(modules).join(', ')}`)
    }
    return modules[specifier]
  }
  let run: unknown
  try {
    // The transpiled module is a function of exports and require, as CommonJS wraps a file.
    new Function('exports', 'require', 'module', js)(exports, require, { exports })
    run = exports.run
  } catch (err) {
    if (err instanceof ExampleError) throw err
    throw new ExampleError('run', `while loading the example: ${message(err)}`, { cause: err })
  }
  if (typeof run !== 'function') throw new ExampleError('run', 'the example must export a function run() that returns { lines }')
  let output: unknown
  try {
    output = await run()
  } catch (err) {
    throw new ExampleError('run', `run() threw ${message(err)}`, { cause: err })
  }
  const lines = (output as { lines?: unknown } | undefined)?.lines
  if (!Array.isArray(lines)) throw new ExampleError('run', 'run() must return an object with lines: an array of strings to show')
  return { lines: lines.map((line) => String(line)) }
}

function message(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err)
}
