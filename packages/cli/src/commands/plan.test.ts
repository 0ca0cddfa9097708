import { createMemoryHost } from '@kubevol/adapter-mock'
import { createManifestSource, startAgent } from '@kubevol/agent'
import { createVolumeManager, silentLogger } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { describe, expect, it } from 'vitest'
import { EXAMPLES, cli } from '../../test/helpers.js'
import { prepareMemoryHost, readManifestObjects } from '../mock-setup.js'
import { computePlan } from './plan.js'

async function preparedHost() {
  const host = createMemoryHost()
  await prepareMemoryHost(host, readManifestObjects(EXAMPLES))
  return host
}

const fingerprint = (host: ReturnType<typeof createMemoryHost>) => JSON.stringify({ tree: host.tree('/'), mounts: host.mountTargets() })

describe('kubevol plan', () => {
  it('lists the first operation of every example volume and touches nothing', async () => {
    const host = await preparedHost()
    const before = fingerprint(host)
    const plan = await computePlan({ host, manifestDir: EXAMPLES, rootDir: '/var/lib/kubevol', nodeName: 'n1' })
    expect(fingerprint(host)).toBe(before)
    const mounts = plan.operations.filter((o) => o.operation === 'volume_mount').map((o) => `${o.pod} ${o.plugin}`)
    expect(mounts.sort()).toEqual([
      'default/db kubernetes.io/host-path',
      'default/db kubernetes.io/local-volume',
      'default/web kubernetes.io/configmap',
      'default/web kubernetes.io/downward-api',
      'default/web kubernetes.io/empty-dir',
      'default/web kubernetes.io/empty-dir',
      'default/web kubernetes.io/projected',
      'default/web kubernetes.io/secret',
    ])
    expect(plan.operations.filter((o) => o.operation === 'volume_attach').map((o) => o.plugin)).toEqual(['kubevol.io/file-disk'])
    // Each operation stopped at its first change.
    expect(plan.refusedCalls.length).toBeGreaterThan(0)
    expect(plan.manifestErrors).toEqual([])
  })

  it('on a node already running the pods, touches nothing either', async () => {
    const host = await preparedHost()
    const agent = await startAgent({ nodeName: 'n1', mode: 'static', manifestDir: EXAMPLES, port: 0, statsPeriodMs: 0 }, { host, log: { silent: true } })
    const deadline = Date.now() + 10_000
    while (Date.now() < deadline && agent.manager.snapshot().mounted.filter((m) => m.mountState === 'mounted').length < 9) await new Promise((r) => setTimeout(r, 10))
    await agent.stop()
    const before = fingerprint(host)
    const plan = await computePlan({ host, manifestDir: EXAMPLES, rootDir: '/var/lib/kubevol', nodeName: 'n1' })
    expect(fingerprint(host)).toBe(before)
    // Reconstructed volumes are uncertain: a run sets each up again (idempotent). The plan reads the
    // disk and mount table, not the journal, so the fileDisk attach (which reuses the loop device) shows too.
    expect(plan.operations.filter((o) => o.operation === 'volume_mount').length).toBeGreaterThanOrEqual(8)
  })

  it('matches what a run then does: every planned operation is one the run starts', async () => {
    const host = await preparedHost()
    const plan = await computePlan({ host, manifestDir: EXAMPLES, rootDir: '/var/lib/kubevol', nodeName: 'n1' })
    const source = createManifestSource({ dir: EXAMPLES, nodeName: 'n1', logger: silentLogger })
    await source.start()
    const manager = createVolumeManager({ host, plugins: createBuiltinPlugins(), podSource: source.pods, objects: source.objects, nodeName: 'n1', controllerAttachDetach: false })
    const ran: string[] = []
    manager.subscribe((e) => {
      if (e.type === 'operation' && e.operation.endedAt === undefined) ran.push(`${e.operation.name} ${e.operation.volumeName}`)
    })
    const abort = new AbortController()
    const run = manager.run(abort.signal)
    await Promise.all(source.pods.getPods().map((pod) => manager.waitForAttachAndMount(pod, { timeoutMs: 10_000 })))
    abort.abort()
    await run
    source.stop()
    const planned = plan.operations.map((o) => `${o.operation} ${o.volume}`)
    expect(planned.filter((op) => !ran.includes(op))).toEqual([])
    expect(ran.filter((op) => !planned.includes(op)).map((op) => op.split(' ')[0])).toEqual(['volume_mount'])
  })

  it('prints a table with a VOLUME column and requires --pod-manifest-path', async () => {
    const r = await cli(['plan', '--pod-manifest-path', EXAMPLES])
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/^OPERATION\s+POD\s+VOLUME\s+PLUGIN$/m)
    // The pod's own name of the volume, as in the manifest (the unique name is in -o wide).
    expect(r.stdout).toMatch(/^volume_attach\s+default\/db\s+data\s+kubevol\.io\/file-disk$/m)
    expect(r.stdout).toMatch(/^volume_mount\s+default\/web\s+scratch\s+kubernetes\.io\/empty-dir$/m)
    const wide = await cli(['plan', '--pod-manifest-path', EXAMPLES, '-o', 'wide'])
    expect(wide.stdout).toMatch(/^volume_mount\s+default\/web\s+scratch\s+kubernetes\.io\/empty-dir\s+kubernetes\.io\/empty-dir\/\S+-scratch$/m)
    expect(r.stdout).toContain('Nothing was changed.')
    // --no-headers: the rows alone, no header and no summary line.
    const bare = await cli(['plan', '--pod-manifest-path', EXAMPLES, '--no-headers'])
    expect(bare.stdout.trimEnd().split('\n').filter((l) => !/^\w+\s+default\/\S+\s+\S+\s+\S+$/.test(l))).toEqual([])
    const missing = await cli(['plan'])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain('--pod-manifest-path is required')
  })
})
