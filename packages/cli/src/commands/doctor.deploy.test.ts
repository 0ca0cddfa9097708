/**
 * `kubevol doctor` and deploy/ agree on hostPID: kubevol enters no other namespace, it mounts in its
 * own and its volumes reach the host through the root directory's Bidirectional (shared) mount. So
 * the DaemonSet has no hostPID, its README says so, and doctor, run in such a container, fails only
 * when the root is not on a shared mount, and never asks for hostPID.
 */
import { readFileSync } from 'node:fs'
import { createMemoryHost } from '@kubevol/adapter-mock'
import { parseAllDocuments } from 'yaml'
import { describe, expect, it } from 'vitest'
import { type DoctorEnvironment, runDoctorChecks } from './doctor.js'

const deploy = new URL('../../../../deploy/', import.meta.url)
const read = (name: string) => readFileSync(new URL(name, deploy), 'utf8')

/** A node where every tool is present, with the adapter's two namespace checks as given. */
function node(ns: { ok: boolean; message: string }, rootShared: boolean): DoctorEnvironment {
  return {
    uid: 0,
    kernel: '6.1.0-13-amd64',
    path: '/usr/sbin:/usr/bin',
    exists: (p) => (p === '/dev/loop-control' ? 'other' : p.startsWith('/usr/') ? 'file' : p.startsWith('/var/lib/kubevol') ? 'dir' : undefined),
    loadAdapter: async () => ({
      createLinuxHost: () => createMemoryHost(),
      checkMountNamespace: async () => ({ name: 'mount-namespace', ...ns }),
      checkRootPropagation: async () => ({ name: 'root-propagation', ok: rootShared, message: rootShared ? 'shared' : '/var/lib/kubevol is on the private mount /' }),
      probeKernelFloor: () => ({ release: '6.1.0-13-amd64', openat2: true, newMountApi: true }),
    }),
  }
}

// What checkMountNamespace answers in each place (it compares /proc/self/ns/mnt with /proc/1/ns/mnt).
const containerNs = { ok: false, message: 'running in mount namespace mnt:[4026532601], the host\'s is mnt:[4026531841]: volumes would not be visible to containers' }
const hostNs = { ok: true, message: 'running in the host mount namespace (mnt:[4026531841])' }

describe('hostPID: doctor and deploy/ say the same', () => {
  it('the DaemonSet has no hostPID, and deploy/README.md says it is not needed', () => {
    const [ds] = parseAllDocuments(read('daemonset.yaml')).map((d) => d.toJS())
    expect(ds.spec.template.spec.hostPID).toBeUndefined()
    expect(read('README.md')).toMatch(/`hostPID` is not needed/)
  })

  it.each([
    { name: 'the DaemonSet: own mount namespace, root a Bidirectional hostPath', ns: containerNs, rootShared: true, failed: [] },
    { name: 'the DaemonSet with a root that does not propagate', ns: containerNs, rootShared: false, failed: ['root-propagation'] },
    { name: 'a plain host', ns: hostNs, rootShared: true, failed: [] },
  ])('$name: fails $failed', async ({ ns, rootShared, failed }) => {
    const checks = await runDoctorChecks({ root: '/var/lib/kubevol', csiDir: '/var/lib/kubevol/plugins' }, node(ns, rootShared))
    expect(checks.filter((c) => c.status === 'fail').map((c) => c.name)).toEqual(failed)
    expect(checks.find((c) => c.name === 'mount-namespace')?.status).toBe(ns.ok ? 'ok' : 'warn')
    // No advice to add hostPID anywhere; where it is named, it is named as not needed.
    for (const c of checks) expect(`${c.message} ${c.fix ?? ''}`.replace(/hostPID is not needed/g, '')).not.toMatch(/hostPID/i)
  })
})
