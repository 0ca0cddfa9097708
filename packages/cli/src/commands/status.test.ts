import { createMemoryHost } from '@kubevol/adapter-mock'
import { type Agent, startAgent } from '@kubevol/agent'
import { parse } from 'yaml'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { cli, manifestDir } from '../../test/helpers.js'
import { ERROR_WIDTH, causeOf } from '../output.js'

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
      const state = JSON.parse((await cli(['status', '--server', server, '-o', 'json'])).stdout) as { desired: { pod: string; lastError?: string }[] }
      const error = state.desired.find((d) => d.pod === 'default/stuck')?.lastError ?? ''
      expect(error).toMatch(/^MountVolume\.SetUp failed for volume "cfg" \(UniqueName: .*\) pod "stuck" \(UID: .*\) : configmap "missing" not found$/)
      expect(r.stdout).toContain(error)
    }, 10_000)
  })

  it('shows the cause of an error in the table, its failures and retries, and types as run does', async () => {
    const r = await cli(['status', '--server', server])
    const stuck = r.stdout.split('\n').find((l) => l.startsWith('default/stuck'))!
    // The kubelet's text puts the cause last: the table gives the cause, not the operation's preamble.
    expect(stuck).toMatch(/^default\/stuck\s+cfg\s+configmap\s+\S.*\(\d+ failures?.*\)\s+configmap "missing" not found$/)
    for (const l of r.stdout.split('\n')) expect(l.length).toBeLessThan(200)
    // The same label as `run` gives a Memory emptyDir.
    expect(r.stdout).toMatch(/^default\/web\s+cache\s+empty-dir \(Memory\)\s+mounted/m)
    expect(r.stdout).not.toMatch(/\d{4}-\d\d-\d\dT/)
    // Between two attempts the time of the next is shown.
    await vi.waitFor(async () => {
      const again = (await cli(['status', '--server', server])).stdout.split('\n').find((l) => l.startsWith('default/stuck'))!
      expect(again).toMatch(/backing-off \(\d+ failures?, retry (in \d+s|now)\)/)
    }, 10_000)
  })

  it.each([
    ['an operation\'s text', 'MountVolume.SetUp failed for volume "cfg" (UniqueName: "kubernetes.io/configmap/u-cfg") pod "web" (UID: "u") : configmap "web-config" not found', 'configmap "web-config" not found'],
    ['one without a pod', 'UnmountDevice failed for volume "d" (UniqueName: "kubernetes.io/csi/x^y") : rpc error: code = Unavailable', 'rpc error: code = Unavailable'],
    ['one with a cause and no colon', 'MountVolume.MountOptionSupport check failed for volume "v" (UniqueName: "u") pod "p" (UID: "u") mount options are not supported for this volume type', 'mount options are not supported for this volume type'],
    ['a text of no operation', 'unmounted volumes=[cfg], unattached volumes=[], failed to process volumes=[]: context deadline exceeded', `…${'unattached volumes=[], failed to process volumes=[]: context deadline exceeded'.slice(-(ERROR_WIDTH - 1))}`],
    ['a long path, to its last two levels', 'MountVolume.SetUp failed for volume "f" (UniqueName: "u") pod "p" (UID: "u") : EIO: mount /var/lib/kubelet/pods/6f1c2a9e-0d4b-4c55-9a7e-3b2f1d0c8e77/volumes/kubernetes.io~empty-dir/f: injected fault', 'EIO: mount …/kubernetes.io~empty-dir/f: injected fault'],
    ['a long cause, its end kept', `MountVolume.MountDevice failed for volume "d" (UniqueName: "u") : mount failed: exit status 32\nOutput: ${'x'.repeat(80)} wrong fs type`, `…${`${'x'.repeat(80)} wrong fs type`.slice(-(ERROR_WIDTH - 1))}`],
  ])('cuts %s to its cause', (_name, message, cause) => {
    expect(causeOf(message)).toBe(cause)
    expect(causeOf(message).length).toBeLessThanOrEqual(ERROR_WIDTH)
  })

  it('leaves the header rows and the summary line out with --no-headers', async () => {
    const r = await cli(['status', '--server', server, '--no-headers'])
    expect(r.stdout).not.toMatch(/^POD\s/m)
    expect(r.stdout).not.toContain('node n1')
    expect(r.stdout).toMatch(/^default\/web\s+scratch\s+empty-dir\s+mounted/m)
    expect(r.stdout.split('\n')[0]).toMatch(/^default\/\S+\s+\S+/)
  })

  it('prints one pod a line with -o name, which explain takes', async () => {
    const r = await cli(['status', '--server', server, '-o', 'name'])
    expect(r.code).toBe(0)
    expect(r.stdout).toBe('pod/default/db\npod/default/stuck\npod/default/web\n')
    const explained = await cli(['explain', 'pod/default/db', '--server', server])
    expect(explained.code).toBe(0)
    expect(explained.stdout).toMatch(/^Name: +db$/m)
  })

  it('with --watch prints again when the state changes, until stopped', async () => {
    let stop: () => void = () => {}
    const stopSignal = new Promise<void>((resolve) => (stop = resolve))
    const watching = cli(['status', '--server', server, '--watch'], { stopSignal, watchIntervalMs: 20 })
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

describe('status and explain', () => {
  it('read the same state: a volume retried after failures shows them while its operation runs', async () => {
    const host = createMemoryHost()
    const dir = manifestDir(false)
    dir.write('flaky.yaml', 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: flaky\nspec:\n  containers: [{ name: c, volumeMounts: [{ name: f, mountPath: /f }] }]\n  volumes: [{ name: f, emptyDir: { medium: Memory } }]\n')
    const isFlaky = (call: { method: string; path?: string }) => call.method === 'mount' && /kubernetes\.io~empty-dir\/f$/.test(call.path ?? '')
    const failing = host.faults.failOn(isFlaky, 'EIO')
    const flaky = await startAgent(
      { nodeName: 'n2', mode: 'static', manifestDir: dir.dir, port: 0, statsPeriodMs: 0, podSyncRetryMs: 50 },
      { host, log: { silent: true }, manager: { backoff: { initialMs: 20, maxMs: 40 } } },
    )
    try {
      const uid = await vi.waitFor(() => {
        const u = flaky.pods.getPods()[0]?.metadata.uid as string
        expect((flaky.pod(u) as { volumes: { attempts: number }[] }).volumes[0]!.attempts).toBeGreaterThanOrEqual(2)
        return u
      }, 10_000)
      // The next attempt hangs: no backoff runs now, yet the failures before it are still the story.
      const hang = host.faults.hangOn(isFlaky)
      failing()
      await hang.reached()
      const fromStatus = JSON.parse((await cli(['status', '--server', flaky.url, '-o', 'json'])).stdout) as { desired: Record<string, unknown>[] }
      const fromExplain = JSON.parse((await cli(['explain', uid, '--server', flaky.url, '-o', 'json'])).stdout) as { volumes: Record<string, unknown>[] }
      const progress = (v: Record<string, unknown>) => ({ phase: v.phase, attempts: v.attempts, lastError: v.lastError, lastOperation: v.lastOperation })
      expect(progress(fromStatus.desired[0]!)).toEqual(progress(fromExplain.volumes[0]!))
      expect(progress(fromStatus.desired[0]!)).toMatchObject({ phase: 'running volume_mount', lastOperation: 'volume_mount', lastError: expect.stringMatching(/EIO/) })
      const table = (await cli(['status', '--server', flaky.url])).stdout
      expect(table).toMatch(/^default\/flaky\s+f\s+empty-dir \(Memory\)\s+running volume_mount \(\d+ failures\)\s+EIO: mount …\/kubernetes\.io~empty-dir\/f: injected fault$/m)
      hang.release()
      await vi.waitFor(async () => expect((await cli(['status', '--server', flaky.url])).stdout).toMatch(/^default\/flaky\s+f\s+empty-dir \(Memory\)\s+mounted$/m), 10_000)
    } finally {
      await flaky.stop()
      dir.cleanup()
    }
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
