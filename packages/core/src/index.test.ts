import { describe, expect, it } from 'vitest'
import * as engine from './engine/index.js'
import * as host from './host/index.js'
import * as core from './index.js'
import * as plugins from './plugins/index.js'
import * as testing from './testing/index.js'

// The public API is a promise to embedders: a change here is a deliberate change (and a changeset).
// The full surface, types included, is in packages/core/api/*.api.md (test/api-reports.test.ts);
// this snapshot is the quick check of the runtime names each entry gives, run with core's tests.
describe('public API', () => {
  it.each([
    ['@kubevol/core', core],
    ['@kubevol/core/plugins', plugins],
    ['@kubevol/core/engine', engine],
    ['@kubevol/core/host', host],
    ['@kubevol/core/testing', testing],
  ])('%s exports', (_, entry) => {
    expect(Object.keys(entry).sort()).toMatchSnapshot()
  })

  it.each(['basename', 'dirname', 'joinPath', 'crc32', 'sha256Hex', 'decodeUtf8', 'createPluginManager', 'Reconciler'])('keeps %s out of the main entry', (name) => {
    expect(Object.keys(core)).not.toContain(name)
  })
})
