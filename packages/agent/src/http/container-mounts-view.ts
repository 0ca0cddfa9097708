/**
 * `GET /v1/pods/<uid>/containers/<name>/mounts`: a container's mounts and devices in the CRI's shape,
 * for a runtime that starts the pod's containers itself (see `containerMounts` in @kubevol/core).
 * With `?wait=30s` it first waits, as the kubelet does before it starts a pod's containers, until
 * the pod's volumes are mounted, and answers with the kubelet's text when they are not in time.
 */
import { type ContainerMounts, ContainerMountsError, type PodSource, type VolumeManager, WaitError, containerMounts } from '@kubevol/core'

/** What the endpoint was asked. */
export interface ContainerMountsRequest {
  readonly uid: string
  readonly container: string
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
 * Answers 200 with {@link ContainerMountsBody}; 404 for a pod the node does not have or a container
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
  if (!containers.some((c) => c.name === request.container)) {
    return { status: 404, body: { error: `container ${request.container.slice(0, 100)} not found in pod ${podName}` } }
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
  try {
    const mounts = containerMounts(pod, request.container, manager.getMountedVolumesForPod(pod), { runtimeSupportsRecursiveReadOnly: request.recursiveReadOnly ?? false })
    const body: ContainerMountsBody = { pod: { namespace: pod.metadata.namespace ?? 'default', name: pod.metadata.name ?? '', uid: request.uid }, container: request.container, ...mounts }
    return { status: 200, body }
  } catch (err) {
    if (err instanceof ContainerMountsError) return { status: 409, body: { error: err.message } }
    throw err
  }
}
