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

/**
 * The API's `Status` of a failed call, if it sent one. client-node 1.x keeps the response body as
 * text (JSON), so it is parsed here; a watch's error may carry the object itself.
 */
function apiStatusOf(err: unknown): { readonly code?: number; readonly reason?: string; readonly message: string } | undefined {
  let body: unknown = err instanceof ApiException ? err.body : undefined
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body)
    } catch {
      return undefined
    }
  }
  if (typeof body !== 'object' || body === null) return undefined
  const status = body as { kind?: unknown; code?: unknown; reason?: unknown; message?: unknown }
  if (typeof status.message !== 'string' || status.message === '') return undefined
  return {
    message: status.message,
    ...(typeof status.code === 'number' ? { code: status.code } : {}),
    ...(typeof status.reason === 'string' ? { reason: status.reason } : {}),
  }
}

/**
 * A short message for a failed call: the API Status's message, as the Go client's error reads
 * (`nodes "n1" not found`); else the HTTP code and the start of the body; never a whole JSON body
 * or the client's multi-line exception text.
 */
export function apiErrorMessage(err: unknown): string {
  const status = apiStatusOf(err)
  if (status) return status.message
  if (err instanceof ApiException) {
    const body = typeof err.body === 'string' ? err.body.replace(/\s+/g, ' ').trim() : ''
    return `HTTP ${err.code}${body ? `: ${body.slice(0, 200)}` : ''}`
  }
  return err instanceof Error ? err.message : String(err)
}

/** A typed client object as plain JSON (Dates become RFC 3339 strings), as a watch event delivers it. */
export function toPlain<T>(value: unknown): T {
  return JSON.parse(JSON.stringify(value)) as T
}
