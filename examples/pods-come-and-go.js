// Pods come and go: a real volume manager on an in-memory host, told as a story.
// Run it with `npm start` (builds first) or `node examples/pods-come-and-go.js`.
import { createMemoryObjectReader, createMemoryPodSource, createVolumeManager } from '@kubevol/core'
import { buildPod, createFakePlugin } from '@kubevol/core/testing'
import { createMemoryHost } from '@kubevol/adapter-mock'

const ROOT = '/var/lib/kubevol' // on the in-memory host: nothing touches the real disk

// Two volume types. Disks are attachable: attach to the node, mount the device once in a global
// directory, then bind it into each pod that uses it. Scratch volumes belong to one pod each.
// Both are fake plugins; each answers for the volumes whose `fake.plugin` names it.
const disks = createFakePlugin({ name: 'example.com/disk', attachable: true })
const scratch = createFakePlugin({ name: 'example.com/scratch' })
const disk = (name, device) => ({ name, fake: { name: device, plugin: 'example.com/disk' } })
const tmp = (name) => ({ name, fake: { name, plugin: 'example.com/scratch' } })

const host = createMemoryHost()
const pods = createMemoryPodSource()
const manager = createVolumeManager({
  host,
  plugins: [disks, scratch],
  podSource: pods,
  objects: createMemoryObjectReader(),
  nodeName: 'node-1',
  rootDir: ROOT,
  controllerAttachDetach: false, // no attach/detach controller: the manager attaches and detaches itself
})

// ---- printing what happens ----
const t0 = performance.now()
const stamp = () => `${((performance.now() - t0) / 1000).toFixed(3).padStart(6)}s`
const podNames = new Map() // uid → name, for readable lines
// Unique volume names are `plugin/device` (shared) or `plugin/<pod uid>-<volume>` (per pod).
const short = (volumeName) => {
  const name = volumeName.split('/').slice(2).join('/')
  for (const uid of podNames.keys()) if (name.startsWith(`${uid}-`)) return name.slice(uid.length + 1)
  return name
}
const who = (op) => `${op.podName ? (podNames.get(op.podName) ?? op.podName) : 'node'}/${short(op.volumeName)}`
const say = (text) => console.log(`\n== ${text}`)
const failedAt = new Map() // operation + volume + pod → when it last failed, to show the backoff
manager.subscribe((e) => {
  if (e.type === 'operation') {
    const op = e.operation
    const key = `${op.name} ${op.volumeName} ${op.podName}`
    if (op.endedAt === undefined) {
      const retry = failedAt.has(key) ? `   (retry, ${op.startedAt - failedAt.get(key)} ms after the failure)` : ''
      console.log(`${stamp()}  ▶ ${op.name.padEnd(15)} ${who(op)}${retry}`)
    } else if (op.error) {
      failedAt.set(key, op.endedAt)
      console.log(`${stamp()}  ✗ ${op.name.padEnd(15)} ${who(op)} failed after ${op.endedAt - op.startedAt} ms`)
    } else {
      failedAt.delete(key)
      console.log(`${stamp()}  ✓ ${op.name.padEnd(15)} ${who(op)} in ${op.endedAt - op.startedAt} ms`)
    }
  } else if (e.type === 'event') {
    const { type, reason, message, target } = e.event
    console.log(`${stamp()}  ⚑ ${type} ${reason} (${target.kind} ${target.metadata.name}): ${message}`)
  }
})

// Resolves once `condition()` holds, re-checking after every state change (no polling).
function until(condition, what, timeoutMs = 5000) {
  return new Promise((resolve, reject) => {
    const finish = (error) => {
      off()
      clearTimeout(timer)
      if (error) reject(error)
      else resolve()
    }
    const timer = setTimeout(() => finish(new Error(`timed out waiting for ${what}`)), timeoutMs)
    const off = manager.subscribe(() => condition() && finish())
    if (condition()) finish()
  })
}
// The actual state lists every volume as "attached"; only attachable ones are attached to the node.
const attached = () =>
  manager.snapshot().attached.filter((a) => a.attachability === 'attachable').map((a) => short(a.volumeName)).sort()
const table = async (title) => {
  const rows = (await host.mounts()).filter((m) => m.target.startsWith(ROOT))
  console.log(`   ${title} (${rows.length} mounts under ${ROOT}; attached: [${attached().join(', ')}])`)
  for (const m of rows) console.log(`     ${m.source.padEnd(24)} → ${m.target.slice(ROOT.length + 1)}`)
}

async function main() {
  const stop = new AbortController()
  const running = manager.run(stop.signal)
  say('start the manager: it reacts to pod and state changes as they happen, no 100 ms loop')
  console.log('   ▶ operation started, ✓ succeeded, ✗ failed, ⚑ Kubernetes event; times since start')
  console.log('   (verify_controller_attached_volume: a volume that needs no attach is recorded as attached)')

  const podA = buildPod({ name: 'pod-a', volumes: [disk('shared', 'disk-shared'), disk('data', 'disk-a'), tmp('scratch')] })
  podNames.set(podA.metadata.uid, 'pod-a')
  say('add pod A: 2 disks and 1 scratch volume. A disk is attached (volume_attach), then volume_mount')
  console.log('   mounts its device once under plugins/ and binds it into the pod under pods/')
  pods.setPod(podA)
  await manager.waitForAttachAndMount(podA, { timeoutMs: 5000 })
  await table('pod A is ready')

  const podB = buildPod({ name: 'pod-b', volumes: [disk('shared', 'disk-shared'), tmp('cache')] })
  podNames.set(podB.metadata.uid, 'pod-b')
  say('add pod B: shares disk-shared with A (already attached and mounted: only the bind is new);')
  console.log('   its scratch volume "cache" fails setUp twice: watch the backoff (0.5 s, then 1 s)')
  scratch.fail('setUp', { volume: 'cache', times: 2, message: 'injected: disk full' })
  pods.setPod(podB)
  await manager.waitForAttachAndMount(podB, { timeoutMs: 5000 })
  await table('pod B is ready')

  say('delete pod A: its volumes are unmounted; disk-a is no longer used, so its device is unmounted and detached;')
  console.log('   disk-shared stays attached and mounted because pod B still uses it')
  pods.deletePod(podA.metadata.uid)
  await manager.waitForUnmount(podA, { timeoutMs: 5000 })
  await until(() => !attached().includes('disk-a'), 'disk-a to be detached')
  await table('pod A is gone')

  say('delete pod B: unmount from the pod → unmount the device → detach')
  pods.deletePod(podB.metadata.uid)
  await manager.waitForUnmount(podB, { timeoutMs: 5000 })
  await until(() => attached().length === 0, 'every disk to be detached')
  await manager.waitForIdle()
  await table('node is empty')

  say('stop the manager')
  stop.abort()
  await running
  const s = manager.snapshot()
  console.log(`   snapshot: ${s.desired.length} desired, ${s.mounted.length} mounted, ${s.attached.length} attached, ${s.runningOperations} running`)
  console.log(`   plugin view: disks attached ${JSON.stringify([...disks.attached.keys()])}`)
  host.assertNoViolations() // the memory host checks kernel invariants (no rm of a mount point, ...)
  console.log(`\ndone in ${stamp().trim()}`)
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`\nfailed: ${err?.stack ?? err}`)
    process.exit(1)
  },
)
