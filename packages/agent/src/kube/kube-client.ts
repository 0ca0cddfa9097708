/**
 * The Kubernetes API clients the agent uses (@kubernetes/client-node 1.4.0, ESM only), and the small
 * helpers its traps call for: PATCH needs an explicit patch content type (the client's default is
 * JSON patch), typed responses carry Date objects (made plain JSON again here), errors carry the
 * API's Status in `body`.
 */
import {
  ApiException,
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  StorageV1Api,
  Watch,
  setHeaderOptions,
} from '@kubernetes/client-node'

/** The clients of one API server. */
export interface KubeClients {
  readonly kubeConfig: KubeConfig
  readonly core: CoreV1Api
  readonly storage: StorageV1Api
  readonly watch: Watch
}

/**
 * Loads the kubeconfig: the file when given; the in-cluster service account when running in a pod;
 * else `$KUBECONFIG` or `~/.kube/config`.
 */
export function loadKubeConfig(file: string | undefined, env: Readonly<Record<string, string | undefined>> = process.env): KubeConfig {
  const kc = new KubeConfig()
  if (file) kc.loadFromFile(file)
  else if (env.KUBERNETES_SERVICE_HOST) kc.loadFromCluster()
  else kc.loadFromDefault()
  return kc
}

/** The API clients of a kubeconfig. */
export function createKubeClients(kubeConfig: KubeConfig): KubeClients {
  return {
    kubeConfig,
    core: kubeConfig.makeApiClient(CoreV1Api),
    storage: kubeConfig.makeApiClient(StorageV1Api),
    watch: new Watch(kubeConfig),
  }
}

/** Request options that send a JSON merge patch (`application/merge-patch+json`). */
export const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch)

/** The HTTP status of a failed call (an ApiException, or a watch error with `statusCode`), if any. */
export function statusCodeOf(err: unknown): number | undefined {
  if (err instanceof ApiException) return err.code
  if (typeof err === 'object' && err !== null) {
    const e = err as { statusCode?: unknown; code?: unknown }
    if (typeof e.statusCode === 'number') return e.statusCode
    if (typeof e.code === 'number') return e.code
  }
  return undefined
}

/** A short message for a failed call: the API Status's message when there is one. */
export function apiErrorMessage(err: unknown): string {
  if (err instanceof ApiException) {
    const body = err.body as { message?: unknown; reason?: unknown } | string | undefined
    if (typeof body === 'object' && body && typeof body.message === 'string') return `${err.code} ${String(body.reason ?? '')}: ${body.message}`.replace(' : ', ': ')
    return `HTTP ${err.code}${typeof body === 'string' && body ? `: ${body.slice(0, 200)}` : ''}`
  }
  return err instanceof Error ? err.message : String(err)
}

/** A typed client object as plain JSON (Dates become RFC 3339 strings), as a watch event delivers it. */
export function toPlain<T>(value: unknown): T {
  return JSON.parse(JSON.stringify(value)) as T
}
