import { createMemoryHost } from '@kubevol/adapter-mock'
import { describe, expect, it } from 'vitest'
import { cli } from '../../test/helpers.js'
import type { LinuxAdapter } from '../host-loader.js'
import type { DoctorEnvironment } from './doctor.js'

type KernelFloor = ReturnType<LinuxAdapter['probeKernelFloor']>

/** A node where every check passes, on a kernel offering `floor`. */
function node(floor: KernelFloor = { release: '6.1.0-13-amd64', openat2: true, newMountApi: true }): DoctorEnvironment {
  return {
    uid: 0,
    kernel: floor.release,
    path: '/usr/sbin:/usr/bin',
    exists: (p) => (p === '/dev/loop-control' ? 'other' : p.endsWith('/plugins') ? 'dir' : p.startsWith('/usr/') ? 'file' : undefined),
    loadAdapter: async () => ({
      createLinuxHost: () => createMemoryHost(),
      checkMountNamespace: async () => ({ name: 'mount-namespace', ok: true, message: 'host namespace' }),
      checkRootPropagation: async () => ({ name: 'root-propagation', ok: true, message: 'shared' }),
      probeKernelFloor: () => floor,
    }),
  }
}
const healthy = node()

describe('kubevol doctor', () => {
  it('exits 1 with a fix for each failed check', async () => {
    const env: DoctorEnvironment = {
      ...healthy,
      uid: 1000,
      kernel: '4.19.0',
      exists: () => undefined,
      loadAdapter: async () => {
        throw new Error('koffi cannot load')
      },
    }
    const r = await cli(['doctor', '-o', 'json'], { doctorEnvironment: env })
    expect(r.code).toBe(1)
    const checks = JSON.parse(r.stdout) as { name: string; status: string; fix?: string }[]
    const failed = checks.filter((c) => c.status === 'fail')
    expect(failed.map((c) => c.name)).toEqual(['root', 'kernel', 'ffi', 'loop-devices', 'filesystem-tools'])
    expect(failed.every((c) => c.fix)).toBe(true)
    expect(checks.find((c) => c.name === 'csi-sockets')).toMatchObject({ status: 'warn', fix: expect.stringContaining('mkdir -p') })
    expect(r.stderr).toBe('error: 5 checks failed: root, kernel, ffi, loop-devices, filesystem-tools\n')
  })

  it.each<{ name: string; floor: KernelFloor; failed: string[]; found: RegExp }>([
    { name: 'a kernel with both', floor: { release: '6.1.0-13-amd64', openat2: true, newMountApi: true }, failed: [], found: /^openat2\s+ok\s+openat2\(2\) is available/m },
    {
      name: 'a 5.4 kernel (no openat2)',
      floor: { release: '5.4.0-150-generic', openat2: false, newMountApi: true },
      failed: ['kernel', 'openat2'],
      found: /^openat2\s+FAIL\s+openat2\(2\) is missing on Linux 5\.4\.0-150-generic \(ENOSYS; it came with 5\.6\)/m,
    },
    {
      name: 'a 4.19 kernel (neither)',
      floor: { release: '4.19.0', openat2: false, newMountApi: false },
      failed: ['kernel', 'openat2', 'mount-api'],
      found: /^mount-api\s+FAIL\s+the new mount API \(open_tree, move_mount, fsopen\) is missing on Linux 4\.19\.0 \(ENOSYS; it came with 5\.2\)/m,
    },
  ])('reports openat2 and the new mount API: $name', async ({ floor, failed, found }) => {
    const r = await cli(['doctor', '--no-headers'], { doctorEnvironment: node(floor) })
    expect(r.stdout).toMatch(found)
    expect(r.stdout).toMatch(/^mount-api\s+/m)
    expect(r.code).toBe(failed.length === 0 ? 0 : 1)
    expect(r.stderr).toBe(failed.length === 0 ? '' : `error: ${failed.length} checks failed: ${failed.join(', ')}\n`)
  })

  it.skipIf(process.platform !== 'linux')('runs for real without changing anything', async () => {
    const r = await cli(['doctor'])
    expect([0, 1]).toContain(r.code)
    expect(r.stdout).toMatch(/^CHECK\s+STATUS\s+FOUND\s+FIX$/m)
    expect(r.stdout).toMatch(/^kernel\s+/m)
    // This kernel has both (the tests run on 5.8 or later): the probes are real system calls.
    expect(r.stdout).toMatch(/^openat2\s+ok\s+/m)
    expect(r.stdout).toMatch(/^mount-api\s+ok\s+/m)
  })
})
