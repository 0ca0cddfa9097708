import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { createMemoryHost } from '@kubevol/adapter-mock'
import { afterEach, describe, expect, it } from 'vitest'
import { EXAMPLES, cli, manifestDir } from '../../test/helpers.js'
import { parseListen } from './run.js'

const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url))
const dirs: { cleanup(): void }[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) d.cleanup()
})

const EXPECTED = [
  ['default/db', 'cache', 'local-volume'],
  ['default/db', 'data', 'file-disk'],
  ['default/db', 'logs', 'host-path'],
  ['default/web', 'bundle', 'projected'],
  ['default/web', 'cache', 'empty-dir (Memory)'],
  ['default/web', 'config', 'configmap'],
  ['default/web', 'creds', 'secret'],
  ['default/web', 'podinfo', 'downward-api'],
  ['default/web', 'scratch', 'empty-dir'],
]

describe('kubevol run --once', () => {
  it.skipIf(!existsSync(MAIN))('as a process on examples/manifests: the summary table and exit 0, touching nothing real', async () => {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [MAIN, 'run', '--once', '--manifests', EXAMPLES], { timeout: 30_000 })
    const rows = stdout.split('\n').filter((l) => l.startsWith('default/')).map((l) => l.split(/\s{2,}/))
    expect(rows.map((r) => r.slice(0, 3))).toEqual(EXPECTED)
    expect(rows.every((r) => r[3] === 'mounted')).toBe(true)
    expect(stdout).toMatch(/^POD\s+VOLUME\s+TYPE\s+PHASE$/m)
    expect(stdout).toContain('converged: 2 pods, 9 volumes mounted')
    expect(stderr).toContain('running on the in-memory host')
    // The fileDisk image and local PV path exist only in memory.
    expect(existsSync('/var/lib/kubevol-images/data.img')).toBe(false)
  })

  it('mounts every example volume on a given memory host and leaves the mounts in place', async () => {
    const host = createMemoryHost()
    host.allocateFile('/var/lib/kubevol-images/data.img', 64 << 20)
    await host.mkdir('/mnt/kubevol-local/vol1', { recursive: true })
    const r = await cli(['run', '--once', '--manifests', EXAMPLES, '-o', 'json'], { host })
    expect(r.code).toBe(0)
    const report = JSON.parse(r.stdout) as { converged: boolean; volumes: { pod: string; volume: string; type: string; phase: string }[] }
    expect(report.converged).toBe(true)
    expect(report.volumes.map((v) => [v.pod, v.volume, v.type]).sort()).toEqual(EXPECTED)
    const podMounts = host.mountTargets().filter((t) => t.startsWith('/var/lib/kubevol/pods/'))
    // Both emptyDirs on disk and in memory, configMap, secret, downwardAPI, projected are tmpfs or
    // plain dirs; what must stay is every mount --once made.
    expect(podMounts.length).toBeGreaterThanOrEqual(6)
    expect(await host.loopDevices?.find('/var/lib/kubevol-images/data.img')).toHaveLength(1)
  })

  it('exits 1 naming the broken manifest, after mounting the good pods', async () => {
    const m = manifestDir()
    dirs.push(m)
    m.write('broken.yaml', 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: Broken_Name\nspec:\n  containers: [{ name: c }]\n')
    const r = await cli(['run', '--once', '--manifests', m.dir, '--timeout', '10s'])
    expect(r.code).toBe(1)
    expect(r.stdout).toContain('not converged')
    expect(r.stdout).toContain(join(m.dir, 'broken.yaml'))
    expect(r.stderr).toMatch(/^kubevol: not converged: .*broken\.yaml:\d+: /m)
    expect(r.stdout.split('\n').filter((l) => / mounted$/.test(l))).toHaveLength(9)
  })

  it('exits 1 at the deadline naming the volume that cannot mount', async () => {
    const m = manifestDir(false)
    dirs.push(m)
    m.write('pod.yaml', 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: lonely\nspec:\n  containers: [{ name: c, volumeMounts: [{ name: cfg, mountPath: /c }] }]\n  volumes: [{ name: cfg, configMap: { name: missing } }]\n')
    const r = await cli(['run', '--once', '--manifests', m.dir, '--timeout', '1500ms', '-o', 'wide'])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/not converged: default\/lonely volume cfg is /)
  })

  it('without --once serves the status endpoints until stopped', async () => {
    let stop: () => void = () => {}
    const stopSignal = new Promise<void>((resolve) => (stop = resolve))
    let url = ''
    const running = cli(['run', '--manifests', EXAMPLES, '--listen', '127.0.0.1:0', '--log-format', 'json', '--verbosity', '0'], {
      stopSignal,
      onStarted: (agent) => (url = agent.url),
    })
    const deadline = Date.now() + 10_000
    while (url === '' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
    expect((await fetch(`${url}/livez`)).status).toBe(200)
    stop()
    const r = await running
    expect(r.code).toBe(0)
    expect(r.stderr).toContain(`serving ${url}`)
  })

  it.each([
    { argv: ['--mode=cluster'], message: 'mode: "cluster" (from --mode) is not allowed' },
    { argv: ['--kubeconfig', '/k', '--manifests', '/m'], message: 'not both' },
    { argv: ['--listen', 'here'], message: '--listen: "here" is not HOST:PORT' },
  ])('exits 2 for $message', async ({ argv, message }) => {
    const r = await cli(['run', '--once', ...argv])
    expect(r.code).toBe(2)
    expect(r.stderr).toContain(message)
  })

  it.each([
    ['127.0.0.1:8080', { address: '127.0.0.1', port: 8080 }],
    [':9000', { port: 9000 }],
    ['9000', { port: 9000 }],
    ['[::1]:80', { address: '::1', port: 80 }],
  ])('reads --listen %s', (text, expected) => {
    expect(parseListen(text)).toEqual(expected)
  })
})
