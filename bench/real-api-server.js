// The real control plane for api-load.js (KUBEVOL_BENCH_API_SERVER=real): etcd and kube-apiserver v1.32 from
// KUBEVOL_ENVTEST_ASSETS, started by the tests' harness (test/envtest/control-plane.ts, loaded through Vite since the
// bench runs on plain Node), behind the same surface api-load.js uses of the fake API server: create and patch as the
// administrator, a kubeconfig per node identity (a token per node in the token file), request counters (from the
// apiserver's audit log: a watch counts when it starts, anything else when it ends), open watches (the apiserver's
// `apiserver_longrunning_requests` gauge), the watch requests' query strings, and the CPU and memory of the
// apiserver and etcd (from /proc).
import { readFileSync, statSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const PATHS = { ConfigMap: 'configmaps', Secret: 'secrets', Pod: 'pods' }

/** CPU seconds (user + system) and resident memory of a process, from /proc. */
function processUsage(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const rssKiB = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0)
    return { cpuSeconds: (Number(fields[11]) + Number(fields[12])) / 100, rssBytes: rssKiB * 1024 }
  } catch {
    return { cpuSeconds: 0, rssBytes: 0 }
  }
}

/** Runs `fn` over `items`, `limit` at a time. */
async function pool(items, limit, fn) {
  let next = 0
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++])
  }))
}

/**
 * Starts the control plane with a token for each of `nodeNames`; resolves with the server, or with `{ skip }` when
 * the assets are missing.
 */
export async function startRealApiServer(nodeNames) {
  const { createServer } = await import('vite')
  const vite = await createServer({
    root: ROOT,
    configFile: false,
    logLevel: 'silent',
    appType: 'custom',
    server: { middlewareMode: true, hmr: false, ws: false },
    ssr: { resolve: { conditions: ['@kubevol/source'] } },
  })
  const { envtestAssets, startControlPlane } = await vite.ssrLoadModule('/test/envtest/control-plane.ts')
  const assets = envtestAssets()
  if (!assets.dir) {
    await vite.close()
    return { skip: assets.skip }
  }
  const cp = await startControlPlane({ nodes: nodeNames })
  let mark = 0
  const events = (from) => {
    const text = readFileSync(cp.auditLogPath).subarray(from).toString('utf8')
    return text.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
  }
  // A request once: a watch at ResponseStarted, anything else at ResponseComplete.
  const counted = (e) => (e.verb === 'watch' ? e.stage === 'ResponseStarted' : e.stage === 'ResponseComplete')
  const metric = async (resource) => {
    const res = await cp.request('GET', '/metrics')
    const text = res.body.text ?? ''
    let n = 0
    for (const line of text.split('\n')) {
      if (line.startsWith('apiserver_longrunning_requests{') && line.includes(`resource="${resource}"`) && line.includes('verb="WATCH"')) n += Number(line.split(' ').at(-1))
    }
    return n
  }
  return {
    cp,
    /** Creates objects as the administrator, 32 at a time. */
    async createAll(objects) {
      await pool(objects, 32, async ([kind, object]) => {
        await cp.must('POST', `/api/v1/namespaces/${object.metadata.namespace}/${PATHS[kind]}`, object)
      })
    },
    patch(kind, namespace, name, patch) {
      void cp.request('PATCH', `/api/v1/namespaces/${namespace}/${PATHS[kind]}/${name}`, patch, { contentType: 'application/merge-patch+json' })
    },
    kubeConfig: (name) => cp.kubeConfig({ token: cp.nodeToken(name) }),
    resetRequestCounts() {
      mark = statSync(cp.auditLogPath).size
    },
    requestCounts() {
      const byKey = new Map()
      for (const e of events(mark)) {
        if (!counted(e)) continue
        const key = `${e.verb} ${e.user.username}`
        const c = byKey.get(key) ?? { verb: e.verb, resource: e.objectRef?.resource ?? '', user: e.user.username, count: 0 }
        c.count++
        byKey.set(key, c)
      }
      return [...byKey.values()]
    },
    openWatches: async (resource) => (resource ? metric(resource) : (await metric('configmaps')) + (await metric('secrets'))),
    /** Every watch request so far, as the fake's request log has them. */
    watchRequests() {
      return events(0)
        .filter((e) => e.verb === 'watch' && e.stage === 'ResponseStarted')
        .map((e) => ({ watch: true, user: e.user.username, query: Object.fromEntries(new URL(e.requestURI, 'https://x').searchParams) }))
    },
    /** The apiserver's and etcd's usage. */
    usage() {
      const pids = cp.pids()
      return { apiserver: processUsage(pids.apiserver), etcd: processUsage(pids.etcd) }
    },
    async close() {
      await cp.stop()
      await vite.close()
    },
  }
}
