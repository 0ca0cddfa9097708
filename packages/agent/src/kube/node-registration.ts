/**
 * Node registration as the kubelet does it (`registerWithAPIServer`): at start, GET this node's
 * Node. Missing, and registration on: create it with the labels `kubernetes.io/hostname`,
 * `kubernetes.io/os`, `kubernetes.io/arch` (Go's names), the configured `nodeLabels`, and, when the
 * attach/detach controller is to attach (`controllerAttachDetach`), the annotation
 * `volumes.kubernetes.io/controller-managed-attach-detach: "true"`; no capacity or allocatable,
 * since kubevol manages no CPU, memory or pods. Existing: the annotation is set or removed to match
 * `controllerAttachDetach` (a merge patch of the metadata), as the kubelet reconciles it.
 *
 * Missing with registration off: one warning, then checks again with a doubling delay (up to 7 s,
 * as the kubelet retries registration), and the readiness check says the Node does not exist until
 * it appears.
 */
import { arch as processArch, platform as processPlatform } from 'node:process'
import type { V1Node } from '@kubernetes/client-node'
import type { Logger } from '@kubevol/core'
import { type KubeClients, MERGE_PATCH, apiErrorMessage, statusCodeOf } from './kube-client.js'

/** The annotation that hands a node's attach and detach to the attach/detach controller. */
const CONTROLLER_MANAGED_ATTACH_DETACH = 'volumes.kubernetes.io/controller-managed-attach-detach'

