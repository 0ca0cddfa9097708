/**
 * Wires a volume manager on a given host with a fake clock, in-memory sources and a fake plugin,
 * in one call, so no test repeats the setup.
 */
import type { Pod } from '../api/kubernetes.js'
import type { Host } from '../host/host.js'
import type { VolumeEvent } from '../observability.js'
import type { OperationRecord } from '../operations/operation-executor.js'
import type { VolumePlugin } from '../plugins/plugin.js'
import { type VolumeManager, type VolumeManagerOptions, createVolumeManager } from '../volume-manager.js'
import { type FakeClock, createFakeClock } from './fake-clock.js'
import { type FakePlugin, type FakePluginOptions, createFakePlugin } from './fake-plugin.js'
import { type MemoryObjectReader, type MemoryPodSource, createMemoryObjectReader, createMemoryPodSource } from '../populator/memory-sources.js'

export interface HarnessOptions {
  /** The host the manager works on (an in-memory host from @kubevol/adapter-mock, or the Linux host). */
  readonly host: Host
  /** Options of the fake plugin registered as `kubevol.io/fake`. */
  readonly fake?: FakePluginOptions
  /** More plugins. */
  readonly plugins?: readonly VolumePlugin[]
  /** @default '/var/lib/kubevol' */
  readonly rootDir?: string
  /** @default false: the manager attaches itself, so attachable volumes work without a controller. */
  readonly controllerAttachDetach?: boolean
  readonly pollingCompat?: boolean
  /** Pod sources start ready. @default true */
  readonly ready?: boolean
  readonly clock?: FakeClock
  readonly manager?: Partial<VolumeManagerOptions>
  /**
   * Take the host's root lock on `rootDir` first, as the agent does, so that the host enforces its
   * root (no symlink followed beneath it, see the Host port). The lock is taken before any call the
   * manager makes and never released: a later harness on the same host and root (a restart) finds it
   * held and runs under it. @default true
   */
  readonly lockRoot?: boolean
}

export interface Harness {
  readonly host: Host
  readonly clock: FakeClock
  readonly pods: MemoryPodSource
  readonly objects: MemoryObjectReader
  readonly plugin: FakePlugin
  readonly manager: VolumeManager
  /** Every event the manager recorded. */
  readonly events: VolumeEvent[]
  /** Every operation start and end. */
  readonly operations: OperationRecord[]
  /** Starts `manager.run`. */
  start(): void
  /** Stops the manager and waits for its loops to end. */
  stop(): Promise<void>
  /** Adds a pod and waits until its volumes are mounted (advancing the fake clock as needed). */
  addPodAndWait(pod: Pod): Promise<void>
  /** Lets time pass in steps of `step` ms until `until()` holds or `maxMs` passed; returns whether it held. */
  advanceUntil(until: () => boolean, options?: { maxMs?: number; step?: number }): Promise<boolean>
}

export function createHarness(options: HarnessOptions): Harness {
  const clock = options.clock ?? createFakeClock()
  const pods = createMemoryPodSource([], { ready: options.ready ?? true })
  const objects = createMemoryObjectReader()
  const plugin = createFakePlugin(options.fake)
  const events: VolumeEvent[] = []
  const operations: OperationRecord[] = []
  const rootDir = options.rootDir ?? '/var/lib/kubevol'
  // Not awaited: the host's calls settle in the order they are made, so the lock holds before the
  // manager's first call; held by an earlier harness on the same host, that one's lock holds.
  if (options.lockRoot ?? true) void options.host.lockRoot?.(rootDir).catch(() => undefined)
  const manager = createVolumeManager({
    host: options.host,
    plugins: [plugin, ...(options.plugins ?? [])],
    podSource: pods,
    objects,
    nodeName: 'node-1',
    rootDir,
    controllerAttachDetach: options.controllerAttachDetach ?? false,
    pollingCompat: options.pollingCompat ?? false,
    clock,
    recorder: { event: (e) => events.push(e) },
    ...options.manager,
  })
  manager.subscribe((e) => {
    if (e.type === 'operation') operations.push(e.operation)
  })
  let controller: InstanceType<typeof AbortController> | undefined
  let running: Promise<void> | undefined
  const harness: Harness = {
    host: options.host,
    clock,
    pods,
    objects,
    plugin,
    manager,
    events,
    operations,
    start() {
      controller = new AbortController()
      running = manager.run(controller.signal)
    },
    async stop() {
      controller?.abort()
      await running
      await clock.flush()
    },
    async addPodAndWait(pod) {
      pods.setPod(pod)
      const waiting = manager.waitForAttachAndMount(pod)
      let settled = false
      let failure: unknown
      waiting.then(
        () => {
          settled = true
        },
        (err: unknown) => {
          settled = true
          failure = err
        },
      )
      await harness.advanceUntil(() => settled, { maxMs: 130_000 })
      if (failure) throw failure
      if (!settled) throw new Error('waitForAttachAndMount did not settle')
    },
    async advanceUntil(until, opts = {}) {
      const step = opts.step ?? 100
      const max = opts.maxMs ?? 10_000
      await clock.flush()
      for (let t = 0; t < max && !until(); t += step) await clock.advance(step)
      return until()
    },
  }
  return harness
}

/** An AbortController is a web standard; core only names the shape, the harness runs where it exists. */
declare const AbortController: { new (): { readonly signal: import('../signal.js').AbortSignalLike; abort(): void } }
