import { describe, expect, it } from 'vitest'
import * as core from './index.js'
import * as testing from './testing/index.js'

// The public API is a promise to embedders: a change here is a deliberate change (and a changeset).
describe('public API', () => {
  it('@kubevol/core exports', () => {
    expect(Object.keys(core).sort()).toMatchSnapshot()
  })

  it('@kubevol/core/testing exports', () => {
    expect(Object.keys(testing).sort()).toMatchSnapshot()
  })
})
