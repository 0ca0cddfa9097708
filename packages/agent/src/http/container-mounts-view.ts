/**
 * `GET /v1/pods/<uid>/containers/<name>/mounts`: a container's mounts and devices in the CRI's shape
 * (`GET /v1/pods/<uid>/mounts`: every container's),
 * for a runtime that starts the pod's containers itself (see `containerMounts` in @kubevol/core).
 * With `?wait=30s` it first waits, as the kubelet does before it starts a pod's containers, until
 * the pod's volumes are mounted, and answers with the kubelet's text when they are not in time.
 */
import { type ContainerMounts, ContainerMountsError, type PodSource, type VolumeManager, WaitError, containerMounts } from '@kubevol/core'

/** What the endpoint was asked. */
export interface ContainerMountsRequest {
  readonly uid: string
  /** One container; undefined: every container of the pod (init, regular, ephemeral). */
  readonly container?: string
  /** Wait this long for the pod's volumes first; undefined: answer with what is mounted now. */
  readonly waitMs?: number
  /** The runtime makes recursive read-only mounts (the kubelet asks the runtime handler). @default false */
  readonly recursiveReadOnly?: boolean
  /** Aborted when the client goes away: the wait ends. */
  readonly signal?: AbortSignal
}

/** An HTTP status and its JSON body. */
export interface RouteAnswer {
  readonly status: number
  readonly body: unknown
}

/** The answer of a successful request. */
interface ContainerMountsBody extends ContainerMounts {
  readonly pod: { readonly namespace: string; readonly name: string; readonly uid: string }
  readonly container: string
}

/**
 * Answers 200 with {@link ContainerMountsBody} (for every container: `{ pod, containers: [...] }`,
 * each a body or `{ container, error }`); 404 for a pod the node does not have or a container
 * it does not have; 409 for a pod that is terminating (its containers must not start), a volume not
 * mounted yet or a mount refused, with the kubelet's text; 504 when the wait ran out, with the
 * kubelet's `Unable to attach or mount volumes: unmounted volumes=[...] ...: context deadline
 * exceeded`.
 */
export async function containerMountsView(sources: { readonly manager: VolumeManager; readonly pods: PodSource }, request: ContainerMountsRequest): Promise<RouteAnswer> {
  const { manager, pods } = sources
  const pod = pods.getPodByUID(request.uid)
  if (!pod) return { status: 404, body: { error: `pod ${JSON.stringify(request.uid.slice(0, 100))} is not known on this node` } }
  const podName = `${pod.metadata.namespace ?? 'default'}/${pod.metadata.name ?? ''}`
  const containers = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? []), ...(pod.spec?.ephemeralContainers ?? [])]
  const wanted = request.container
  if (wanted !== undefined && !containers.some((c) => c.name === wanted)) {
    return { status: 404, body: { error: `container ${wanted.slice(0, 100)} not found in pod ${podName}` } }
  }
  if (pods.shouldPodContainersBeTerminating(request.uid)) return { status: 409, body: { error: `pod ${podName} is terminating: its containers must not start` } }
  if (request.waitMs !== undefined) {
    try {
      await manager.waitForAttachAndMount(pod, { timeoutMs: request.waitMs, ...(request.signal ? { signal: request.signal } : {}) })
    } catch (err) {
      if (!(err instanceof WaitError)) throw err
      // The kubelet's FailedMount event on the pod, word for word.
      return { status: err.interrupted ? 504 : 409, body: { error: `Unable to attach or mount volumes: ${err.message}` } }
    }
  }
  const volumes = manager.getMountedVolumesForPod(pod)
  const podRef = { namespace: pod.metadata.namespace ?? 'default', name: pod.metadata.name ?? '', uid: request.uid }
  const mountsOf = (container: string): ContainerMountsBody | { readonly container: string; readonly error: string } => {
    try {
      return { pod: podRef, container, ...containerMounts(pod, container, volumes, { runtimeSupportsRecursiveReadOnly: request.recursiveReadOnly ?? false }) }
    } catch (err) {
      if (err instanceof ContainerMountsError) return { container, error: err.message }
      throw err
    }
  }
  if (wanted === undefined) return { status: 200, body: { pod: podRef, containers: containers.map((c) => mountsOf(c.name)) } }
  const one = mountsOf(wanted)
  return 'error' in one ? { status: 409, body: { error: one.error } } : { status: 200, body: one }
}
