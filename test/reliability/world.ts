/**
 * The world the model-based tests run in: one in-memory host and one fake clock that outlive any
 * number of volume manager "processes" (generations). Each generation gets its own harness and
 * fake plugins; a crash freezes every call of the dying generation forever, as a killed process
 * would, and the next generation starts on the same host through reconstruction.
 *
 * Invariants are checked where they can be broken, at the moment a call is made, by interceptors on
 * the host and on the fake plugins; every breach is recorded in `violations` with what was going on.
 */
import { type MemoryHost, createMemoryHost } from '@kubevol/adapter-mock'
import { HostError, type Pod, VolumeOperationFailure } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { type FakeCall, type FakeClock, type FakePlugin, type Harness, createFakePlugin, createHarness, seededRandom } from '@kubevol/core/testing'
import { createFastClock } from './fast-clock.js'

const ROOT = '/var/lib/kubevol'
/** Attachable, device-mountable: one device per volume, bind-mounted into each pod that uses it. */
const DEVICE_PLUGIN = 'kubevol.io/fake'
/** Neither attachable nor device-mountable: a tmpfs per pod. */
const PLAIN_PLUGIN = 'kubevol.io/fake-plain'
const DEVICE_VOLUMES = ['dev-0', 'dev-1', 'dev-2'] as const
/** Every volume a generated pod may use; the device volumes are shared between the pods using them. */
export const VOLUME_KINDS = [...DEVICE_VOLUMES, 'plain', 'scratch', 'shm', 'cfg'] as const
export type VolumeKind = (typeof VOLUME_KINDS)[number]

/** What the fault injector may do to one plugin step. */
export type Fault = 'none' | 'fail' | 'transient' | 'uncertain-before' | 'uncertain-after' | 'hang'

type PodPhase = 'running' | 'terminating' | 'gone'

export interface ModelPod {
  readonly uid: string
  readonly volumes: readonly VolumeKind[]
  phase: PodPhase
  pod: Pod
}

function podVolume(kind: VolumeKind): NonNullable<Pod['spec']>['volumes'] extends readonly (infer V)[] | undefined ? V : never {
  switch (kind) {
    case 'plain':
      return { name: 'plain', fake: { name: 'plain', plugin: PLAIN_PLUGIN } }
    case 'scratch':
      return { name: 'scratch', emptyDir: {} }
    case 'shm':
      return { name: 'shm', emptyDir: { medium: 'Memory' } }
    case 'cfg':
      return { name: 'cfg', configMap: { name: 'cfg' } }
    default:
      return { name: kind, fake: { name: kind } }
  }
}

function buildModelPod(uid: string, volumes: readonly VolumeKind[], labels: Record<string, string> = {}): Pod {
  const vols = volumes.map(podVolume)
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `p-${uid}`, namespace: 'default', uid, labels },
    spec: {
      nodeName: 'node-1',
      volumes: vols,
      containers: [{ name: 'main', image: 'busybox', volumeMounts: vols.map((v) => ({ name: v.name, mountPath: `/mnt/${v.name}` })) }],
    },
  }
}

interface Generation {
  readonly harness: Harness
  readonly plugins: readonly FakePlugin[]
  dead: boolean
  /** Plugin steps of this generation running now, by key. */
  readonly inFlight: Map<string, FakeCall>
}

export interface WorldOptions {
  readonly faultSeed: number
  /** Probability that a plugin step gets a fault while faults are on. */
  readonly faultRate: number
  /** Probability that a mutating host call fails with EIO while faults are on. */
  readonly hostFaultRate: number
}

const FOREVER = new Promise<never>(() => {})
const MUTATING = new Set(['mkdir', 'writeFile', 'rename', 'symlink', 'remove', 'removeAll', 'chmod', 'lchown', 'mount', 'unmount'])

export class World {
  readonly clock: FakeClock = createFastClock()
  readonly host: MemoryHost = createMemoryHost({ clock: this.clock })
  readonly pods = new Map<string, ModelPod>()
  /** Device volumes the fake device plugin has attached (across generations: the "cloud" view). */
  readonly attached = new Set<string>()
  readonly violations: string[] = []
  /** What happened, for the failure report. */
  readonly log: string[] = []
  faultsOn = true
  #gen!: Generation
  #generations = 0
  #crashAfterCalls = -1
  readonly #random: () => number
  readonly #options: WorldOptions

