import { describe, expect, it } from 'vitest'
import * as agent from './index.js'
import pkg from '../package.json' with { type: 'json' }
import * as kube from './kube/index.js'
import * as testing from './testing/index.js'

describe('the public API', () => {
  it('lists its names (a change here is a change of the package API)', () => {
    expect(Object.keys(agent).sort()).toMatchSnapshot()
    expect(Object.keys(testing).sort()).toMatchSnapshot()
    expect(Object.keys(kube).sort()).toMatchSnapshot()
  })

  it('says the version of its package', () => {
    expect(agent.AGENT_VERSION).toBe(pkg.version)
  })
})
