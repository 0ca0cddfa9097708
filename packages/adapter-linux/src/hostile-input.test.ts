/**
 * Hostile pods on the real kernel: path traversal in a volume name, configMap item paths and keys,
 * subPath and subPathExpr, a hostPath type that does not match, and a symlink swapped in under a
 * subPath between the manager's check and the bind. Each fails its own pod; a well-formed pod beside
 * them is mounted; a canary directory outside the pod directories is untouched and nothing of it is
 * ever mounted; nothing outside the kubevol root is mounted; deleting the pods leaves no mount.
 */
import { mkdirSync, readFileSync, readdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs'
import { type Host, type Pod, type VolumeEvent, createVolumeManager } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'
import { parseMountInfo } from './mountinfo.js'

const mountInfo = () => parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'))

function pod(uid: string, volumes: unknown[], mounts: Record<string, unknown>[], env: unknown[] = []): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `pod-${uid}`, namespace: 'default', uid },
    spec: { nodeName: 'node-1', volumes, containers: [{ name: 'main', image: 'busybox', env, volumeMounts: mounts }] },
  } as unknown as Pod
}

/** The host, with a container's move made between the manager's subPath check and the bind. */
function swappingHost(host: Host, swap: (volumePath: string, subPath: string) => void): Host {
  return new Proxy(host, {
    get(target, key) {
      if (key === 'subPaths' && target.subPaths) {
        const subPaths = target.subPaths
        return {
          bind: async (volumePath: string, subPath: string, bindTarget: string, options?: { readonly readOnly?: boolean }) => {
            swap(volumePath, subPath)
            return subPaths.bind(volumePath, subPath, bindTarget, options)
          },
        }
      }
      const value = Reflect.get(target, key, target)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}

describeAsRoot('hostile pods on the Linux host', () => {
  const h = useLinuxHost()

  it('fail one by one with their own errors, and nothing escapes the pod directories', async () => {
    const { host, p } = h()
    const root = p('kubevol')
    const outside = p('outside')
    mkdirSync(`${outside}/dir`, { recursive: true })
    writeFileSync(`${outside}/canary`, 'canary')
    writeFileSync(`${outside}/dir/secret`, 'secret')
    const listing = () => JSON.stringify([readdirSync(outside).sort(), readdirSync(`${outside}/dir`).sort()])
    const before = listing()

    let swapped = 0
    const swapping = swappingHost(host, (volumePath, subPath) => {
      if (!volumePath.includes('/pods/swap/') || subPath !== 'logs') return
      // A container replaces the directory it was given by a symlink to the host's canary directory.
      renameSync(`${volumePath}/logs`, `${volumePath}/logs-moved`)
      symlinkSync(`${outside}/dir`, `${volumePath}/logs`)
      swapped++
    })
    const objects = createMemoryObjectReader()
    objects.put('ConfigMap', { metadata: { name: 'cfg', namespace: 'default' }, data: { k: 'v' } })
    objects.put('ConfigMap', { metadata: { name: 'evil', namespace: 'default' }, data: { '../../../../../outside/canary': 'pwned' } })
    const pods = createMemoryPodSource()
    const events: VolumeEvent[] = []
    const manager = createVolumeManager({
      host: swapping,
      plugins: createBuiltinPlugins(),
      podSource: pods,
      objects,
      nodeName: 'node-1',
      rootDir: root,
      controllerAttachDetach: false,
      recorder: { event: (e) => events.push(e) },
      backoff: { initialMs: 20, maxMs: 200 },
    })
    const stop = new AbortController()
    const running = manager.run(stop.signal)

    const good = pod('good', [{ name: 'scratch', emptyDir: {} }, { name: 'cfg', configMap: { name: 'cfg' } }], [
      { name: 'scratch', mountPath: '/s' },
      { name: 'cfg', mountPath: '/c' },
    ])
    const bad: { pod: Pod; error: RegExp }[] = [
      { pod: pod('name', [{ name: '../../../../../outside', emptyDir: {} }], [{ name: '../../../../../outside', mountPath: '/m' }]), error: /spec\.volumes\[0\]\.name: Invalid value/ },
      { pod: pod('item', [{ name: 'v', configMap: { name: 'cfg', items: [{ key: 'k', path: '../../../../../outside/canary' }] } }], [{ name: 'v', mountPath: '/m' }]), error: /must not contain '\.\.'/ },
      { pod: pod('key', [{ name: 'v', configMap: { name: 'evil' } }], [{ name: 'v', mountPath: '/m' }]), error: /must not contain '\.\.'/ },
      { pod: pod('sub', [{ name: 'v', emptyDir: {} }], [{ name: 'v', mountPath: '/m', subPath: '../../../../../outside/dir' }]), error: /must not contain '\.\.'/ },
      {
        pod: pod('expr', [{ name: 'v', emptyDir: {} }], [{ name: 'v', mountPath: '/m', subPathExpr: '$(D)' }], [{ name: 'D', value: '../../../../../outside/dir' }]),
        error: /must not contain '\.\.'/,
      },
      { pod: pod('link', [{ name: 'v', emptyDir: {} }], [{ name: 'v', mountPath: '/m', subPath: 'escape' }]), error: /not within volume path|symlink/ },
      { pod: pod('swap', [{ name: 'v', emptyDir: {} }], [{ name: 'v', mountPath: '/m', subPath: 'logs' }]), error: /not within volume path|symlink/ },
      { pod: pod('hosttype', [{ name: 'v', hostPath: { path: `${outside}/canary`, type: 'Directory' } }], [{ name: 'v', mountPath: '/m' }]), error: /is not a directory/ },
    ]
    pods.setPod(good)
    for (const b of bad) pods.setPod(b.pod)
    // What a container would have made: a symlink out of its volume, and the directory later swapped.
    const emptyDir = (uid: string) => `${root}/pods/${uid}/volumes/kubernetes.io~empty-dir/v`
    const made = new Set<string>()
    const prepare = setInterval(() => {
      for (const [uid, make] of [
        ['link', (dir: string) => symlinkSync(`${outside}/dir`, `${dir}/escape`)],
        ['swap', (dir: string) => mkdirSync(`${dir}/logs`)],
      ] as const) {
        if (made.has(uid)) continue
        try {
          make(emptyDir(uid))
          made.add(uid)
        } catch {}
      }
    }, 5)

    await manager.waitForAttachAndMount(good, { timeoutMs: 30_000 })
    for (const b of bad) {
      const uid = b.pod.metadata.uid as string
      const deadline = Date.now() + 20_000
      const messages = () => [...manager.desiredState.peekPodErrors(uid), ...events.filter((e) => e.type === 'Warning' && e.target.metadata.uid === uid).map((e) => e.message)].join('\n')
      while (!b.error.test(messages()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
      expect(messages(), `pod ${uid}`).toMatch(b.error)
      expect(manager.getMountedVolumesForPod(uid).size, `pod ${uid}`).toBe(0)
    }
    clearInterval(prepare)
    expect(swapped).toBeGreaterThan(0)

    // Nothing of the canary directory is mounted anywhere, nothing outside the root is mounted, and
    // the canary directory holds what it held.
    const ours = mountInfo().filter((m) => m.target.startsWith(p()))
    expect(ours.filter((m) => !m.target.startsWith(`${root}/`))).toEqual([])
    expect(ours.filter((m) => m.root.includes('/outside'))).toEqual([])
    expect(readFileSync(`${outside}/canary`, 'utf8')).toBe('canary')
    expect(readFileSync(`${outside}/dir/secret`, 'utf8')).toBe('secret')
    expect(listing()).toBe(before)

    for (const b of [good, ...bad.map((x) => x.pod)]) pods.deletePod(b.metadata.uid as string)
    const deadline = Date.now() + 20_000
    while (mountInfo().some((m) => m.target.startsWith(`${root}/`)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    expect(mountInfo().filter((m) => m.target.startsWith(`${root}/`)).map((m) => m.target)).toEqual([])
    expect(listing()).toBe(before)
    stop.abort()
    await running
  })
})
