import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { type FakeApiServer, startFakeApiServer } from './fake-api-server.js'

let api: FakeApiServer

beforeEach(async () => {
  api = await startFakeApiServer({ bookmarkIntervalMs: 50 })
})
afterEach(async () => {
  await api.close()
})

const pod = (name: string, nodeName: string | undefined, extra: Record<string, unknown> = {}) => ({
  metadata: { name, namespace: 'default' },
  spec: { ...(nodeName ? { nodeName } : {}), containers: [{ name: 'c', image: 'busybox' }], ...extra },
})

async function call(path: string, init: { method?: string; token?: string; body?: unknown; contentType?: string } = {}) {
  const res = await fetch(`${api.url}${path}`, {
    method: init.method ?? 'GET',
    headers: {
      authorization: `Bearer ${init.token ?? api.adminToken}`,
      ...(init.body !== undefined ? { 'content-type': init.contentType ?? 'application/json' } : {}),
    },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  })
  const text = await res.text()
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined }
}

/** Reads watch events until `count` arrived, the stream ended, or `waitMs` passed. */
async function watchEvents(path: string, count: number, token = api.adminToken, trigger?: () => void, waitMs = 5_000) {
  const res = await fetch(`${api.url}${path}`, { headers: { authorization: `Bearer ${token}` } })
  const events: { type: string; object: Record<string, unknown> }[] = []
  if (res.status !== 200 || !res.body) return { status: res.status, events }
  const reader = res.body.getReader()
  const decoder = new TextDecoder()
  let buffer = ''
  trigger?.()
  const deadline = Date.now() + waitMs
  while (events.length < count && Date.now() < deadline) {
    const timeout = new Promise<{ done: true; value: undefined }>((resolve) => setTimeout(() => resolve({ done: true, value: undefined }), deadline - Date.now()))
    const { value, done } = await Promise.race([reader.read(), timeout])
    if (done) break
    buffer += decoder.decode(value, { stream: true })
    let nl: number
    while ((nl = buffer.indexOf('\n')) >= 0) {
      events.push(JSON.parse(buffer.slice(0, nl)))
      buffer = buffer.slice(nl + 1)
    }
  }
  await reader.cancel().catch(() => undefined)
  return { status: res.status, events }
}

describe('lists', () => {
  it('carry a resourceVersion and items without kind or apiVersion', async () => {
    api.create('Pod', pod('a', 'n1'))
    const { status, body } = await call('/api/v1/pods')
    expect(status).toBe(200)
    expect(body).toMatchObject({ kind: 'PodList', apiVersion: 'v1', metadata: { resourceVersion: String(api.store.resourceVersion) } })
    const [item] = (body?.items ?? []) as Record<string, unknown>[]
    expect(item).not.toHaveProperty('kind')
    expect(item).not.toHaveProperty('apiVersion')
    expect(item).toMatchObject({ metadata: { name: 'a', namespace: 'default', uid: expect.any(String), resourceVersion: expect.any(String) } })
  })

  it('filter by a supported field and refuse an unsupported one with 400', async () => {
    api.create('Pod', pod('a', 'n1'))
    api.create('Pod', pod('b', 'n2'))
    const ok = await call('/api/v1/pods?fieldSelector=spec.nodeName%3Dn1')
    expect(((ok.body?.items ?? []) as { metadata: { name: string } }[]).map((p) => p.metadata.name)).toEqual(['a'])
    const bad = await call('/api/v1/pods?fieldSelector=spec.foo%3Dx')
    expect(bad.status).toBe(400)
    expect(bad.body).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'BadRequest', code: 400, message: 'field label not supported: spec.foo' })
  })

  it('answer 410 for an exact resourceVersion that was compacted', async () => {
    api.create('Pod', pod('a', 'n1'))
    const old = api.store.resourceVersion
    api.create('Pod', pod('b', 'n1'))
    api.compact()
    const res = await call(`/api/v1/pods?resourceVersion=${old}&resourceVersionMatch=Exact`)
    expect(res.status).toBe(410)
    expect(res.body).toMatchObject({ kind: 'Status', reason: 'Expired', code: 410 })
  })
})

