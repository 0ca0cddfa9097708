import { createMemoryHost } from '@kubevol/adapter-mock'
import { type Agent, startAgent } from '@kubevol/agent'
import { parse } from 'yaml'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { cli, manifestDir } from '../../test/helpers.js'
import { ERROR_WIDTH } from '../output.js'

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

  it('adds uid and unique name columns with -o wide, and the error whole', async () => {
    // Two calls to a live agent: a retry between them may change the error, so both are read again until they agree.
    await vi.waitFor(async () => {
      const r = await cli(['status', '--server', server, '-o', 'wide'])
      expect(r.stdout).toMatch(/^POD\s+VOLUME\s+TYPE\s+PHASE\s+UID\s+UNIQUE NAME\s+ERROR$/m)
      const state = JSON.parse((await cli(['status', '--server', server, '-o', 'json'])).stdout) as { backoffs: { error: string }[] }
      const error = state.backoffs[0]?.error ?? ''
      expect(error.length).toBeGreaterThan(ERROR_WIDTH)
      expect(r.stdout).toContain(error)
    }, 10_000)
  })

  it('cuts the error column of the table to a sane width, and shows retries and types as run does', async () => {
    // A retry running at the moment of the call shows as "running volume_mount": read again until the
    // volume is between two attempts.
    const { r, stuck } = await vi.waitFor(async () => {
      const r = await cli(['status', '--server', server])
      const stuck = r.stdout.split('\n').find((l) => l.startsWith('default/stuck'))!
      expect(stuck).toMatch(/backing-off \(retry (in \d+s|now)\)/)
      return { r, stuck }
    }, 10_000)
    expect(stuck).toMatch(/…$/)
    const error = stuck.slice(stuck.lastIndexOf('  ') + 2)
    expect(error.length).toBe(ERROR_WIDTH)
    for (const l of r.stdout.split('\n')) expect(l.length).toBeLessThan(200)
    // The same label as `run` gives a Memory emptyDir.
    expect(r.stdout).toMatch(/^default\/web\s+cache\s+empty-dir \(Memory\)\s+mounted/m)
    expect(r.stdout).not.toMatch(/\d{4}-\d\d-\d\dT/)
  })

  it('leaves the header rows out with --no-headers', async () => {
    const r = await cli(['status', '--server', server, '--no-headers'])
    expect(r.stdout).not.toMatch(/^POD\s/m)
    expect(r.stdout).toMatch(/^default\/web\s+scratch\s+empty-dir\s+mounted/m)
  })

  it('with --watch prints again when the state changes, until stopped', async () => {
    let stop: () => void = () => {}
    const stopSignal = new Promise<void>((resolve) => (stop = resolve))
    const watching = cli(['status', '--server', server, '--watch', '--no-headers'], { stopSignal, watchIntervalMs: 20 })
    await new Promise((r) => setTimeout(r, 100))
    // A change: a new pod appears in the manifests.
    m.write('late.yaml', 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: late\nspec:\n  containers: [{ name: c, volumeMounts: [{ name: s, mountPath: /s }] }]\n  volumes: [{ name: s, emptyDir: {} }]\n')
    const deadline = Date.now() + 10_000
    while (Date.now() < deadline && !agent.pods.getPods().some((p) => p.metadata.name === 'late')) await new Promise((r) => setTimeout(r, 20))
    await new Promise((r) => setTimeout(r, 300))
    stop()
    const r = await watching
    expect(r.code).toBe(0)
    const listings = r.stdout.split(/^node n1 /m).filter(Boolean)
    expect(listings.length).toBeGreaterThanOrEqual(2)
    expect(listings[0]).not.toContain('default/late')
    expect(listings.at(-1)).toContain('default/late')
  })

  it('exits 3 with what to do when no agent answers', async () => {
    const r = await cli(['status', '--server', 'http://127.0.0.1:1'])
    expect(r.code).toBe(3)
    expect(r.stderr).toMatch(/^error: cannot reach the agent at http:\/\/127\.0\.0\.1:1 .*--server\n$/)
  })
})

describe('kubevol explain', () => {
  it('shows each volume of a pod by name', async () => {
    const r = await cli(['explain', 'db', '--server', server])
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/^Name: +db$/m)
    expect(r.stdout).toMatch(/^Namespace: +default$/m)
    expect(r.stdout).toMatch(/^UID: +[0-9a-f]+$/m)
    expect(r.stdout).toMatch(/^data\s+file-disk\s+mounted\s+0$/m)
    // A mounted pod's line gives its age, and no count of zero failures.
    expect(r.stdout).toMatch(/^Volumes: +mounted \(for \d+s\)$/m)
    expect(r.stdout).not.toMatch(/0 failed/)
  })

  it('has an Events section with ages as kubectl describe shows them, repeats counted', async () => {
    const r = await cli(['explain', 'stuck', '--server', server])
    const events = r.stdout.slice(r.stdout.indexOf('\nEvents:\n'))
    expect(events).toMatch(/^ {2}TYPE\s+REASON\s+AGE\s+FROM\s+MESSAGE$/m)
    expect(events).toMatch(/^ {2}Warning\s+FailedMount\s+\d+s \(x\d+ over \d+s\)\s+kubevol\s+MountVolume\.SetUp failed for volume "cfg".*missing/m)
    // No epoch milliseconds and no ISO times anywhere. The UID line is left out: a static pod's UID
    // is an md5 in hex, which now and then holds 13 decimal digits in a row.
    expect(r.stdout).toMatch(/^UID: +[0-9a-f]{32}$/m)
    expect(r.stdout.replace(/^UID: +[0-9a-f]{32}$/m, 'UID:')).not.toMatch(/\d{13}|\d{4}-\d\d-\d\dT/)
    const db = await cli(['explain', 'db', '--server', server])
    expect(db.stdout).toMatch(/\nEvents:( {2}<none>\n|\n)/)
  })

  it('shows the next retry as a time ahead, and the whole error in -o json', async () => {
    const r = await cli(['explain', 'stuck', '--server', server, '-o', 'json'])
    const pod = JSON.parse(r.stdout) as { events: { reason: string; count: number }[] }
    expect(pod.events.some((e) => e.reason === 'FailedMount' && e.count > 1)).toBe(true)
    const table = await cli(['explain', 'stuck', '--server', server])
    expect(table.stdout).toMatch(/^cfg\s+configmap\s+\S+\s+[1-9]\d*\s+(in \d+s\s+|now\s+)?volume_mount: MountVolume\.SetUp failed .*configmap "missing" not found$/m)
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
    expect(r.stderr).toBe('error: pod nobody is not known to the agent (see `kubevol status`)\n')
  })
})
