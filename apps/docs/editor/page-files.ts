/**
 * The files the type checker reads, bundled as text when the site is built: TypeScript's lib files
 * for ES2023 and the DOM, and the built declarations and package.json of each package an example
 * can import (so `npm run build` must have run, as it has before the site is built).
 */
import { LIB_FILE } from './type-check.js'

// The part of Vite's `import.meta.glob` used here (the docs package does not type-check against vite/client).
declare global {
  interface ImportMeta {
    glob<T>(patterns: readonly string[], options: { query: '?raw'; import: 'default'; eager: true }): Record<string, T>
  }
}

const libs = import.meta.glob<string>(
  [
    '../../../node_modules/typescript/lib/lib.es5.d.ts',
    '../../../node_modules/typescript/lib/lib.es201[5-9]*.d.ts',
    '../../../node_modules/typescript/lib/lib.es202[0-3]*.d.ts',
    '../../../node_modules/typescript/lib/lib.dom*.d.ts',
    '../../../node_modules/typescript/lib/lib.decorators*.d.ts',
  ],
  { query: '?raw', import: 'default', eager: true },
)
const packages = import.meta.glob<string>(
  ['../../../packages/core/package.json', '../../../packages/core/dist/**/*.d.ts', '../../../packages/adapter-mock/package.json', '../../../packages/adapter-mock/dist/**/*.d.ts'],
  { query: '?raw', import: 'default', eager: true },
)
const PACKAGE_DIRS: Readonly<Record<string, string>> = { core: '@kubevol/core', 'adapter-mock': '@kubevol/adapter-mock' }

/** The checker's file table: lib files by name, package files under `/node_modules/<package>/`. */
export function pageFiles(): ReadonlyMap<string, string> {
  const files = new Map<string, string>()
  for (const [path, text] of Object.entries(libs)) {
    const name = path.slice(path.lastIndexOf('/') + 1)
    if (LIB_FILE.test(name)) files.set(name, text)
  }
  for (const [path, text] of Object.entries(packages)) {
    const [, dir, rest] = /packages\/([^/]+)\/(.*)$/.exec(path) ?? []
    const name = dir === undefined ? undefined : PACKAGE_DIRS[dir]
    if (name && rest) files.set(`/node_modules/${name}/${rest}`, text)
  }
  return files
}
