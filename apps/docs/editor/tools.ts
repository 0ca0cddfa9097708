/**
 * Everything an edited example needs in the page, loaded when a reader opens an editor: TypeScript
 * (to strip types and to check them), the checker's files and the packages.
 *
 * TypeScript is not bundled: its 9 MB `typescript.js` is copied into the site as it is published and
 * loaded with a script tag, which defines the global `ts`. Bundling it tripled the site's build time.
 */
import type TypeScript from 'typescript'
import typescriptUrl from 'typescript/lib/typescript.js?url'
import { pageFiles } from './page-files.js'
import { loadPageModules } from './page-modules.js'
import { type ExampleOutput, runSource } from './run-source.js'
import { type Checker, createChecker } from './type-check.js'

export { ExampleError } from './run-source.js'
export type { TypeProblem } from './type-check.js'

let loading: Promise<typeof TypeScript> | undefined
/** Loads TypeScript once; later calls get the same one. */
export function loadTypeScript(): Promise<typeof TypeScript> {
  loading ??= new Promise((resolve, reject) => {
    const script = document.createElement('script')
    script.src = typescriptUrl
    script.onload = () => {
      const ts = (globalThis as { ts?: typeof TypeScript }).ts
      if (ts) resolve(ts)
      else reject(new Error(`${typescriptUrl} loaded but defined no global ts`))
    }
    script.onerror = () => reject(new Error(`could not load TypeScript from ${typescriptUrl}`))
    document.head.append(script)
  })
  return loading
}

let checker: Checker | undefined
/** The shared checker (the first one built reads the libraries; later ones reuse it). */
export async function getChecker(): Promise<Checker> {
  checker ??= createChecker(await loadTypeScript(), pageFiles())
  return checker
}

/** Compiles and runs an edited example against the packages in the page. */
export async function runEdited(source: string): Promise<ExampleOutput> {
  return runSource(await loadTypeScript(), source, await loadPageModules())
}