  constructor(options: WorldOptions) {
    this.#options = options
    this.#random = seededRandom(options.faultSeed)
    this.#installHostChecks()
    this.#gen = this.#startGeneration()
  }

  get harness(): Harness {
    return this.#gen.harness
  }

  get generation(): number {
    return this.#generations
  }

  /** Pods whose volumes must be mounted: in the source and not terminating. */
  desiredPods(): ModelPod[] {
    return [...this.pods.values()].filter((p) => p.phase === 'running')
  }

  podVolumeDir(uid: string, kind: VolumeKind): string {
    const plugin = kind === 'plain' ? PLAIN_PLUGIN : kind === 'scratch' || kind === 'shm' ? 'kubernetes.io/empty-dir' : kind === 'cfg' ? 'kubernetes.io/configmap' : DEVICE_PLUGIN
    return this.#gen.harness.manager.paths.podVolumeDir(uid, plugin, kind)
  }

  deviceMountPath(volume: string): string {
    return `${this.#gen.harness.manager.paths.pluginDir(DEVICE_PLUGIN)}/mounts/${volume}`
  }

  /** Pods whose own mount of device volume `volume` is on the host. */
  podMountsOf(volume: string): string[] {
    const suffix = `/volumes/kubevol.io~fake/${volume}`
    return this.host.mountTargets().filter((t) => t.startsWith(`${ROOT}/pods/`) && t.endsWith(suffix))
  }

  violate(message: string): void {
    this.violations.push(`gen ${this.#generations}, t=${this.clock.now() - 1_700_000_000_000}ms: ${message}`)
  }

  // ---- the schedule's actions ----

  addPod(uid: string, volumes: readonly VolumeKind[]): void {
    const pod = buildModelPod(uid, volumes)
    this.pods.set(uid, { uid, volumes, phase: 'running', pod })
    this.harness.pods.setPod(pod)
  }

  /** A metadata update: new labels, same UID and volumes (volumes of a pod are immutable). */
  updatePod(uid: string, revision: number): void {
    const p = this.pods.get(uid)
    if (!p || p.phase === 'gone') return
    p.pod = buildModelPod(uid, p.volumes, { revision: String(revision) })
    this.harness.pods.setPod(p.pod)
    if (p.phase === 'terminating') this.harness.pods.terminatePod(uid)
  }

  terminatePod(uid: string): void {
    const p = this.pods.get(uid)
    if (p?.phase !== 'running') return
    p.phase = 'terminating'
    this.harness.pods.terminatePod(uid)
  }

  deletePod(uid: string): void {
    const p = this.pods.get(uid)
    if (!p || p.phase === 'gone') return
    p.phase = 'gone'
    this.harness.pods.deletePod(uid)
  }