describe('single objects', () => {
  it('come with kind and apiVersion; a missing one is a 404 Status with details', async () => {
    api.create('ConfigMap', { metadata: { name: 'cm', namespace: 'default' }, data: { a: '1' } })
    expect((await call('/api/v1/namespaces/default/configmaps/cm')).body).toMatchObject({ kind: 'ConfigMap', apiVersion: 'v1', data: { a: '1' } })
    const missing = await call('/api/v1/namespaces/default/configmaps/nope')
    expect(missing).toEqual({
      status: 404,
      body: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'configmaps "nope" not found', reason: 'NotFound', details: { name: 'nope', kind: 'configmaps' }, code: 404 },
    })
  })

  it('refuse a request without a known token with 401', async () => {
    const res = await call('/api/v1/pods', { token: 'nobody' })
    expect(res.status).toBe(401)
    expect(res.body).toMatchObject({ reason: 'Unauthorized', code: 401 })
  })
})

describe('patch and update', () => {
  it.each([
    ['application/json', 415],
    ['application/merge-patch+json', 200],
    ['application/strategic-merge-patch+json', 200],
  ])('a patch sent as %s answers %i', async (contentType, expected) => {
    api.create('Node', { metadata: { name: 'n1' } })
    const res = await call('/api/v1/nodes/n1/status', { method: 'PATCH', body: { status: { volumesInUse: ['v1'] } }, contentType })
    expect(res.status).toBe(expected)
    if (expected === 415) expect(res.body).toMatchObject({ kind: 'Status', reason: 'UnsupportedMediaType', code: 415 })
    else expect(api.get('Node', undefined, 'n1')?.status).toEqual({ volumesInUse: ['v1'] })
  })

  it('applies a JSON patch, and refuses an object sent as one', async () => {
    api.create('Node', { metadata: { name: 'n1' } })
    const ok = await call('/api/v1/nodes/n1/status', { method: 'PATCH', body: [{ op: 'add', path: '/status', value: { volumesInUse: ['x'] } }], contentType: 'application/json-patch+json' })
    expect(ok.status).toBe(200)
    const bad = await call('/api/v1/nodes/n1/status', { method: 'PATCH', body: { status: {} }, contentType: 'application/json-patch+json' })
    expect(bad.status).toBe(400)
  })

  it('keeps status out of the main resource and the rest out of /status', async () => {
    api.create('Node', { metadata: { name: 'n1', labels: { a: 'b' } } })
    await call('/api/v1/nodes/n1', { method: 'PATCH', body: { status: { volumesInUse: ['x'] } }, contentType: 'application/merge-patch+json' })
    expect(api.get('Node', undefined, 'n1')?.status).toBeUndefined()
    await call('/api/v1/nodes/n1/status', { method: 'PATCH', body: { metadata: { labels: { a: 'c' } }, status: { volumesInUse: ['y'] } }, contentType: 'application/merge-patch+json' })
    expect(api.get('Node', undefined, 'n1')).toMatchObject({ metadata: { labels: { a: 'b' } }, status: { volumesInUse: ['y'] } })
  })

  it('answers 409 to a PUT with a stale resourceVersion', async () => {
    const created = api.create('ConfigMap', { metadata: { name: 'cm', namespace: 'default' } })
    api.patch('ConfigMap', 'default', 'cm', { data: { a: '1' } })
    const res = await call('/api/v1/namespaces/default/configmaps/cm', { method: 'PUT', body: { metadata: { name: 'cm', namespace: 'default', resourceVersion: created.metadata.resourceVersion }, data: { a: '2' } } })
    expect(res.status).toBe(409)
    expect(res.body).toMatchObject({ reason: 'Conflict', message: expect.stringContaining('the object has been modified') })
  })
})

