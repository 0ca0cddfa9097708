/**
 * The packages an example edited in the page can import: the real ones, the same modules the
 * unedited examples and the playground run on. Loaded on first use.
 */
import type { ModuleTable } from './run-source.js'

const LOADERS: Readonly<Record<string, () => Promise<unknown>>> = {
  '@kubevol/core': () => import('@kubevol/core'),
  '@kubevol/core/plugins': () => import('@kubevol/core/plugins'),
  '@kubevol/core/engine': () => import('@kubevol/core/engine'),
  '@kubevol/core/host': () => import('@kubevol/core/host'),
  '@kubevol/core/testing': () => import('@kubevol/core/testing'),
  '@kubevol/adapter-mock': () => import('@kubevol/adapter-mock'),
}

/** Loads every importable package and returns them by specifier. */
export async function loadPageModules(): Promise<ModuleTable> {
  const entries = await Promise.all(Object.entries(LOADERS).map(async ([name, load]) => [name, await load()] as const))
  return Object.fromEntries(entries)
}
