import { createMemoryHost } from '@kubevol/adapter-mock'
import { describe, expect, it } from 'vitest'
import { cli } from '../../test/helpers.js'
import type { DoctorEnvironment } from './doctor.js'

const healthy: DoctorEnvironment = {
  uid: 0,
  kernel: '6.1.0-13-amd64',
  path: '/usr/sbin:/usr/bin',
  exists: (p) => (p === '/dev/loop-control' ? 'other' : p.endsWith('/plugins') ? 'dir' : p.startsWith('/usr/') ? 'file' : undefined),
  loadAdapter: async () => ({
    createLinuxHost: () => createMemoryHost(),
    checkMountNamespace: async () => ({ name: 'mount-namespace', ok: true, message: 'host namespace' }),
    checkRootPropagation: async () => ({ name: 'root-propagation', ok: true, message: 'shared' }),
  }),
}

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

  it.skipIf(process.platform !== 'linux')('runs for real without changing anything', async () => {
    const r = await cli(['doctor'])
    expect([0, 1]).toContain(r.code)
    expect(r.stdout).toMatch(/^CHECK\s+STATUS\s+FOUND\s+FIX$/m)
    expect(r.stdout).toMatch(/^kernel\s+/m)
  })
})