describe('graceful pod deletion', () => {
  it('marks a pod with a grace period (MODIFIED) and deletes it with grace 0 (DELETED)', async () => {
    api.create('Pod', pod('a', 'n1'))
    const rv = api.store.resourceVersion
    const first = await call('/api/v1/namespaces/default/pods/a', { method: 'DELETE', body: { gracePeriodSeconds: 30 } })
    expect(first.status).toBe(200)
    expect(api.get('Pod', 'default', 'a')?.metadata).toMatchObject({ deletionTimestamp: expect.any(String), deletionGracePeriodSeconds: 30 })
    await call('/api/v1/namespaces/default/pods/a?gracePeriodSeconds=0', { method: 'DELETE' })
    expect(api.get('Pod', 'default', 'a')).toBeUndefined()
    const { events } = await watchEvents(`/api/v1/pods?watch=true&resourceVersion=${rv}`, 2)
    expect(events.map((e) => e.type)).toEqual(['MODIFIED', 'DELETED'])
  })

  it('deletes a finished pod at once, whatever the grace period', async () => {
    api.create('Pod', pod('a', 'n1'))
    api.patch('Pod', 'default', 'a', { status: { phase: 'Succeeded' } }, { subresource: 'status' })
    expect((await call('/api/v1/namespaces/default/pods/a', { method: 'DELETE', body: { gracePeriodSeconds: 30 } })).status).toBe(200)
    expect(api.get('Pod', 'default', 'a')).toBeUndefined()
  })

  it('holds an object with finalizers: marked by DELETE, gone once an update removes the last one', async () => {
    api.create('Pod', { ...pod('a', 'n1'), metadata: { name: 'a', namespace: 'default', finalizers: ['example.com/keep'] } })
    api.patch('Pod', 'default', 'a', { status: { phase: 'Succeeded' } }, { subresource: 'status' })
    expect((await call('/api/v1/namespaces/default/pods/a?gracePeriodSeconds=0', { method: 'DELETE' })).status).toBe(200)
    expect(api.get('Pod', 'default', 'a')?.metadata).toMatchObject({ deletionTimestamp: expect.any(String), deletionGracePeriodSeconds: 0 })
    // A second DELETE changes nothing; a status write keeps it too.
    await call('/api/v1/namespaces/default/pods/a?gracePeriodSeconds=0', { method: 'DELETE' })
    api.patch('Pod', 'default', 'a', { status: { message: 'x' } }, { subresource: 'status' })
    expect(api.get('Pod', 'default', 'a')).toBeDefined()
    api.patch('Pod', 'default', 'a', { metadata: { finalizers: null } })
    expect(api.get('Pod', 'default', 'a')).toBeUndefined()
  })

  it('checks a UID precondition', async () => {
    api.create('Pod', pod('a', 'n1'))
    const res = await call('/api/v1/namespaces/default/pods/a', { method: 'DELETE', body: { gracePeriodSeconds: 0, preconditions: { uid: 'other' } } })
    expect(res.status).toBe(409)
    expect(api.get('Pod', 'default', 'a')).toBeDefined()
  })
})

describe('watch', () => {
  it('starts with synthetic ADDED events whose objects carry kind, then follows changes', async () => {
    api.create('Pod', pod('a', 'n1'))
    const { status, events } = await watchEvents('/api/v1/pods?watch=true', 2, api.adminToken, () => {
      setTimeout(() => api.create('Pod', pod('b', 'n1')), 20)
    })
    expect(status).toBe(200)
    expect(events.map((e) => [e.type, (e.object.metadata as { name: string }).name, e.object.kind, e.object.apiVersion])).toEqual([
      ['ADDED', 'a', 'Pod', 'v1'],
      ['ADDED', 'b', 'Pod', 'v1'],
    ])
  })

  it('replays after a resourceVersion; a compacted one gets an ERROR 410 event in an HTTP 200 stream', async () => {
    api.create('Pod', pod('a', 'n1'))
    const rv = api.store.resourceVersion
    api.create('Pod', pod('b', 'n1'))
    const replay = await watchEvents(`/api/v1/pods?watch=true&resourceVersion=${rv}`, 1)
    expect(replay.events.map((e) => (e.object.metadata as { name: string }).name)).toEqual(['b'])
    api.compact()
    const expired = await watchEvents(`/api/v1/pods?watch=true&resourceVersion=${rv}`, 1)
    expect(expired.status).toBe(200)
    expect(expired.events).toEqual([{ type: 'ERROR', object: expect.objectContaining({ kind: 'Status', code: 410, reason: 'Expired' }) }])
  })

  it('turns a change that leaves the selector into DELETED', async () => {
    api.create('Pod', pod('a', 'n1'))
    const rv = api.store.resourceVersion
    api.patch('Pod', 'default', 'a', { status: { phase: 'Succeeded' } }, { subresource: 'status' })
    // Nothing to wait for: a short look is enough to see that nothing comes.
    const { events } = await watchEvents(`/api/v1/pods?watch=true&resourceVersion=${rv}&fieldSelector=status.phase%3DPending`, 1, api.adminToken, undefined, 200)
    expect(events).toEqual([])
    const running = await watchEvents(`/api/v1/pods?watch=true&resourceVersion=${rv}&fieldSelector=status.phase%21%3DSucceeded`, 1)
    expect(running.events.map((e) => e.type)).toEqual(['DELETED'])
  })

  it('sends bookmarks only when asked, with only a resourceVersion, after it advanced', async () => {
    const plain = await watchEvents('/api/v1/pods?watch=true&resourceVersion=0', 1, api.adminToken, () => {
      setTimeout(() => api.create('ConfigMap', { metadata: { name: 'x', namespace: 'default' } }), 10)
      setTimeout(() => api.closeWatches('pods'), 200)
    })
    expect(plain.events).toEqual([])
    const marked = await watchEvents('/api/v1/pods?watch=true&allowWatchBookmarks=true&resourceVersion=0', 1, api.adminToken, () => {
      setTimeout(() => api.create('ConfigMap', { metadata: { name: 'y', namespace: 'default' } }), 10)
    })
    expect(marked.events).toEqual([{ type: 'BOOKMARK', object: { kind: 'Pod', apiVersion: 'v1', metadata: { resourceVersion: String(api.store.resourceVersion) } } }])
  })

  it('marks the end of initial events with an annotated bookmark', async () => {
    api.create('Pod', pod('a', 'n1'))
    const { events } = await watchEvents('/api/v1/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan', 2)
    expect(events[0]?.type).toBe('ADDED')
    expect(events[1]).toMatchObject({ type: 'BOOKMARK', object: { metadata: { annotations: { 'k8s.io/initial-events-end': 'true' } } } })
  })
})