  /**
   * The manager dies after `afterCalls` more mutating host calls (0: now), or at the end of
   * `windowMs` of time, whichever comes first; a new one starts on the same host.
   */
  async crash(afterCalls: number, windowMs: number): Promise<void> {
    this.#crashAfterCalls = afterCalls
    if (afterCalls > 0) {
      for (let t = 0; t < windowMs && this.#crashAfterCalls > 0; t += 100) await this.clock.advance(100)
    }
    this.#crashAfterCalls = -1
    const dying = this.#gen
    dying.dead = true
    // Let every live chain reach a call and freeze there, then stop the loops.
    await this.clock.flush()
    void dying.harness.stop()
    await this.clock.flush()
    this.log.push(`crash of generation ${this.#generations}`)
    this.#gen = this.#startGeneration()
  }

  /**
   * Stops faults, turns terminating pods into deleted ones, and lets time pass `rounds` × (the longest
   * backoff + the longest injected hang).
   */
  async quiesce(rounds = 1): Promise<void> {
    this.faultsOn = false
    for (const p of this.pods.values()) if (p.phase === 'terminating') this.deletePod(p.uid)
    // The longest backoff is 2m2s; a hung step returns within 20 s.
    for (let i = 0; i < rounds; i++) await this.clock.advance(122_000 + 20_000)
  }

  async stop(): Promise<void> {
    this.#gen.dead = true
    await this.clock.flush()
    void this.#gen.harness.stop()
    await this.clock.flush()
  }

  // ---- invariants after a step ----

  /** State-level checks that hold after every step, besides those made at each call. */
  checkAfterStep(): void {
    for (const v of this.host.violations) this.violate(`memory host: ${v.kind} at ${v.path}: ${v.message}`)
    this.host.clearViolations()
    const targets = new Set(this.host.mountTargets())
    for (const volume of DEVICE_VOLUMES) {
      // A device is mounted only while attached.
      if (targets.has(this.deviceMountPath(volume)) && !this.attached.has(volume)) this.violate(`device of ${volume} is mounted but not attached`)
    }
  }

  /** Actual state equals desired state. Returns the differences. */
  convergenceErrors(): string[] {
    const errors: string[] = []
    const manager = this.harness.manager
    const targets = new Set(this.host.mountTargets())
    const wantDevices = new Set<string>()
    for (const p of this.pods.values()) {
      const mounted = manager.getMountedVolumesForPod(p.uid)
      if (p.phase === 'running') {
        const missing = p.volumes.filter((v) => !mounted.has(v))
        if (missing.length > 0) errors.push(`pod ${p.uid}: not mounted: ${missing.join(', ')}; errors: ${manager.snapshot().podErrors.get(p.uid)?.join(' | ') ?? 'none'}`)
        for (const v of p.volumes) {
          const mountedOnHost = v !== 'scratch' && v !== 'cfg'
          if (mountedOnHost && !targets.has(this.podVolumeDir(p.uid, v))) errors.push(`pod ${p.uid}: ${v} is not mounted on the host`)
          if ((DEVICE_VOLUMES as readonly string[]).includes(v)) wantDevices.add(v)
        }
      } else {
        if (manager.hasPossiblyMountedVolumesForPod(p.uid)) errors.push(`deleted pod ${p.uid} still has possibly mounted volumes`)
        const left = [...targets].filter((t) => t.startsWith(`${ROOT}/pods/${p.uid}/`))
        if (left.length > 0) errors.push(`deleted pod ${p.uid} left mounts: ${left.join(', ')}`)
      }
    }
    for (const volume of DEVICE_VOLUMES) {
      const want = wantDevices.has(volume)
      if (targets.has(this.deviceMountPath(volume)) !== want) errors.push(`device of ${volume}: mounted=${!want}, want ${want}`)
      if (this.attached.has(volume) !== want) errors.push(`${volume}: attached=${!want}, want ${want}`)
    }
    const running = manager.snapshot().runningOperations
    if (running > 0) errors.push(`${running} operations still running`)
    if (errors.length > 0) errors.push(...this.#explain())
    return errors
  }

  /** What the manager holds, for a failure report. */
  #explain(): string[] {
    const manager = this.harness.manager
    const snap = manager.snapshot()
    const lines = [
      `  desired: ${snap.desired.map((v) => `${v.podName}/${v.volumeName}`).join(' ')}`,
      `  mounted: ${snap.mounted.map((m) => `${m.podUID}/${m.volumeName}:${m.mountState}`).join(' ')}`,
      `  attached: ${snap.attached.map((a) => `${a.volumeName}:${a.deviceMountState}`).join(' ')}`,
      `  host mounts: ${this.host.mountTargets().join(' ')}`,
    ]
    for (const v of snap.desired) {
      const failure = manager.executor.lastFailure(v.volumeName, v.podName)
      if (failure) lines.push(`  backoff ${v.volumeName}: ${failure.name} ${String(failure.error)} retry in ${failure.retryAt - this.clock.now()}ms`)
      if (manager.executor.isOperationPending(v.volumeName, v.podName)) lines.push(`  pending: ${v.volumeName} ${v.podName}`)
    }
    lines.push(...this.log.slice(-20).map((l) => `  log: ${l}`))
    return lines
  }

  // ---- wiring ----

  #startGeneration(): Generation {
    this.#generations++
    const device = createFakePlugin({ name: DEVICE_PLUGIN, attachable: true })
    const plain = createFakePlugin({ name: PLAIN_PLUGIN })
    // The harness's own fake plugin is the device plugin's twin; give it a name no pod uses.
    const harness = createHarness({
      host: this.host,
      clock: this.clock,
      fake: { name: 'kubevol.io/fake-unused' },
      plugins: [device, plain, ...createBuiltinPlugins()],
      // Nothing periodic but a slow resync: convergence must come from events and backoff timers.
      manager: { resyncPeriodMs: 60_000, remountPeriodMs: 0, housekeepingPeriodMs: 0, statsPeriodMs: 0 },
    })
    harness.objects.put('ConfigMap', { metadata: { name: 'cfg', namespace: 'default' }, data: { key: 'value' } })
    const gen: Generation = { harness, plugins: [device, plain], dead: false, inFlight: new Map() }
    for (const plugin of gen.plugins) plugin.intercept((call, next) => this.#pluginStep(gen, plugin.name, call, next))
    for (const p of this.pods.values()) {
      if (p.phase === 'gone') continue
      harness.pods.setPod(p.pod)
      if (p.phase === 'terminating') harness.pods.terminatePod(p.uid)
    }
    harness.start()
    return gen
  }

  #pickFault(): Fault {
    if (!this.faultsOn || this.#random() >= this.#options.faultRate) return 'none'
    const faults: Fault[] = ['fail', 'transient', 'uncertain-before', 'uncertain-after', 'hang']
    return faults[Math.floor(this.#random() * faults.length)] as Fault
  }

  async #pluginStep(gen: Generation, plugin: string, call: FakeCall, next: () => Promise<void>): Promise<void> {
    if (gen.dead) return FOREVER
    const perPod = call.podUID !== undefined && call.podUID !== ''
    const key = `${plugin}\n${call.volume}\n${perPod ? call.podUID : ''}`
    // The clean-up of a pod volume that reconstruction could not explain (SPEC §5.6) is keyed by the
    // volume's spec name, as in the kubelet, not by its unique name: it is not one of the volume's operations.
    const orphanCleanup =
      call.step === 'tearDown' &&
      !gen.harness.manager.actualState.getAllMountedVolumes().some((m) => m.podUID === call.podUID && m.outerVolumeSpecName === call.volume)
    // At most one operation per volume key: a volume-wide step excludes every other step of the
    // volume; two per-pod steps exclude each other only for the same pod.
    for (const [other, running] of orphanCleanup ? [] : gen.inFlight) {
      const [otherPlugin, otherVolume, otherPod] = other.split('\n')
      if (otherPlugin !== plugin || otherVolume !== call.volume) continue
      if (perPod && otherPod !== '' && otherPod !== call.podUID) continue
      this.violate(`${call.step} of ${call.volume}${perPod ? ` for ${call.podUID}` : ''} started while ${running.step}${running.podUID ? ` for ${running.podUID}` : ''} is in flight`)
    }
    this.#checkPluginCall(plugin, call)
    if (!orphanCleanup) gen.inFlight.set(key, call)
    const fault = this.#pickFault()
    if (process.env.KUBEVOL_FC_TRACE) this.log.push(`t=${this.clock.now() - 1_700_000_000_000} gen ${this.#generations} ${call.step} ${call.volume} ${call.podUID ?? ''} fault=${fault}`)
    try {
      switch (fault) {
        case 'fail':
          throw new VolumeOperationFailure('final', `injected ${call.step} failure`)
        case 'transient':
          throw new VolumeOperationFailure('transient', `injected transient ${call.step} failure`)
        case 'uncertain-before':
          throw new VolumeOperationFailure('uncertain', `injected ${call.step} timeout before it started`)
        case 'hang':
          await this.clock.sleep(1_000 + Math.floor(this.#random() * 19_000))
          if (gen.dead) return FOREVER
          await this.#run(plugin, call, next)
          return
        case 'uncertain-after':
          await this.#run(plugin, call, next)
          throw new VolumeOperationFailure('uncertain', `injected ${call.step} timeout after it ran`)
        default:
          await this.#run(plugin, call, next)
      }
    } finally {
      if (!orphanCleanup) gen.inFlight.delete(key)
    }
  }

  async #run(plugin: string, call: FakeCall, next: () => Promise<void>): Promise<void> {
    await next()
    if (plugin !== DEVICE_PLUGIN) return
    // waitForAttach attaches again what a crash may have left unattached.
    if (call.step === 'attach' || call.step === 'waitForAttach') this.attached.add(call.volume)
    if (call.step === 'detach') this.attached.delete(call.volume)
  }

  #checkPluginCall(plugin: string, call: FakeCall): void {
    if (call.step === 'tearDown' && call.podUID) {
      const p = this.pods.get(call.podUID)
      if (p?.phase === 'running' && p.volumes.includes(call.volume as VolumeKind)) this.violate(`tearDown of ${call.volume} of pod ${call.podUID}, which the pod still uses`)
    }
    if (plugin !== DEVICE_PLUGIN) return
    if (call.step === 'detach') {
      const where = [this.deviceMountPath(call.volume), ...this.podMountsOf(call.volume)].filter((t) => this.host.mountTargets().includes(t))
      if (where.length > 0) this.violate(`detach of ${call.volume} while mounted at ${where.join(', ')}`)
    }
    if (call.step === 'unmountDevice') {
      const pods = this.podMountsOf(call.volume)
      if (pods.length > 0) this.violate(`unmountDevice of ${call.volume} while pod mounts exist: ${pods.join(', ')}`)
      const believed = this.harness.manager.actualState.getAllMountedVolumes().filter((m) => m.pluginName === DEVICE_PLUGIN && m.outerVolumeSpecName === call.volume)
      if (believed.length > 0) this.violate(`unmountDevice of ${call.volume} while the manager holds pod mounts (${believed.map((m) => `${m.podUID}:${m.mountState}`).join(', ')})`)
    }
  }

  #installHostChecks(): void {
    // Checks first (innermost), then crash and faults around them.
    this.host.intercept((call, next) => {
      const path = call.path ?? ''
      if (call.method === 'unmount') {
        const volume = /\/plugins\/kubevol\.io\/fake\/mounts\/([^/]+)$/.exec(path)?.[1]
        if (volume !== undefined && this.podMountsOf(volume).length > 0) this.violate(`unmount of the device of ${volume} while pod mounts exist: ${this.podMountsOf(volume).join(', ')}`)
      }
      if (call.method === 'unmount' || call.method === 'remove' || call.method === 'removeAll') {
        const m = /^\/var\/lib\/kubevol\/pods\/([^/]+)\/volumes\/[^/]+\/([^/]+)$/.exec(path)
        const p = m ? this.pods.get(m[1] as string) : undefined
        // Cleaning up after a set-up that failed is allowed; removing what a running pod has mounted is not.
        if (m && p?.phase === 'running' && this.harness.manager.getMountedVolumesForPod(p.uid).has(m[2] as string)) {
          this.violate(`${call.method} of ${path}, a mounted volume of a running pod`)
        }
      }
      return next()
    })
    this.host.intercept((call, next) => {
      if (!MUTATING.has(call.method)) return next()
      if (this.#crashAfterCalls > 0 && --this.#crashAfterCalls === 0) this.#gen.dead = true
      if (this.#gen.dead) return FOREVER
      // The journal is opened once at start, where an I/O error ends the process (a restart retries).
      if (this.faultsOn && !(call.path ?? '').startsWith(`${ROOT}/journal`) && this.#random() < this.#options.hostFaultRate) {
        if (process.env.KUBEVOL_FC_TRACE) this.log.push(`t=${this.clock.now() - 1_700_000_000_000} host ${call.method} ${call.path ?? ''} fault=EIO`)
        return Promise.reject(new HostError('EIO', call.method, call.path ?? '', 'injected fault'))
      }
      return next()
    })
  }
}
