// Embedding the core in your own agent: implement the ports you need (here a PodSource of your own,
// and a Recorder, Metrics and Logger that collect), run the manager, ask it questions.
import { createMemoryHost } from '@kubevol/adapter-mock'
import { type Logger, type Metrics, type Pod, type PodSource, type Recorder, createMemoryObjectReader, createVolumeManager } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildPod } from '@kubevol/core/testing'

/** A pod source over a plain list: your agent would fill it from its own view of the node. */
function createListPodSource() {
  const pods = new Map<string, Pod>()
  const listeners = new Set<() => void>()
  const changed = () => {
    for (const listener of listeners) listener()
  }
  const source: PodSource & { put(pod: Pod): void; remove(uid: string): void } = {
    getPods: () => [...pods.values()],
    getPodByUID: (uid) => pods.get(uid),
    // A pod removed from the list is gone: its containers have stopped and its volumes may go.
    shouldPodContainersBeTerminating: (uid) => !pods.has(uid),
    shouldPodRuntimeBeRemoved: (uid) => !pods.has(uid),
    allReady: () => true, // say true only once the first full list is in: before it, nothing is unmounted
    subscribe(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    put(pod) {
      pods.set(pod.metadata.uid!, pod)
      changed()
    },
    remove(uid) {
      pods.delete(uid)
      changed()
    },
  }
  return source
}

export async function run() {
  const events: string[] = []
  const counters = new Map<string, number>()
  const recorder: Recorder = { event: (e) => events.push(`${e.type} ${e.reason}: ${e.message}`) }
  const metrics: Metrics = {
    inc: (name, _labels, value = 1) => counters.set(name, (counters.get(name) ?? 0) + value),
    observe: (name) => counters.set(`${name}_count`, (counters.get(`${name}_count`) ?? 0) + 1),
  }
  const warnings: string[] = []
  const logger: Logger = { debug() {}, info() {}, warn: (message) => warnings.push(message), error: (message) => warnings.push(message) }

  const pods = createListPodSource()
  const manager = createVolumeManager({
    host: createMemoryHost(),
    plugins: createBuiltinPlugins(),
    podSource: pods,
    objects: createMemoryObjectReader(),
    nodeName: 'node-1',
    controllerAttachDetach: false,
    recorder,
    metrics,
    logger,
  })
  const stop = new AbortController()
  const running = manager.run(stop.signal)

  // A pod whose claim does not exist: waitForAttachAndMount rejects with the kubelet's error text.
  const broken = buildPod({ name: 'broken', volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'missing' } }] })
  pods.put(broken)
  const error = await manager.waitForAttachAndMount(broken, { timeoutMs: 3_000 }).then(
    () => 'mounted',
    (err: Error) => err.message,
  )
  pods.remove(broken.metadata.uid!)

  const ok = buildPod({ name: 'ok', volumes: [{ name: 'scratch', emptyDir: {} }] })
  pods.put(ok)
  await manager.waitForAttachAndMount(ok, { timeoutMs: 3_000 })

  // A secret that does not exist fails SetUp: the pod gets a FailedMount event, and the manager retries.
  const firstEvent = new Promise<void>((resolve) => {
    const off = manager.subscribe((e) => {
      if (e.type !== 'event') return
      off()
      resolve()
    })
  })
  const noSecret = buildPod({ name: 'no-secret', volumes: [{ name: 'token', secret: { secretName: 'missing' } }] })
  pods.put(noSecret)
  await firstEvent
  pods.remove(noSecret.metadata.uid!)
  stop.abort()
  await running

  const lines = [
    `waitForAttachAndMount(broken) → ${error}`,
    `waitForAttachAndMount(ok) → mounted`,
    `events: ${events.length}`,
    ...events.slice(0, 3).map((e) => `  ${e}`),
    `warnings logged: ${warnings.length}`,
    `metrics: ${[...counters].map(([name, n]) => `${name}=${n}`).join(', ')}`,
  ]
  return { lines, error, events, warnings, counters: Object.fromEntries(counters) }
}