describe('the Node authorizer', () => {
  const setup = () => {
    const token = api.nodeToken('n1')
    api.create('Node', { metadata: { name: 'n1' } })
    api.create('Node', { metadata: { name: 'n2' } })
    api.create('ConfigMap', { metadata: { name: 'mine', namespace: 'default' } })
    api.create('ConfigMap', { metadata: { name: 'theirs', namespace: 'default' } })
    api.create('Pod', pod('a', 'n1', { volumes: [{ name: 'c', configMap: { name: 'mine' } }] }))
    api.create('Pod', pod('b', 'n2', { volumes: [{ name: 'c', configMap: { name: 'theirs' } }] }))
    return token
  }

  it('lets a node list its pods only with the spec.nodeName field selector', async () => {
    const token = setup()
    const all = await call('/api/v1/pods', { token })
    expect(all.status).toBe(403)
    expect(all.body).toMatchObject({ kind: 'Status', reason: 'Forbidden', code: 403, message: expect.stringContaining('User "system:node:n1" cannot list resource "pods"') })
    expect((await call('/api/v1/pods?fieldSelector=spec.nodeName%3Dn2', { token })).status).toBe(403)
    const mine = await call('/api/v1/pods?fieldSelector=spec.nodeName%3Dn1', { token })
    expect(((mine.body?.items ?? []) as { metadata: { name: string } }[]).map((p) => p.metadata.name)).toEqual(['a'])
  })

  it('lets a node read only the objects its pods reference', async () => {
    const token = setup()
    expect((await call('/api/v1/namespaces/default/configmaps/mine', { token })).status).toBe(200)
    const theirs = await call('/api/v1/namespaces/default/configmaps/theirs', { token })
    expect(theirs.status).toBe(403)
    expect(theirs.body?.message).toContain("no relationship found between node 'n1' and this object")
    expect((await call('/api/v1/namespaces/default/configmaps', { token })).status).toBe(403)
    expect((await call('/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dmine', { token })).status).toBe(200)
  })

  it('lets a node patch only its own node, create events, and request tokens for its pods', async () => {
    const token = setup()
    const patch = (node: string) => call(`/api/v1/nodes/${node}/status`, { token, method: 'PATCH', body: { status: { volumesInUse: [] } }, contentType: 'application/merge-patch+json' })
    expect((await patch('n1')).status).toBe(200)
    expect((await patch('n2')).status).toBe(403)
    const event = await call('/api/v1/namespaces/default/events', { token, method: 'POST', body: { metadata: { generateName: 'a.' }, involvedObject: { kind: 'Pod', name: 'a' }, reason: 'X' } })
    expect(event.status).toBe(201)
    expect((event.body?.metadata as { name?: string } | undefined)?.name).toMatch(/^a\./)
    const tokenRequest = (podName: string) =>
      call('/api/v1/namespaces/default/serviceaccounts/default/token', { token, method: 'POST', body: { spec: { audiences: ['x'], boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: podName } } } })
    expect((await tokenRequest('a')).status).toBe(201)
    expect((await tokenRequest('b')).status).toBe(403)
  })
})

