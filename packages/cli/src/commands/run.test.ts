import { execFile } from 'node:child_process'
import { existsSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { createMemoryHost } from '@kubevol/adapter-mock'
import { afterEach, describe, expect, it } from 'vitest'
import { EXAMPLES, cli, manifestDir } from '../../test/helpers.js'
import { runCli } from '../cli.js'
import { mockNotice } from './run.js'

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
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [MAIN, 'run', '--once', '--pod-manifest-path', EXAMPLES], { timeout: 30_000 })
    const rows = stdout.split('\n').filter((l) => l.startsWith('default/')).map((l) => l.split(/\s{2,}/))
    expect(rows.map((r) => r.slice(0, 3))).toEqual(EXPECTED)
    expect(rows.every((r) => r[3] === 'mounted')).toBe(true)
    expect(stdout).toMatch(/^POD\s+VOLUME\s+TYPE\s+PHASE$/m)
    // Seconds, as a person reads them, not milliseconds.
    expect(stdout).toMatch(/^converged: 2 pods, 9 volumes mounted in \d+\.\ds$/m)
    expect(stderr).toContain('running on the in-memory host')
    // The fileDisk image and local PV path exist only in memory.
    expect(existsSync('/var/lib/kubevol-images/data.img')).toBe(false)
  })

  it('mounts every example volume on a given memory host and leaves the mounts in place', async () => {
    const host = createMemoryHost()
    host.allocateFile('/var/lib/kubevol-images/data.img', 64 << 20)
    await host.mkdir('/mnt/kubevol-local/vol1', { recursive: true })
    const r = await cli(['run', '--once', '--pod-manifest-path', EXAMPLES, '-o', 'json'], { host })
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
    const r = await cli(['run', '--once', '--pod-manifest-path', m.dir, '--timeout', '10s'])
    expect(r.code).toBe(1)
    expect(r.stdout).toMatch(/^not converged after \d+\.\ds: 2 pods, 9 volumes mounted$/m)
    // The reason once, in the error.
    expect(r.stderr).toMatch(/^error: not converged after \d+\.\ds: .*broken\.yaml:\d+: /m)
    expect(`${r.stdout}${r.stderr}`.split(join(m.dir, 'broken.yaml'))).toHaveLength(2)
    expect(r.stdout.split('\n').filter((l) => /^default\/.* mounted$/.test(l))).toHaveLength(9)
  })

  it('exits 1 at the deadline naming the volume that cannot mount', async () => {
    const m = manifestDir(false)
    dirs.push(m)
    m.write('pod.yaml', 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: lonely\nspec:\n  containers: [{ name: c, volumeMounts: [{ name: cfg, mountPath: /c }] }]\n  volumes: [{ name: cfg, configMap: { name: missing } }]\n')
    const r = await cli(['run', '--once', '--pod-manifest-path', m.dir, '--timeout', '1500ms'])
    expect(r.code).toBe(1)
    // Each failure once, by its cause, in a line a person reads: not a list and then the same again on stderr.
    expect(r.stderr).toMatch(/\nerror: not converged after 1\.\ds: default\/lonely volume cfg is [\w -]+ \(configmap "missing" not found\)\n$/)
    expect(`${r.stdout}${r.stderr}`.split('configmap "missing" not found')).toHaveLength(2)
    expect(r.stdout).toMatch(/^default\/lonely\s+cfg\s+configmap\s+\S+/m)
    // With --no-headers: the rows alone; the error still says why.
    const bare = await cli(['run', '--once', '--pod-manifest-path', m.dir, '--timeout', '500ms', '--no-headers'])
    expect(bare.code).toBe(1)
    expect(bare.stdout).toMatch(/^default\/lonely\s+cfg\s+configmap\s+\S+\n$/)
    expect(bare.stderr).toMatch(/^error: not converged after/m)
    // JSON holds the reasons; the error says where they are.
    const json = await cli(['run', '--once', '--pod-manifest-path', m.dir, '--timeout', '500ms', '-o', 'json'])
    expect((JSON.parse(json.stdout) as { reasons: string[] }).reasons).toEqual([expect.stringMatching(/^default\/lonely volume cfg is .*configmap "missing" not found/)])
    expect(json.stderr).toMatch(/\nerror: not converged after \d+\.\ds \(the reasons are in the report\)\n$/)
  })

  it('without --once serves the status endpoints until stopped', async () => {
    let stop: () => void = () => {}
    const stopSignal = new Promise<void>((resolve) => (stop = resolve))
    let url = ''
    const running = cli(['run', '--pod-manifest-path', EXAMPLES, '--address', '127.0.0.1', '--port', '0', '--logging-format', 'json', '-v', '0'], {
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
    { argv: ['--mode=cluster'], message: 'invalid argument "cluster" for "--mode" flag: allowed: static, api' },
    { argv: ['--config=/nonexistent.yaml'], message: 'config: "/nonexistent.yaml" (from the config path) is not allowed; allowed: a readable file' },
    { argv: ['--kubeconfig', '/k', '--pod-manifest-path', '/m'], message: 'not both' },
    { argv: ['--port', 'http'], message: 'invalid argument "http" for "--port" flag' },
  ])('exits 2 for $message', async ({ argv, message }) => {
    const r = await cli(['run', '--once', ...argv])
    expect(r.code).toBe(2)
    expect(r.stderr).toContain(message)
  })
})

describe('kubevol run --host linux on an older kernel', () => {
  it.each([
    { name: 'run', argv: [] },
    { name: 'run --once', argv: ['--once'] },
  ])('$name refuses in one line naming the kernel and what it lacks, exit 2, making nothing', async ({ argv }) => {
    const m = manifestDir(false)
    dirs.push(m)
    const root = join(m.dir, 'root')
    const r = await cli(['run', ...argv, '--host', 'linux', '--root-dir', root, '--pod-manifest-path', m.dir, '--port', '0'], {
      probeKernelFloor: () => ({ release: '5.4.0-150-generic', openat2: false, newMountApi: true }),
    })
    expect(r.code).toBe(2)
    expect(r.stdout).toBe('')
    expect(r.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(/^error: the kernel \(Linux 5\.4\.0-150-generic\) is too old for the Linux host: it lacks openat2 \(Linux 5\.6\);/)])
    expect(existsSync(root)).toBe(false)
  })
})

