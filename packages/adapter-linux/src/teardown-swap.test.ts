/**
 * A mounted pod's directories swapped for symlinks into a pod-shaped tree elsewhere, on the real
 * kernel: while the agent is down (the journal says the volumes are set up; reconstruction must
 * not bring them back through the link) and while it runs (the tear-down must refuse). Canary
 * files in the tree the links point at are checked by content; the sibling of teardown-safety.test.ts.
 */
import { mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { type Logger, type Pod, createVolumeManager } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildPod, createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'
import type { LinuxHost } from './linux-host.js'

const EMPTY_DIR = 'volumes/kubernetes.io~empty-dir'

/** Files in a pod-shaped tree: what a tear-down through a link to it would delete. */
const VICTIMS = [`${EMPTY_DIR}/cache/data`, `${EMPTY_DIR}/scratch/data`, 'plugins/kubernetes.io~empty-dir/cache/ready', 'volume-subpaths/cache/main/0']

function plantVictim(dir: string): void {
  for (const file of VICTIMS) {
    mkdirSync(`${dir}/${file.slice(0, file.lastIndexOf('/'))}`, { recursive: true })
    writeFileSync(`${dir}/${file}`, `canary ${file}`)
  }
}
function expectVictim(dir: string): void {
  for (const file of VICTIMS) expect(readFileSync(`${dir}/${file}`, 'utf8')).toBe(`canary ${file}`)
}

/** A manager on `host`, its pod source and what it logged. */
function manager(host: LinuxHost, root: string) {
  const lines: string[] = []
  const push = (message: string, fields?: object) => lines.push(`${message} ${JSON.stringify(fields ?? {})}`)
  const logger: Logger = { debug() {}, info: push, warn: push, error: push }
  const pods = createMemoryPodSource()
  const vm = createVolumeManager({ host, plugins: createBuiltinPlugins(), podSource: pods, objects: createMemoryObjectReader(), nodeName: 'node-1', rootDir: root, controllerAttachDetach: false, logger })
  const stop = new AbortController()
  const running = vm.run(stop.signal)
  return {
    vm,
    pods,
    lines,
    async stop() {
      stop.abort()
      await running
    },
  }
}

/** A tmpfs emptyDir with a subPath bind, and a disk emptyDir. */
function swapPod(): Pod {
  const base = buildPod({ uid: 'sw', volumes: [{ name: 'cache', emptyDir: { medium: 'Memory' } }, { name: 'scratch', emptyDir: {} }] })
  const mounts = [
    { name: 'cache', mountPath: '/c', subPath: 'logs' },
    { name: 'scratch', mountPath: '/s' },
  ]
  return { ...base, spec: { ...base.spec, containers: [{ name: 'main', volumeMounts: mounts }] } }
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms))

describeAsRoot('a pod directory swapped for a symlink, on the Linux host', () => {
  const h = useLinuxHost()

  /** Moves `<root>/pods/sw/<level>` away and links the name to the same level of the victim tree. */
  function swap(root: string, victim: string, level: string): string {
    const at = level ? `${root}/pods/sw/${level}` : `${root}/pods/sw`
    renameSync(at, `${at}-moved`)
    symlinkSync(level ? `${victim}/${level}` : victim, at)
    return at
  }

  it.each(['', 'volumes', EMPTY_DIR])('while the agent is down (pods/sw/%s): nothing is reconstructed or torn down through it', async (level) => {
    const { host, p } = h()
    const root = p('kubevol')
    plantVictim(p('elsewhere'))
    const first = manager(host, root)
    const pod = swapPod()
    first.pods.setPod(pod)
    await first.vm.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    writeFileSync(`${root}/pods/sw/${EMPTY_DIR}/cache/own`, 'the pod data')
    await first.stop()
    const at = swap(root, p('elsewhere'), level)
    // The pod is gone from the new agent's source: everything reconstructed would be torn down.
    const m = manager(host, root)
    expect(await until(() => m.vm.snapshot().statesSynced)).toBe(true)
    await pause(1_500)
    expectVictim(p('elsewhere'))
    expect(m.vm.hasPossiblyMountedVolumesForPod('sw')).toBe(false)
    const skipped = m.lines.filter((l) => l.includes('not reconstructed'))
    expect(skipped).toHaveLength(2)
    for (const line of skipped) expect(line).toContain(`${at} is a symlink, not a directory`)
    // The pod's own data, moved aside within its directory, is left alone too. (A whole pod
    // directory moved to `pods/sw-moved` is a pod directory itself, found and torn down as one.)
    if (level) expect(readFileSync([`${at}-moved`, EMPTY_DIR.slice(level.length + 1), 'cache/own'].filter(Boolean).join('/'), 'utf8')).toBe('the pod data')
    await m.stop()
  })

  it.each(['', EMPTY_DIR])('while the agent runs (pods/sw/%s): the tear-down refuses, then finishes once the directory is put back', async (level) => {
    const { host, p } = h()
    const root = p('kubevol')
    plantVictim(p('elsewhere'))
    const m = manager(host, root)
    const pod = swapPod()
    m.pods.setPod(pod)
    await m.vm.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    const at = swap(root, p('elsewhere'), level)
    m.pods.deletePod('sw')
    // The host holds the root: the tear-down's first call through the link is refused by the kernel.
    const refusal = `refusing to follow a symlink beneath the root: ${at} is a symlink`
    expect(await until(() => m.lines.some((l) => l.includes(refusal))), 'a refusal logged').toBe(true)
    await pause(500)
    expectVictim(p('elsewhere'))
    expect(m.vm.hasPossiblyMountedVolumesForPod('sw')).toBe(true)
    // Put right, the retries tear it down: no mount of it is left.
    rmSync(at)
    renameSync(`${at}-moved`, at)
    // A refused tear-down leaves the volume uncertain (possibly mounted, as the kubelet marks a failed
    // TearDown), which waitForUnmount does not wait for: wait until nothing may be mounted.
    expect(await until(() => !m.vm.hasPossiblyMountedVolumesForPod('sw'), 60_000), 'torn down once put back').toBe(true)
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(`${root}/pods/sw/`)
    expectVictim(p('elsewhere'))
    await m.stop()
  }, 90_000)
})

async function until(check: () => boolean, ms = 20_000): Promise<boolean> {
  const deadline = Date.now() + ms
  while (!check() && Date.now() < deadline) await pause(50)
  return check()
}
