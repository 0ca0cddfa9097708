import { createMemoryHost } from '@kubevol/adapter-mock'
import { startAgent } from '@kubevol/agent'
import { describe, expect, it } from 'vitest'
import { EXAMPLES, cli } from '../../test/helpers.js'
import { prepareMemoryHost, readManifestObjects } from '../mock-setup.js'
import type { Reconstruction } from './reconstruct.js'

describe('kubevol reconstruct', () => {
  it('shows the pod volumes, mounts and journal a run left, changing nothing', async () => {
    const host = createMemoryHost()
    await prepareMemoryHost(host, readManifestObjects(EXAMPLES))
    const agent = await startAgent({ nodeName: 'n1', mode: 'static', manifestDir: EXAMPLES, port: 0, statsPeriodMs: 0 }, { host, log: { silent: true } })
    const deadline = Date.now() + 10_000
    while (Date.now() < deadline && agent.manager.snapshot().mounted.filter((m) => m.mountState === 'mounted').length < 9) await new Promise((r) => setTimeout(r, 10))
    await agent.stop()
    const before = JSON.stringify(host.tree('/'))
    const r = await cli(['reconstruct', '-o', 'json'], { host })
    expect(r.code).toBe(0)
    expect(JSON.stringify(host.tree('/'))).toBe(before)
    const rec = JSON.parse(r.stdout) as Reconstruction
    // hostPath volumes have no directory under the pod: the disk cannot show them (the journal does).
    expect(rec.volumes.map((v) => v.volume).sort()).toEqual(['bundle', 'cache', 'config', 'creds', 'podinfo', 'pv-disk', 'pv-local', 'scratch'])
    expect(rec.volumes.find((v) => v.volume === 'pv-disk')?.mounted).toBe(true)
    expect(rec.mounts.length).toBeGreaterThan(0)
    expect(rec.journal.volumes.some((v) => v.attached !== undefined)).toBe(true)
    const table = await cli(['reconstruct'], { host })
    expect(table.stdout).toMatch(/^Journal: \d+ records$/m)
  })

  it('reports an empty root', async () => {
    const r = await cli(['reconstruct'], { host: createMemoryHost() })
    expect(r.stdout).toContain('Pod volumes on disk:\n  none')
  })
})
