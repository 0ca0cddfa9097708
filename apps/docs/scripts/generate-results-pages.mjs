/**
 * Writes the pages drawn from recorded results: "kubevol and the kubelet: measured" with its charts
 * (from bench/results/*.json) and "What kubevol never does" (from test/hostile-node/results.json).
 * Run by `npm run generate`; test/results-pages.test.ts fails when the committed files differ from
 * what this writes, so the pages cannot drift from the results.
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { measuredFiles } from './measured-page.mjs'
import { neverDoesFiles } from './never-does-page.mjs'

const DOCS = fileURLToPath(new URL('..', import.meta.url))
const REPO = join(DOCS, '..', '..')

/** Every generated file, as a map from its path under apps/docs to its content. */
export async function resultsPages() {
  return new Map([...(await measuredFiles(join(REPO, 'bench'))), ...neverDoesFiles(REPO)])
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const [path, content] of await resultsPages()) {
    mkdirSync(dirname(join(DOCS, path)), { recursive: true })
    writeFileSync(join(DOCS, path), content)
    console.log(`wrote ${path}`)
  }
}
