/**
 * Everything an edited example needs in the page, loaded as one chunk when a reader opens an
 * editor: TypeScript (to strip types and to check them), the checker's files and the packages.
 */
import ts from 'typescript'
import { pageFiles } from './page-files.js'
import { loadPageModules } from './page-modules.js'
import { type ExampleOutput, runSource } from './run-source.js'
import { type Checker, createChecker } from './type-check.js'

export { ExampleError } from './run-source.js'
export type { TypeProblem } from './type-check.js'

/** The TypeScript version that checks and compiles the edits. */
export const typescriptVersion: string = ts.version

let checker: Checker | undefined
/** The shared checker (the first one built reads the libraries; later ones reuse it). */
export function getChecker(): Checker {
  checker ??= createChecker(ts, pageFiles())
  return checker
}

/** Compiles and runs an edited example against the packages in the page. */
export async function runEdited(source: string): Promise<ExampleOutput> {
  return runSource(ts, source, await loadPageModules())
}
