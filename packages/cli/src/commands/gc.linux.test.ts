/**
 * `kubevol gc` against the root of a running agent, on the real Linux host (root): the agent holds
 * the root's flock, gc is refused and the live pod's files stay; once the agent is gone, gc still
 * keeps what the journal records as set up unless --force. A lock holder killed by SIGKILL leaves
 * the root free (the kernel drops a flock with its holder). No mounts are made: the pod has a plain
 * emptyDir, so nothing here needs a private mount namespace.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Agent, startAgent } from '@kubevol/agent'
import type { Host } from '@kubevol/core'
import { afterAll, describe, expect, it } from 'vitest'
import { cli } from '../../test/helpers.js'
import { loadLinuxAdapter } from '../host-loader.js'

const isRoot = process.platform === 'linux' && process.getuid?.() === 0
const reason = isRoot ? undefined : `needs root on Linux (uid ${process.getuid?.() ?? 'unknown'})`
if (reason && process.env.CI !== 'true') console.warn(`[cli] skipping the gc lock test: ${reason}`)

const POD = `apiVersion: v1
kind: Pod
metadata: { name: live, uid: live-pod }
spec:
  containers: [{ name: c, volumeMounts: [{ name: cache, mountPath: /cache }] }]
  volumes: [{ name: cache, emptyDir: {} }]
`

async function until(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

describe.skipIf(reason !== undefined && process.env.CI !== 'true')('kubevol gc and the agent lock on the Linux host', () => {
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'kubevol-gc-lock-')))
  const rootDir = join(base, 'root')
  const manifestDir = join(base, 'manifests')
  const agents: Agent[] = []
  const children: ChildProcess[] = []
  afterAll(async () => {
    for (const agent of agents) await agent.stop()
    for (const child of children) child.kill('SIGKILL')
    rmSync(base, { recursive: true, force: true })
  })

  it('refuses gc while the agent runs, keeps journaled pods without --force, and is free again after a SIGKILL', async () => {
    if (reason) throw new Error(`${reason}; CI must run this test as root`)
    mkdirSync(manifestDir, { recursive: true })
    writeFileSync(join(manifestDir, 'live.yaml'), POD)
    const start = () =>
      startAgent(
        { nodeName: 'n1', host: 'linux', rootDir, manifestDir, port: 0, manifestRescanMs: 200, statsPeriodMs: 0, shutdownGraceMs: 2_000 },
        { log: { silent: true }, manager: { backoff: { initialMs: 20, maxMs: 500 }, housekeepingPeriodMs: 0 } as object },
      )
    const agent = await start()
    agents.push(agent)
    await until('the pod set up', () => agent.manager.getMountedVolumesForPod('live-pod').size === 1)
    const cache = join(rootDir, 'pods/live-pod/volumes/kubernetes.io~empty-dir/cache')
    writeFileSync(join(cache, 'data'), 'live bytes')
    // The pod leaves the manifests but gc is run now, as if the agent had not seen it yet: only the lock protects it.
    const host: Host = (await loadLinuxAdapter()).createLinuxHost()
    const gc = (...flags: string[]) => cli(['gc', '--root-dir', rootDir, ...flags], { host })

    for (const flags of [[], ['--force'], ['--dry-run']]) {
      const refused = await gc(...flags)
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain(`the root ${rootDir} is in use by kubevol (pid ${process.pid}); stop the agent first`)
    }
    expect(readFileSync(join(cache, 'data'), 'utf8')).toBe('live bytes')
    expect(readFileSync(join(rootDir, 'kubevol.lock'), 'utf8')).toBe(`${process.pid}\n`)

    // A second agent on the same root does not start.
    await expect(start()).rejects.toThrow(`the root ${rootDir} is in use by kubevol (pid ${process.pid})`)

    // Stopped (volumes left in place, as at every shutdown): the journal still records the set-up.
    await agent.stop()
    agents.length = 0
    const kept = await gc()
    expect(kept.code).toBe(1)
    expect(kept.stdout).toMatch(/^live-pod\s+refused\s+the journal records volumes "cache" of this pod as set up; pass --force/m)
    expect(readFileSync(join(cache, 'data'), 'utf8')).toBe('live bytes')
    // With --force the journal no longer keeps it (emptied first: the cleanup removes only empty volume directories).
    rmSync(join(cache, 'data'))
    const forced = await gc('--force')
    expect(forced.stdout).toMatch(/^live-pod\s+removed/m)
    expect(forced.code).toBe(0)
    expect(existsSync(join(rootDir, 'pods/live-pod'))).toBe(false)

    // Any holder of the flock refuses gc; killed with SIGKILL, it leaves the root free (--no-fork: the
    // process that holds the lock is the one killed).
    const holder = spawn('flock', ['--exclusive', '--nonblock', '--no-fork', join(rootDir, 'kubevol.lock'), 'sleep', '60'], { stdio: 'ignore' })
    children.push(holder)
    await until('flock holds the lock', () => {
      try {
        return readFileSync(`/proc/${holder.pid}/cmdline`, 'utf8').startsWith('sleep')
      } catch {
        return false
      }
    })
    expect((await gc()).stderr).toContain(`the root ${rootDir} is in use by kubevol`)
    holder.kill('SIGKILL')
    await once(holder, 'exit')
    expect(await gc()).toMatchObject({ code: 0, stdout: 'no orphaned pod directories\n' })
  }, 60_000)
})
