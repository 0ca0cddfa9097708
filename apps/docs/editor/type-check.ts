/**
 * Type-checks an edited example against the real packages' declarations, in memory: TypeScript's
 * language service over a file table that holds TypeScript's standard library files (ES2023 and
 * the DOM) and each package's package.json and built `.d.ts` files under `/node_modules/<name>/`.
 * The page fills the table from the built files (editor/page-files.ts); a Node test fills it from
 * disk. No DOM here.
 */
import type TypeScript from 'typescript'

/** One problem TypeScript found, with its place in the source. */
export interface TypeProblem {
  /** Offsets into the source. */
  readonly from: number
  readonly to: number
  /** 1-based. */
  readonly line: number
  readonly severity: 'error' | 'warning'
  readonly message: string
}

/** Which of TypeScript's lib files the checker needs: ES5 to ES2023 and the DOM (an example runs in a page). */
export const LIB_FILE = /^lib\.(es5|es20(1[5-9]|2[0-3])(\.[a-z]+)*|dom(\.[a-z]+)?|decorators(\.[a-z]+)?)\.d\.ts$/

const LIB_DIR = '/node_modules/typescript/lib'
const SOURCE = '/example.ts'

export interface Checker {
  /** The problems in `source`; the first call takes longest (TypeScript reads the libraries). */
  check(source: string): readonly TypeProblem[]
}

/**
 * Creates a checker over `files`: paths such as `lib.es5.d.ts` (TypeScript's lib files, by name)
 * and `/node_modules/@kubevol/core/dist/index.d.ts` (the packages, by absolute path).
 */
export function createChecker(ts: typeof TypeScript, files: ReadonlyMap<string, string>): Checker {
  const table = new Map<string, string>()
  for (const [name, text] of files) table.set(name.startsWith('/') ? name : `${LIB_DIR}/${name}`, text)
  const options: TypeScript.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ['lib.es2023.d.ts', 'lib.dom.d.ts', 'lib.dom.iterable.d.ts'],
    types: [],
    strict: true,
    noUncheckedIndexedAccess: true,
    skipLibCheck: true,
    noEmit: true,
  }
  let source = ''
  let version = 0
  const directories = new Set<string>()
  for (const path of table.keys()) for (let dir = path.slice(0, path.lastIndexOf('/')); dir; dir = dir.slice(0, dir.lastIndexOf('/'))) directories.add(dir)
  const read = (path: string): string | undefined => (path === SOURCE ? source : table.get(path))
  const host: TypeScript.LanguageServiceHost = {
    getCompilationSettings: () => options,
    getScriptFileNames: () => [SOURCE],
    getScriptVersion: (path) => (path === SOURCE ? String(version) : '0'),
    getScriptSnapshot: (path) => {
      const text = read(path)
      return text === undefined ? undefined : ts.ScriptSnapshot.fromString(text)
    },
    getCurrentDirectory: () => '/',
    getDefaultLibFileName: () => `${LIB_DIR}/lib.d.ts`,
    fileExists: (path) => read(path) !== undefined,
    readFile: (path) => read(path),
    directoryExists: (path) => path === '/' || directories.has(path.replace(/\/$/, '')),
    getDirectories: () => [],
  }
  const service = ts.createLanguageService(host, ts.createDocumentRegistry())
  return {
    check(text) {
      source = text
      version++
      const diagnostics = [...service.getSyntacticDiagnostics(SOURCE), ...service.getSemanticDiagnostics(SOURCE)]
      return diagnostics
        .filter((d) => d.category === ts.DiagnosticCategory.Error || d.category === ts.DiagnosticCategory.Warning)
        .map((d) => {
          const from = d.start ?? 0
          return {
            from,
            to: from + (d.length ?? 0),
            line: d.file ? d.file.getLineAndCharacterOfPosition(from).line + 1 : 1,
            severity: d.category === ts.DiagnosticCategory.Error ? 'error' : 'warning',
            message: ts.flattenDiagnosticMessageText(d.messageText, '\n'),
          }
        })
    },
  }
}