/** Node.js's `process.arch` as Go's `GOARCH`, which `kubernetes.io/arch` carries. */
const GO_ARCH: Readonly<Record<string, string>> = { x64: 'amd64', ia32: '386', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64', loong64: 'loong64', mips: 'mips', mipsel: 'mipsle' }
/** Node.js's `process.platform` as Go's `GOOS`. */
const GO_OS: Readonly<Record<string, string>> = { win32: 'windows' }

export const goArch = (arch: string = processArch): string => GO_ARCH[arch] ?? arch
const goOs = (platform: string = processPlatform): string => GO_OS[platform] ?? platform

interface NodeRegistrationOptions {
  readonly clients: KubeClients
  readonly nodeName: string
  /** Create the Node when it is missing. */
  readonly register: boolean
  /** Extra labels of a created Node. */
  readonly labels: Readonly<Record<string, string>>
  /** Annotate the Node for the attach/detach controller (else remove the annotation). */
  readonly controllerAttachDetach: boolean
  /** First delay before checking again; doubles up to `maxRetryMs`. */
  readonly retryMs: number
  /** @default 7000 (the kubelet's registration backoff cap) */
  readonly maxRetryMs?: number
  readonly logger: Logger
}

type NodeRegistrationState = 'pending' | 'ready' | 'missing' | 'failed'

export interface NodeRegistration {
  /** Starts checking (in the background) until the Node exists as it should. */
  start(): void
  stop(): void
  /** Resolves once the Node exists as it should (never, while it is missing). */
  readonly ready: Promise<void>
  readonly state: NodeRegistrationState
  /** The readiness check: ok once the Node exists; otherwise why not. */
  check(): { readonly ok: boolean; readonly message?: string }
  /** The Node went missing after start (a 404 elsewhere): readiness fails until it is back. */
  nodeMissing(): void
}

/** The labels of a Node kubevol registers, as the kubelet's `initialNode` sets them. */
function initialNodeLabels(nodeName: string, extra: Readonly<Record<string, string>>): Record<string, string> {
  return { ...extra, 'kubernetes.io/hostname': nodeName, 'kubernetes.io/os': goOs(), 'kubernetes.io/arch': goArch() }
}

/**
 * Creates the registration; `start()` runs it. Used through the API-mode module (`api-mode.ts`),
 * which agent.ts imports dynamically.
 * @public
 */
export function createNodeRegistration(options: NodeRegistrationOptions): NodeRegistration {
  return new NodeRegistrar(options)
}

class NodeRegistrar implements NodeRegistration {
  readonly ready: Promise<void>
  readonly #o: NodeRegistrationOptions
  readonly #maxRetryMs: number
  #state: NodeRegistrationState = 'pending'
  #lastError: string | undefined
  #warned: string | undefined
  #attempt = 0
  #timer: NodeJS.Timeout | undefined
  #stopped = true
  #running = false
  #resolveReady: () => void = () => {}

  constructor(options: NodeRegistrationOptions) {
    this.#o = options
    this.#maxRetryMs = options.maxRetryMs ?? 7_000
    this.ready = new Promise<void>((resolve) => (this.#resolveReady = resolve))
  }

  get state(): NodeRegistrationState {
    return this.#state
  }

  start(): void {
    this.#stopped = false
    this.#schedule()
  }

  stop(): void {
    this.#stopped = true
    if (this.#timer) clearTimeout(this.#timer)
    this.#timer = undefined
  }

  check(): { readonly ok: boolean; readonly message?: string } {
    const { nodeName } = this.#o
    if (this.#state === 'ready') return { ok: true }
    if (this.#state === 'pending') return { ok: false, message: `checking the Node object ${nodeName}` }
    return { ok: false, message: this.#lastError ?? `the Node object ${nodeName} is not ready` }
  }

  nodeMissing(): void {
    const { nodeName } = this.#o
    if (this.#state !== 'ready') return
    // The kubelet registers once per start; a Node deleted later is only reported, not re-created.
    this.#state = 'missing'
    this.#lastError = `the Node object ${nodeName} does not exist`
    this.#warnOnce(`The Node object ${nodeName} does not exist`, { node: nodeName })
    this.#attempt = 0
    this.#recheck()
  }

  /** After `nodeMissing`: reads the Node with a backoff until it is there again. */
  #recheck(): void {
    const { clients, nodeName, logger } = this.#o
    if (this.#stopped || this.#state === 'ready') return
    void clients.core.readNode({ name: nodeName }).then(
      () => {
        this.#state = 'ready'
        this.#lastError = undefined
        this.#warned = undefined
        logger.info('The Node object exists', { node: nodeName })
      },
      () => {
        this.#timer = setTimeout(() => this.#recheck(), Math.min(this.#o.retryMs * 2 ** this.#attempt++, this.#maxRetryMs))
        this.#timer.unref?.()
      },
    )
  }

  /** One warning per distinct problem, not one per retry. */
  #warnOnce(message: string, fields: Record<string, unknown>): void {
    if (this.#warned === message) return
    this.#warned = message
    this.#o.logger.warn(message, fields)
  }

  /** One check; true when done. */
  async #once(): Promise<boolean> {
    const { clients, nodeName } = this.#o
    let node: V1Node | undefined
    try {
      node = await clients.core.readNode({ name: nodeName })
    } catch (err) {
      if (statusCodeOf(err) !== 404) throw err
    }
    if (!node) {
      if (!this.#o.register) {
        this.#state = 'missing'
        this.#lastError = `the Node object ${nodeName} does not exist (registerNode is off: create it, or run with --register-node)`
        this.#warnOnce(`The Node object ${nodeName} does not exist and registerNode is off; waiting for it`, { node: nodeName })
        return false
      }
      await createNode(this.#o)
      node = await clients.core.readNode({ name: nodeName })
    }
    await reconcileAnnotation(this.#o, node)
    return true
  }

  #schedule(): void {
    if (this.#stopped || this.#running) return
    this.#running = true
    void this.#once()
      .catch((err: unknown) => {
        this.#state = this.#state === 'missing' ? this.#state : 'failed'
        this.#lastError = apiErrorMessage(err)
        this.#warnOnce(`Registering the node failed: ${this.#lastError}`, { node: this.#o.nodeName })
        return false
      })
      .then((done) => this.#onceDone(done))
  }

  #onceDone(done: boolean): void {
    this.#running = false
    if (done) {
      this.#state = 'ready'
      this.#lastError = undefined
      this.#attempt = 0
      if (this.#warned !== undefined) this.#o.logger.info('The Node object exists', { node: this.#o.nodeName })
      this.#warned = undefined
      this.#resolveReady()
      return
    }
    if (this.#stopped) return
    const delay = Math.min(this.#o.retryMs * 2 ** this.#attempt, this.#maxRetryMs)
    this.#attempt++
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      this.#schedule()
    }, delay)
    this.#timer.unref?.()
  }
}

/** Creates the Node as the kubelet's `initialNode` would; a 409 (it exists already) is fine. */
async function createNode(options: NodeRegistrationOptions): Promise<void> {
  const { clients, nodeName, logger } = options
  const annotations = options.controllerAttachDetach ? { [CONTROLLER_MANAGED_ATTACH_DETACH]: 'true' } : undefined
  const body: V1Node = { apiVersion: 'v1', kind: 'Node', metadata: { name: nodeName, labels: initialNodeLabels(nodeName, options.labels), ...(annotations ? { annotations } : {}) } }
  try {
    await clients.core.createNode({ body })
    logger.info('Registered the node', { node: nodeName, labels: body.metadata?.labels, controllerAttachDetach: options.controllerAttachDetach })
  } catch (err) {
    // Someone else (an earlier run, another registrar) created it: reconcile the existing one next.
    if (statusCodeOf(err) !== 409) throw err
  }
}

/** Sets or removes the controller-managed annotation on an existing Node. */
async function reconcileAnnotation(options: NodeRegistrationOptions, node: V1Node): Promise<void> {
  const { clients, nodeName, logger } = options
  const has = node.metadata?.annotations?.[CONTROLLER_MANAGED_ATTACH_DETACH] !== undefined
  const correct = node.metadata?.annotations?.[CONTROLLER_MANAGED_ATTACH_DETACH] === 'true'
  if (options.controllerAttachDetach ? correct : !has) return
  const value = options.controllerAttachDetach ? 'true' : null
  await clients.core.patchNode({ name: nodeName, body: { metadata: { annotations: { [CONTROLLER_MANAGED_ATTACH_DETACH]: value } } } }, MERGE_PATCH)
  logger.info(options.controllerAttachDetach ? 'Annotated the node for controller attach/detach' : 'Removed the controller attach/detach annotation from the node', { node: nodeName })
}
