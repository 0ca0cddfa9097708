import { createMemoryHost } from '@kubevol/adapter-mock'
import { type Agent, startAgent } from '@kubevol/agent'
import { parse } from 'yaml'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cli, manifestDir } from '../../test/helpers.js'

let agent: Agent
let server: string
const m = manifestDir()

beforeAll(async () => {
  // One pod that cannot mount (its ConfigMap is missing), next to the examples.
  m.write('stuck.yaml', 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: stuck\nspec:\n  containers: [{ name: c, volumeMounts: [{ name: cfg, mountPath: /c }] }]\n  volumes: [{ name: cfg, configMap: { name: missing } }]\n')
  const host = createMemoryHost()
  host.allocateFile('/var/lib/kubevol-images/data.img', 64 << 20)
  await host.mkdir('/mnt/kubevol-local/vol1', { recursive: true })
  agent = await startAgent(
    { nodeName: 'n1', mode: 'static', manifestDir: m.dir, port: 0, statsPeriodMs: 0, podSyncRetryMs: 50 },
    { host, log: { silent: true }, manager: { backoff: { initialMs: 20, maxMs: 200 } } },
  )
  server = agent.url
  const deadline = Date.now() + 10_000
  const web = () => agent.pods.getPods().find((p) => p.metadata.name === 'web')?.metadata.uid ?? ''
  while (Date.now() < deadline && (web() === '' || agent.manager.getMountedVolumesForPod(web()).size < 6)) await new Promise((r) => setTimeout(r, 10))
  while (Date.now() < deadline && !(agent.pod(agent.pods.getPods().find((p) => p.metadata.name === 'stuck')!.metadata.uid!) as { volumes: { attempts: number }[] }).volumes[0]!.attempts) {
    await new Promise((r) => setTimeout(r, 10))
  }
})
afterAll(async () => {
  await agent.stop()
  m.cleanup()
})

describe('kubevol status', () => {
  it('prints pods, volumes and phases as a table', async () => {
    const r = await cli(['status', '--server', server])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('node n1 (static mode)')
    expect(r.stdout).toMatch(/^default\/web\s+scratch\s+empty-dir\s+mounted$/m)
    expect(r.stdout).toMatch(/^default\/stuck\s+cfg\s+configmap\s+/m)
  })

  it.each(['json', 'yaml'])('prints /v1/state as %s', async (format) => {
    const r = await cli(['status', '--server', server, '-o', format])
    expect(r.code).toBe(0)
    const state = (format === 'json' ? JSON.parse(r.stdout) : parse(r.stdout)) as { nodeName: string; desired: unknown[] }
    expect(state.nodeName).toBe('n1')
    expect(state.desired.length).toBe(10)
  })

  it('adds uid, unique name and error columns with -o wide', async () => {
    const r = await cli(['status', '--server', server, '-o', 'wide'])
    expect(r.stdout).toMatch(/^POD\s+VOLUME\s+TYPE\s+PHASE\s+UID\s+UNIQUE NAME\s+ERROR$/m)
  })

  it('exits 3 with what to do when no agent answers', async () => {
    const r = await cli(['status', '--server', 'http://127.0.0.1:1'])
    expect(r.code).toBe(3)
    expect(r.stderr).toMatch(/^kubevol: cannot reach the agent at http:\/\/127\.0\.0\.1:1 .*--server\n$/)
  })
})

describe('kubevol explain', () => {
  it('shows each volume of a pod by name', async () => {
    const r = await cli(['explain', 'db', '--server', server])
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/^pod default\/db \(uid [0-9a-f]+\)$/m)
    expect(r.stdout).toMatch(/^data\s+file-disk\s+mounted\s+0$/m)
  })

  it('shows the last error, attempts and next retry of a stuck volume', async () => {
    const r = await cli(['explain', 'default/stuck', '--server', server, '-o', 'json'])
    expect(r.code).toBe(0)
    const pod = JSON.parse(r.stdout) as { volumes: { name: string; phase: string; attempts: number; lastError?: string; backoff?: { retryAt: string } }[] }
    const cfg = pod.volumes.find((v) => v.name === 'cfg')!
    expect(cfg.attempts).toBeGreaterThan(0)
    expect(cfg.lastError).toContain('missing')
    const table = await cli(['explain', 'stuck', '--server', server])
    expect(table.stdout).toMatch(/^cfg\s+configmap\s+\S+\s+\d+\s+.*missing/m)
  })

  it('exits 1 for a pod the agent does not know', async () => {
    const r = await cli(['explain', 'nobody', '--server', server])
    expect(r.code).toBe(1)
    expect(r.stderr).toBe('kubevol: pod nobody is not known to the agent (see `kubevol status`)\n')
  })
})