describe('single-object watches of a node (the kubelet watching a ConfigMap or Secret)', () => {
  const setup = () => {
    const token = api.nodeToken('n1')
    api.create('ConfigMap', { metadata: { name: 'mine', namespace: 'default' }, data: { a: '1' } })
    api.create('ConfigMap', { metadata: { name: 'other', namespace: 'default' } })
    api.create('Secret', { metadata: { name: 'theirs', namespace: 'default' } })
    api.create('Pod', pod('a', 'n1', { volumes: [{ name: 'c', configMap: { name: 'mine' } }] }))
    api.create('Pod', pod('b', 'n2', { volumes: [{ name: 's', secret: { secretName: 'theirs' } }] }))
    return token
  }
  const one = (resource: string, name: string, rest = '') => `/api/v1/namespaces/default/${resource}?fieldSelector=metadata.name%3D${name}${rest}`

  it('lists and follows the one object: MODIFIED and DELETED events with kind and apiVersion, nothing of other objects', async () => {
    const token = setup()
    const list = await call(one('configmaps', 'mine'), { token })
    expect(list.status).toBe(200)
    expect(list.body).toMatchObject({ kind: 'ConfigMapList', items: [{ metadata: { name: 'mine' }, data: { a: '1' } }] })
    const rv = (list.body?.metadata as { resourceVersion?: string } | undefined)?.resourceVersion ?? ""
    const { status, events } = await watchEvents(one('configmaps', 'mine', `&watch=true&resourceVersion=${rv}`), 2, token, () => {
      setTimeout(() => {
        api.patch('ConfigMap', 'default', 'other', { data: { x: 'y' } })
        api.patch('ConfigMap', 'default', 'mine', { data: { a: '2' } })
        api.delete('ConfigMap', 'default', 'mine')
      }, 20)
    })
    expect(status).toBe(200)
    expect(events.map((e) => [e.type, e.object.kind, e.object.apiVersion, (e.object.metadata as { name: string }).name, e.object.data])).toEqual([
      ['MODIFIED', 'ConfigMap', 'v1', 'mine', { a: '2' }],
      ['DELETED', 'ConfigMap', 'v1', 'mine', { a: '2' }],
    ])
  })

  it.each([
    ['a list without the name selector', '/api/v1/namespaces/default/configmaps?watch=true', 'can only watch individual configmaps'],
    ['a Secret of a pod of another node', one('secrets', 'theirs', '&watch=true'), "no relationship found between node 'n1' and this object"],
    ['a ConfigMap no pod references', one('configmaps', 'other', '&watch=true'), "no relationship found between node 'n1' and this object"],
  ])('refuses %s with 403', async (_case, path, reason) => {
    const token = setup()
    const res = await call(path, { token })
    expect(res.status).toBe(403)
    expect(res.body).toMatchObject({ kind: 'Status', reason: 'Forbidden', code: 403 })
    expect(res.body?.message).toContain(reason)
  })

  it('answers a compacted resourceVersion with an ERROR 410 event in an HTTP 200 stream', async () => {
    const token = setup()
    const rv = api.store.resourceVersion
    api.patch('ConfigMap', 'default', 'mine', { data: { a: '2' } })
    api.compact()
    const { status, events } = await watchEvents(one('configmaps', 'mine', `&watch=true&resourceVersion=${rv}`), 1, token)
    expect(status).toBe(200)
    expect(events).toEqual([{ type: 'ERROR', object: expect.objectContaining({ kind: 'Status', code: 410, reason: 'Expired' }) }])
  })

  it('sends a bookmark only to a watch that asked, with only the resourceVersion', async () => {
    const token = setup()
    const rv = String(api.store.resourceVersion)
    const marked = await watchEvents(one('configmaps', 'mine', `&watch=true&allowWatchBookmarks=true&resourceVersion=${rv}`), 1, token, () => {
      setTimeout(() => api.patch('ConfigMap', 'default', 'other', { data: { x: 'y' } }), 10)
    })
    expect(marked.events).toEqual([{ type: 'BOOKMARK', object: { kind: 'ConfigMap', apiVersion: 'v1', metadata: { resourceVersion: String(api.store.resourceVersion) } } }])
    const plain = await watchEvents(one('configmaps', 'mine', `&watch=true&resourceVersion=${api.store.resourceVersion}`), 1, token, () => {
      setTimeout(() => api.patch('ConfigMap', 'default', 'other', { data: { x: 'z' } }), 10)
    }, 300)
    expect(plain.events).toEqual([])
  })
})

