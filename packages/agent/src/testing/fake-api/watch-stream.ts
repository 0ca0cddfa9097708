/**
 * One watch connection: HTTP 200 with newline-delimited `{"type":...,"object":...}` events whose
 * objects carry kind and apiVersion. It starts with synthetic ADDED events (no resourceVersion, or
 * "0"), or replays the history after a resourceVersion, or, when that is older than the history,
 * sends an ERROR event holding a 410 Expired Status and ends. A change that makes an object enter or
 * leave the selectors becomes ADDED or DELETED. BOOKMARKs only when `allowWatchBookmarks=true`:
 * carrying only metadata.resourceVersion, periodically and only after the resourceVersion advanced,
 * and after the initial events when `sendInitialEvents=true` (annotated `k8s.io/initial-events-end`).
 */
import type { ServerResponse } from 'node:http'
import { type FieldRequirement, type LabelRequirement, matchesFields, matchesLabels } from './selectors.js'
import { statusBody } from './status.js'
import { type Change, type FakeStore, type KubeObject, type ResourceInfo, apiVersionOf, withTypeMeta } from './store.js'

export interface WatchRequest {
  readonly resource: ResourceInfo
  readonly namespace?: string
  readonly fields: readonly FieldRequirement[]
  readonly labels: readonly LabelRequirement[]
  /** The `resourceVersion` parameter ('' when absent). */
  readonly resourceVersion: string
  readonly bookmarks: boolean
  readonly sendInitialEvents: boolean
  readonly timeoutSeconds?: number
  readonly bookmarkIntervalMs: number
}

export class WatchStream {
  readonly request: WatchRequest
  readonly #res: ServerResponse
  readonly #store: FakeStore
  #lastRV: number
  #bookmarkedRV: number
  #unsubscribe: (() => void) | undefined
  #timers: NodeJS.Timeout[] = []
  #closed = false
  readonly #onClose: () => void

  constructor(store: FakeStore, res: ServerResponse, request: WatchRequest, onClose: () => void) {
    this.#store = store
    this.#res = res
    this.request = request
    this.#onClose = onClose
    this.#lastRV = store.resourceVersion
    this.#bookmarkedRV = store.resourceVersion
    res.on('close', () => this.#cleanup())
  }

  get closed(): boolean {
    return this.#closed
  }

  /** Sends the start of the stream and follows the store. */
  start(): void {
    const { request } = this
    const res = this.#res
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked', 'Cache-Control': 'no-cache, private' })
    // The API server answers a watch at once, before any event.
    res.flushHeaders()
    const rv = request.resourceVersion
    if (rv === '' || rv === '0' || request.sendInitialEvents) {
      for (const object of this.#store.list(request.resource, request.namespace)) {
        if (this.#matches(object)) this.#send('ADDED', object)
      }
      this.#lastRV = this.#store.resourceVersion
      if (request.sendInitialEvents && request.bookmarks) {
        this.#bookmark({ 'k8s.io/initial-events-end': 'true' })
      }
    } else {
      const from = Number(rv)
      if (!Number.isFinite(from) || from < this.#store.compactedResourceVersion) {
        this.expire(`too old resource version: ${rv} (${this.#store.compactedResourceVersion})`)
        return
      }
      for (const change of this.#store.changesSince(from)) this.#onChange(change)
      this.#lastRV = Math.max(from, this.#lastRV)
    }
    // A watch of one name (metadata.name=) hears only that object's changes, as the API server's
    // watch cache triggers such watches by name.
    const name = request.fields.find((f) => f.field === 'metadata.name' && f.op === '=')?.value
    const only = name !== undefined && (request.namespace !== undefined || !request.resource.namespaced) ? { resource: request.resource, ...(request.namespace !== undefined ? { namespace: request.namespace } : {}), name } : undefined
    this.#unsubscribe = this.#store.subscribe((change) => this.#onChange(change), only)
    if (request.bookmarks) {
      const timer = setInterval(() => this.sendBookmark(), request.bookmarkIntervalMs)
      timer.unref()
      this.#timers.push(timer)
    }
    if (request.timeoutSeconds !== undefined) {
      const timer = setTimeout(() => this.close(), request.timeoutSeconds * 1000)
      timer.unref()
      this.#timers.push(timer)
    }
  }

  /** A periodic bookmark: only when asked for and only after the resourceVersion advanced. */
  sendBookmark(): void {
    if (!this.request.bookmarks || this.#closed) return
    if (this.#store.resourceVersion <= this.#bookmarkedRV) return
    this.#bookmark()
  }

  /** Sends an ERROR event with a 410 Expired Status and ends the stream (HTTP 200 all along). */
  expire(message = `too old resource version: ${this.#lastRV} (${this.#store.resourceVersion})`): void {
    if (this.#closed) return
    this.#write({ type: 'ERROR', object: statusBody(410, 'Expired', message) })
    this.close()
  }

  /** Ends the stream cleanly (as a server-side watch timeout does). */
  close(): void {
    if (this.#closed) return
    this.#res.end()
    this.#cleanup()
  }

  /** Cuts the connection (a network failure or an API server restart). */
  drop(): void {
    if (this.#closed) return
    this.#res.socket?.destroy()
    this.#cleanup()
  }

  /** Resets the connection (TCP RST) mid-stream: the client's read fails with ECONNRESET. */
  reset(): void {
    if (this.#closed) return
    this.#res.socket?.resetAndDestroy()
    this.#cleanup()
  }

  #cleanup(): void {
    if (this.#closed) return
    this.#closed = true
    this.#unsubscribe?.()
    for (const timer of this.#timers) clearTimeout(timer)
    this.#timers = []
    this.#onClose()
  }

  #matches(object: KubeObject): boolean {
    const { request } = this
    if (request.namespace && request.resource.namespaced && object.metadata.namespace !== request.namespace) return false
    return matchesFields(object, request.fields) && matchesLabels(object, request.labels)
  }

  #onChange(change: Change): void {
    if (this.#closed || change.resource.plural !== this.request.resource.plural) return
    if (change.rv <= this.#lastRV && this.#unsubscribe) return
    const now = this.#matches(change.object)
    const before = change.previous !== undefined && this.#matches(change.previous)
    this.#lastRV = change.rv
    if (change.type === 'DELETED') {
      if (before || now) this.#send('DELETED', change.object)
    } else if (change.type === 'ADDED') {
      if (now) this.#send('ADDED', change.object)
    } else if (now && before) this.#send('MODIFIED', change.object)
    else if (now) this.#send('ADDED', change.object)
    else if (before) this.#send('DELETED', change.object)
  }

  #bookmark(annotations?: Record<string, string>): void {
    const { resource } = this.request
    this.#bookmarkedRV = this.#store.resourceVersion
    this.#write({
      type: 'BOOKMARK',
      object: {
        kind: resource.kind,
        apiVersion: apiVersionOf(resource),
        metadata: { resourceVersion: String(this.#store.resourceVersion), ...(annotations ? { annotations } : {}) },
      },
    })
  }

  #send(type: string, object: KubeObject): void {
    this.#bookmarkedRV = Math.max(this.#bookmarkedRV, Number(object.metadata.resourceVersion ?? 0))
    this.#write({ type, object: withTypeMeta(this.request.resource, object) })
  }

  #write(event: unknown): void {
    if (this.#closed) return
    this.#res.write(`${JSON.stringify(event)}\n`)
  }
}
