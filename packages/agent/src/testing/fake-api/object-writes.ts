/**
 * The fake API server's writes with the API server's semantics: graceful pod deletion, finalizers
 * that hold a deleted object, the status subresource's rule, patches with the Node restriction.
 */
import type { DeleteOptions } from './fake-api-server.js'
import { type Identity, admitNodeUpdate } from './node-authorizer.js'
import { jsonPatch, mergePatch } from './patch.js'
import { badRequest, conflict, notFound } from './status.js'
import { type FakeStore, type KubeObject, type ResourceInfo, withoutTypeMeta } from './store.js'

/** True when `metadata.finalizers` lists any. */
function hasFinalizers(object: KubeObject): boolean {
  const finalizers = object.metadata.finalizers
  return Array.isArray(finalizers) && finalizers.length > 0
}

/** Writes to the fake store, as the server's handlers and the tests' administrator calls make them. */
export class ObjectWrites {
  readonly #store: FakeStore

  constructor(store: FakeStore) {
    this.#store = store
  }

  /** DELETE semantics: graceful for pods bound to a node, immediate otherwise. */
  remove(info: ResourceInfo, namespace: string | undefined, name: string, opts: DeleteOptions = {}): KubeObject {
    const current = this.#store.get(info, namespace, name)
    if (!current) throw notFound(info.plural, name, info.group)
    const pre = opts.preconditions
    if (pre?.uid && pre.uid !== current.metadata.uid) {
      throw conflict(info.plural, name, `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${current.metadata.uid ?? ''}`)
    }
    if (pre?.resourceVersion && pre.resourceVersion !== current.metadata.resourceVersion) {
      throw conflict(info.plural, name, `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${current.metadata.resourceVersion ?? ''}`)
    }
    let grace = 0
    if (info.plural === 'pods') {
      const spec = current.spec as { nodeName?: string; terminationGracePeriodSeconds?: number } | undefined
      const phase = (current.status as { phase?: string } | undefined)?.phase
      grace = opts.gracePeriodSeconds ?? spec?.terminationGracePeriodSeconds ?? 30
      const graceful = grace > 0 && spec?.nodeName && phase !== 'Succeeded' && phase !== 'Failed'
      if (!graceful) grace = 0
      if (graceful) {
        const already = current.metadata.deletionGracePeriodSeconds
        if (already !== undefined && already <= grace) return current
        const marked = {
          ...current,
          metadata: { ...current.metadata, deletionTimestamp: new Date(Date.now() + grace * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z'), deletionGracePeriodSeconds: grace },
        }
        return this.#store.update(info, { ...marked, metadata: { ...marked.metadata, resourceVersion: undefined } })
      }
    }
    // Finalizers hold the object: it is only marked, and goes when the last one is removed.
    if (hasFinalizers(current)) {
      if (current.metadata.deletionTimestamp !== undefined && current.metadata.deletionGracePeriodSeconds === 0) return current
      const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z')
      const marked = { ...current, metadata: { ...current.metadata, deletionTimestamp: current.metadata.deletionTimestamp ?? now, deletionGracePeriodSeconds: grace, resourceVersion: undefined } }
      return this.#store.update(info, marked)
    }
    return this.#store.delete(info, namespace, name)
  }

  /** Writes an update; an object marked for deletion whose last finalizer went (and no grace period runs) is deleted. */
  update(info: ResourceInfo, next: KubeObject): KubeObject {
    const updated = this.#store.update(info, next)
    const { deletionTimestamp, deletionGracePeriodSeconds, namespace, name } = updated.metadata
    if (deletionTimestamp === undefined || hasFinalizers(updated) || (deletionGracePeriodSeconds ?? 0) > 0) return updated
    return this.#store.delete(info, namespace, name as string)
  }

  /** Applies a subresource's rule: `/status` changes only status, the main resource all but status. */
  merged(info: ResourceInfo, current: KubeObject, next: KubeObject, subresource: string | undefined): KubeObject {
    if (!info.hasStatus) return next
    if (subresource === 'status') return { ...current, status: next.status, metadata: { ...current.metadata, resourceVersion: next.metadata.resourceVersion } } as KubeObject
    const { status: _ignored, ...rest } = next
    return { ...rest, ...(current.status !== undefined ? { status: current.status } : {}) } as KubeObject
  }

  /** A merge or JSON patch; as a node (`identity`), the Node restriction's admission applies. */
  patch(info: ResourceInfo, namespace: string | undefined, name: string, contentType: string, body: unknown, subresource?: string, identity?: Identity): KubeObject {
    const current = this.#store.get(info, namespace, name)
    if (!current) throw notFound(info.plural, name, info.group)
    let next: unknown
    if (contentType === 'application/json-patch+json') next = jsonPatch(current, body)
    else {
      if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest('the server rejected our request due to an error in our request: the patch is not a JSON object')
      next = mergePatch(current, body)
    }
    const object = next as KubeObject
    if (!object.metadata || object.metadata.name !== name) throw badRequest('the name of the object cannot be changed by a patch')
    const result = this.merged(info, current, withoutTypeMeta(object), subresource)
    const refused = identity && admitNodeUpdate(identity, info, current, result)
    if (refused) throw refused
    // The resourceVersion of the patch (if any) is a precondition; without one the current applies.
    return this.update(info, result)
  }
}