describe('kubevol run --pod-manifest-path', () => {
  it.each([
    { name: 'a missing path', path: '/nonexistent/kubevol-manifests', message: 'error: --pod-manifest-path /nonexistent/kubevol-manifests: no such file or directory' },
    { name: 'a file that is no manifest', path: fileURLToPath(import.meta.url), message: 'not a directory or a manifest file (.yaml, .yml or .json)' },
  ])('refuses $name in one line, exit 2, instead of converging on nothing', async ({ path, message }) => {
    const r = await cli(['run', '--once', '--pod-manifest-path', path])
    expect(r.code).toBe(2)
    expect(r.stdout).toBe('')
    expect(r.stderr.trimEnd().split('\n')).toEqual([expect.stringContaining(message)])
  })

  it('accepts one manifest file, as the kubelet does', async () => {
    const m = manifestDir(false)
    dirs.push(m)
    // Only the file given is read, not the one beside it.
    m.write('pod.yaml', 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: solo\nspec:\n  containers: [{ name: c, volumeMounts: [{ name: s, mountPath: /s }] }]\n  volumes: [{ name: s, emptyDir: {} }]\n')
    m.write('other.yaml', 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: other\nspec:\n  containers: [{ name: c }]\n')
    const r = await cli(['run', '--once', '--pod-manifest-path', join(m.dir, 'pod.yaml'), '-o', 'json', '--timeout', '20s'])
    expect(r.code).toBe(0)
    const report = JSON.parse(r.stdout) as { converged: boolean; volumes: { pod: string; volume: string; phase: string }[] }
    expect(report.converged).toBe(true)
    expect(report.volumes.map((v) => [v.pod, v.volume, v.phase])).toEqual([['default/solo', 's', 'mounted']])
  })
})

describe('kubevol run --once converges: the actual state equals the desired state', () => {
  it('tears down what a removed pod left (pod mounts, the global mount, the loop device) before saying converged', async () => {
    const m = manifestDir()
    dirs.push(m)
    const host = createMemoryHost()
    host.allocateFile('/var/lib/kubevol-images/data.img', 64 << 20)
    await host.mkdir('/mnt/kubevol-local/vol1', { recursive: true })
    expect((await cli(['run', '--once', '--pod-manifest-path', m.dir], { host })).code).toBe(0)
    expect(await host.loopDevices?.find('/var/lib/kubevol-images/data.img')).toHaveLength(1)
    const globalMounts = () => host.mountTargets().filter((t) => t.startsWith('/var/lib/kubevol/plugins/'))
    expect(globalMounts()).not.toEqual([])
    // The db pod (its fileDisk claim on a loop device, globally mounted) is removed; the detach is
    // slow, as a real one can be, so that a report before it would be seen.
    rmSync(join(m.dir, 'db.yaml'))
    host.faults.delay(500, { method: 'loopDevices.detach' })
    // What the host holds at the moment the report is written (stopping the agent afterwards may finish more).
    let atReport: { mounts: string[]; loops: Promise<readonly unknown[]> } | undefined
    let stdout = ''
    const io = {
      stdout: {
        write: (t: string) => {
          stdout += t
          if (t.includes('converged') && !atReport) atReport = { mounts: globalMounts(), loops: host.loopDevices!.find('/var/lib/kubevol-images/data.img') }
        },
      },
      stderr: { write: () => {} },
      isTTY: false,
      env: {},
      cwd: process.cwd(),
    }
    const code = await runCli(['run', '--once', '--pod-manifest-path', m.dir, '--timeout', '20s'], io, { host })
    expect(code).toBe(0)
    expect(stdout).toContain('converged: 1 pod,')
    expect(atReport?.mounts).toEqual([])
    expect(await atReport?.loops).toEqual([])
  })

  it('does not wait for a volume no container mounts, and labels it by its type', async () => {
    const m = manifestDir(false)
    dirs.push(m)
    m.write('pod.yaml', 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers: [{ name: c, volumeMounts: [{ name: used, mountPath: /u }] }]\n  volumes: [{ name: used, emptyDir: {} }, { name: spare, configMap: { name: nowhere } }]\n')
    const started = Date.now()
    const r = await cli(['run', '--once', '--pod-manifest-path', m.dir, '--timeout', '30s', '-o', 'json'])
    expect(r.code).toBe(0)
    expect(Date.now() - started).toBeLessThan(10_000)
    const report = JSON.parse(r.stdout) as { converged: boolean; volumes: { volume: string; type: string; phase: string }[] }
    expect(report.converged).toBe(true)
    expect(report.volumes.find((v) => v.volume === 'spare')).toMatchObject({ type: 'configMap', phase: 'unused' })
    expect(report.volumes.find((v) => v.volume === 'used')).toMatchObject({ type: 'empty-dir', phase: 'mounted' })
  })

  it('says at once that a volume type is not supported, and which are', async () => {
    const m = manifestDir(false)
    dirs.push(m)
    m.write('pod.yaml', 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers: [{ name: c, volumeMounts: [{ name: share, mountPath: /s }] }]\n  volumes: [{ name: share, nfs: { server: nfs.example, path: /export } }]\n')
    const started = Date.now()
    const r = await cli(['run', '--once', '--pod-manifest-path', m.dir, '--timeout', '60s'])
    expect(r.code).toBe(1)
    expect(Date.now() - started).toBeLessThan(10_000)
    expect(r.stdout).toMatch(/^default\/p\s+share\s+nfs\s+unsupported$/m)
    expect(r.stderr).toMatch(/^error: not converged after \d+\.\ds: default\/p volume share: volume type nfs is not supported; supported: configMap, csi, downwardAPI, emptyDir, ephemeral, hostPath, persistentVolumeClaim, projected, secret$/m)
  })
})

describe('the in-memory notice', () => {
  it('suggests a command that works under sudo (which resets PATH): node and the script by path', () => {
    const script = '/home/me/kubevol/packages/cli/bin/kubevol.js'
    expect(mockNotice(script)).toContain(`sudo ${process.execPath} ${script} run --host linux --root-dir /var/lib/kubevol`)
    expect(mockNotice(undefined)).toContain('sudo kubevol run --host linux')
  })
})