describe('request counters', () => {
  it('count requests by verb, resource (with its subresource) and user; a refused one counts too', async () => {
    const token = api.nodeToken('n1')
    api.create('Node', { metadata: { name: 'n1' } })
    api.create('ConfigMap', { metadata: { name: 'cm', namespace: 'default' } })
    await call('/api/v1/nodes/n1', { token })
    await call('/api/v1/nodes/n1', { token })
    await call('/api/v1/namespaces/default/configmaps/cm', { token })
    await call('/api/v1/nodes/n1/status', { token, method: 'PATCH', body: { status: {} }, contentType: 'application/merge-patch+json' })
    await call('/api/v1/namespaces/default/configmaps/cm')
    expect(api.requestCounts()).toEqual([
      { verb: 'get', resource: 'configmaps', user: 'kubernetes-admin', count: 1 },
      { verb: 'get', resource: 'configmaps', user: 'system:node:n1', count: 1 },
      { verb: 'get', resource: 'nodes', user: 'system:node:n1', count: 2 },
      { verb: 'patch', resource: 'nodes/status', user: 'system:node:n1', count: 1 },
    ])
    expect(api.countRequests({ user: 'system:node:n1' })).toBe(4)
    expect(api.countRequests({ verb: 'get', user: (u) => u.startsWith('system:node:') })).toBe(3)
    api.resetRequestCounts()
    expect(api.countRequests()).toBe(0)
  })
})

describe('a claim status written by a node (Node authorizer and NodeRestriction)', () => {
  it("lets a node patch the expansion fields of its pods' claims, nothing else, nobody else's", async () => {
    const token = api.nodeToken('n1')
    api.create('PersistentVolumeClaim', { metadata: { name: 'mine', namespace: 'default' }, spec: { volumeName: 'pv-1' }, status: { phase: 'Bound' } })
    api.create('PersistentVolumeClaim', { metadata: { name: 'theirs', namespace: 'default' }, spec: { volumeName: 'pv-2' }, status: { phase: 'Bound' } })
    api.create('Pod', pod('a', 'n1', { volumes: [{ name: 'd', persistentVolumeClaim: { claimName: 'mine' } }] }))
    api.create('Pod', pod('b', 'n2', { volumes: [{ name: 'd', persistentVolumeClaim: { claimName: 'theirs' } }] }))
    const patch = (claim: string, status: object, subresource = '/status') =>
      call(`/api/v1/namespaces/default/persistentvolumeclaims/${claim}${subresource}`, { token, method: 'PATCH', body: { status }, contentType: 'application/merge-patch+json' })
    const progress = { capacity: { storage: '2Gi' }, allocatedResourceStatuses: { storage: 'NodeResizeInProgress' }, conditions: [{ type: 'Resizing', status: 'True' }] }
    const ok = await patch('mine', progress)
    expect(ok.body?.message).toBeUndefined()
    expect(ok.status).toBe(200)
    expect(ok.body?.status).toMatchObject({ phase: 'Bound', ...progress })
    expect((await patch('theirs', progress)).body?.message).toContain("no relationship found between node 'n1' and this object")
    // The claim itself, and status fields other than the three.
    expect((await patch('mine', progress, '')).status).toBe(403)
    const phase = await patch('mine', { phase: 'Lost' })
    expect(phase.status).toBe(403)
    expect(phase.body?.message).toBe('persistentvolumeclaims "mine" is forbidden: node "n1" is not allowed to update fields other than status.capacity and status.conditions')
    expect((await patch('mine', { allocatedResources: { storage: '5Gi' } })).status).toBe(403)
    expect(api.get('PersistentVolumeClaim', 'default', 'mine')?.status).toMatchObject({ phase: 'Bound', capacity: { storage: '2Gi' } })
  })
})

describe('fault injection', () => {
  it('answers the next matching request with the given Status', async () => {
    api.failNext({ method: 'GET', path: /\/pods$/, status: 500, message: 'etcd is down' })
    expect((await call('/api/v1/pods')).body).toMatchObject({ code: 500, message: 'etcd is down' })
    expect((await call('/api/v1/pods')).status).toBe(200)
  })
})
