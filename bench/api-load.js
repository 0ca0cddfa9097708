// API load and update latency at fleet scale: 1, 100 and 1,000 simulated nodes sharing one fake API
// server (@kubevol/agent/testing: the real server's wire behaviour and Node authorizer), each node
// the agent's API object reader (@kubevol/agent/kube) for 10 pods with a ConfigMap volume and a
// Secret volume each (20 objects), under both change detection strategies in the same run:
// - Watch (the default, the kubelet's): a watch per referenced object; a node that hears a change
//   reads the object (from the watch) as the volume manager does when the reader announces it;
// - Cache (the former one): a GET reused for 5 s, and every volume set up again on the one-minute
//   pod sync, which is when changes are found (each sync reads the node's 20 objects).
// The server's request counters give requests per node per minute, idle and under churn, and the
// latency is from a change written to the server to the node reading the new content.
//
// Time. The Watch fleets run in real time: nothing in them is periodic except the watches' renewals
// (client-go's 5-10 min server-side timeout), which a window of seconds would not see. So a Watch
// fleet's idle rate is the requests counted in the window (none are due) plus the renewals, which are
// measured from the wire: every watch request carries the timeoutSeconds the server ends it after, so
// a watch renews 60 / timeoutSeconds times a minute. The Cache fleets are periodic: their minute is
// scaled (every period with it: the sync, the TTL), and lasts minuteMs real ms, chosen so the fleet
// asks the fake server (one Node.js process on a shared 2-core machine, the clients in the same
// process) for at most CACHE_BUDGET requests per real second; their latencies, made of those
// periods, are scaled back to simulated ms.
//
// Churn: CHURN changes per node per minute at random objects of the fleet, or faster where a small
// fleet would give under MIN_SAMPLES changes in the window (the rate is in the results). Neither
// strategy's requests depend on it (a watch event is not a request; the Cache reads are periodic).
//
// Sizes and budget: KUBEVOL_BENCH_API_NODES (1,100,1000), KUBEVOL_BENCH_API_PODS (pods per node, 10),
// KUBEVOL_BENCH_API_CACHE_BUDGET (GET/s, 300).
//
// The real API server: KUBEVOL_BENCH_API_SERVER=real runs the Watch fleets (100 and 1,000 nodes unless
// KUBEVOL_BENCH_API_NODES says otherwise) against the fake and then against a real kube-apiserver v1.32 with etcd
// (KUBEVOL_ENVTEST_ASSETS, bench/real-api-server.js), one size after the other, and writes results/api-load-real:
// the same figures from each, with the CPU and resident memory of the server (the fake's is the bench's one process,
// server and clients; the real one's, kube-apiserver and etcd, each its own process).
import { silentLogger } from '@kubevol/core'
import { createMemoryPodSource } from '@kubevol/core/testing'
import { createApiObjectReader, createKubeClients } from '@kubevol/agent/kube'
import { startFakeApiServer } from '@kubevol/agent/testing'
import { writeResult } from './results.js'

const REAL = process.env.KUBEVOL_BENCH_API_SERVER === 'real'
const SIZES = (process.env.KUBEVOL_BENCH_API_NODES ?? (REAL ? '100,1000' : '1,100,1000')).split(',').map(Number)
const CACHE_BUDGET = Number(process.env.KUBEVOL_BENCH_API_CACHE_BUDGET ?? 300)
import { readFileSync } from 'node:fs'
import os from 'node:os'

/** Pods per node (a ConfigMap and a Secret volume each): KUBEVOL_BENCH_API_PODS, 10 by default. */
const PODS = Number(process.env.KUBEVOL_BENCH_API_PODS ?? 10)

/** The process's limit of open files (Linux), else a common default. */
function openFileLimit() {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files'))
    const soft = Number(line?.split(/\s{2,}/)[1])
    return Number.isFinite(soft) ? soft : 1024
  } catch {
    return 1024
  }
}

/**
 * Pods per node of a fleet: 10, or fewer where the fleet's watches would not fit in this process.
 * Over HTTP/1.1 (client-node's, and the fake server's) each watch is a connection, and both its ends
 * are open files of this one process: a 1,000-node fleet of 20 watches per node needs 40,000, over the
 * limit of 20,000 this machine allows (and root here cannot raise); against the real API server only the
 * clients' ends are. Such a fleet runs with fewer pods per node, both strategies alike; per-object rates carry over (each object costs the same). The
 * kubelet multiplexes its watches over one HTTP/2 connection (see README).
 */
function podsPerNode(nodes, endsInProcess = 2) {
  const watches = Math.floor((openFileLimit() * 0.8) / endsInProcess)
  return Math.max(1, Math.min(PODS, Math.floor(watches / nodes / 2)))
}
/** Changes per node per minute, spread over its objects (each changes once per 10 min on average). */
const CHURN = 2
/** Latency samples wanted at least: a small fleet changes faster than CHURN to give them. */
const MIN_SAMPLES = 100
const TTL_S = 5
const TARGETS = { latencyP99Ms: 2000 }
/** Real seconds of each counted window of the Watch fleets, and of the shortest Cache window. */
const WINDOW = { idle: 10, churn: 15 }
/** The shortest simulated minute of a Cache fleet (real ms): timer and event-loop delays stay small beside its periods. */
const MIN_MINUTE_MS = 1000

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const nodeName = (i) => `bench-${i}`
const objectName = (i, p) => `${nodeName(i)}-p${p}`
const isBenchNode = (user) => user.startsWith('system:node:bench-')
const b64 = (s) => Buffer.from(s).toString('base64')

/** The pods and objects of nodes [from, to), as [kind, object]. */
function objectsOf(from, to) {
  const objects = []
  for (let i = from; i < to; i++) {
    for (let p = 0; p < PODS; p++) {
      const name = objectName(i, p)
      objects.push(['ConfigMap', { metadata: { name, namespace: 'default' }, data: { v: '0' } }])
      objects.push(['Secret', { metadata: { name, namespace: 'default' }, data: { v: b64('0') } }])
      objects.push(['Pod', podObject(i, p)])
    }
  }
  return objects
}

/** The fake API server behind the surface the fleets use (the real one's is bench/real-api-server.js). */
function fakeServer(api) {
  return {
    name: 'fake',
    endsInProcess: 2,
    createAll: async (objects) => {
      for (const [kind, object] of objects) api.create(kind, object)
    },
    patch: (kind, namespace, name, patch) => api.patch(kind, namespace, name, patch),
    kubeConfig: (name) => api.kubeConfig(api.nodeToken(name)),
    resetRequestCounts: () => api.resetRequestCounts(),
    requestCounts: () => api.requestCounts(),
    openWatches: async (resource) => (resource ? api.openWatches(resource) : api.openWatches('configmaps') + api.openWatches('secrets')),
    watchRequests: () => api.requests.filter((r) => r.watch),
    // The fake serves from the bench's own process: its usage is the process's, clients included.
    usage: () => ({ process: { cpuSeconds: (process.cpuUsage().user + process.cpuUsage().system) / 1e6, rssBytes: process.memoryUsage().rss } }),
    close: () => api.close(),
  }
}

function podObject(i, p) {
  const name = objectName(i, p)
  return {
    metadata: { name, namespace: 'default', uid: `uid-${name}` },
    spec: {
      nodeName: nodeName(i),
      containers: [{ name: 'c', image: 'busybox', volumeMounts: [{ name: 'config', mountPath: '/c' }, { name: 'creds', mountPath: '/s' }] }],
      volumes: [
        { name: 'config', configMap: { name } },
        { name: 'creds', secret: { secretName: name } },
      ],
    },
  }
}

/** The value of an object as the reader returned it (a Secret's is base64). */
const contentOf = (kind, object) => (kind === 'Secret' ? Buffer.from(object.data?.v ?? '', 'base64').toString() : object.data?.v)

/** One simulated node: its reader, and what the core would do with it under the strategy. */
function startNode(api, i, strategy, minuteMs, pods, seen) {
  // minuteMs: 60000 for the Watch fleets (real time); the Cache fleets' scaled minute.
  const name = nodeName(i)
  const podSource = createMemoryPodSource(
    Array.from({ length: pods }, (_, p) => podObject(i, p)),
    { ready: true },
  )
  const reader = createApiObjectReader({
    clients: createKubeClients(api.kubeConfig(name)),
    nodeName: name,
    ttlMs: (TTL_S / 60) * minuteMs,
    changeDetection: strategy,
    pods: podSource,
    retryMs: 1000,
    logger: silentLogger,
  })
  const read = (kind, object) => (kind === 'ConfigMap' ? reader.getConfigMap('default', object) : reader.getSecret('default', object))
  const check = (kind, object) =>
    read(kind, object).then(
      (o) => seen(kind, object, contentOf(kind, o)),
      () => undefined,
    )
  let timer
  if (strategy === 'Watch') {
    reader.objectWatches.start()
    reader.subscribe((changed) => changed && void check(changed.kind, changed.name))
  } else {
    // The core's one-minute pod sync sets every configMap and secret volume up again: a read each.
    const sync = () => Promise.all(Array.from({ length: pods }, (_, p) => [check('ConfigMap', objectName(i, p)), check('Secret', objectName(i, p))]).flat())
    const first = setTimeout(() => {
      void sync()
      timer = setInterval(() => void sync(), minuteMs)
    }, Math.random() * minuteMs)
    timer = first
  }
  return {
    reader,
    stop() {
      clearTimeout(timer)
      clearInterval(timer)
      reader.objectWatches.stop()
    },
  }
}

/** Writes `rate` changes per real ms at random objects of the fleet, until stopped. */
function startChurn(api, nodes, pods, rate, pending) {
  let seq = 0
  const perTick = 50
  let owed = 0
  const timer = setInterval(() => {
    owed += rate * perTick
    for (; owed >= 1; owed--) {
      const i = Math.floor(Math.random() * nodes)
      const name = objectName(i, Math.floor(Math.random() * pods))
      const kind = Math.random() < 0.5 ? 'ConfigMap' : 'Secret'
      const v = String(++seq)
      pending.set(`${kind}/${name}`, { v, at: performance.now() })
      api.patch(kind, 'default', name, { data: { v: kind === 'Secret' ? b64(v) : v } })
    }
  }, perTick)
  return () => clearInterval(timer)
}

const percentile = (sorted, q) => (sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))])
const round = (x, digits = 2) => (x === null ? null : Number(x.toFixed(digits)))

/** Requests of the fleet counted by the server, by verb. */
function fleetRequests(api) {
  const byVerb = {}
  for (const c of api.requestCounts()) if (isBenchNode(c.user)) byVerb[c.verb] = (byVerb[c.verb] ?? 0) + c.count
  return byVerb
}
const sum = (byVerb) => Object.values(byVerb).reduce((a, b) => a + b, 0)

/**
 * Waits until every Watch node's watches are open (or the deadline passes); the fleet's, beyond `baseline` (the real
 * API server's own watches of ConfigMaps and Secrets).
 */
async function waitWatching(api, nodes, objects, baseline) {
  const deadline = Date.now() + 600_000
  while ((await api.openWatches()) - baseline < nodes * objects && Date.now() < deadline) await sleep(500)
  return (await api.openWatches()) - baseline
}

/**
 * The renewals per node per minute of a Watch fleet, from the wire: each watch request of the fleet
 * carries the timeout the server ends it after, and is renewed when it ends.
 */
function renewalsPerNodePerMinute(api, nodes, watchesOpen) {
  const timeouts = api.watchRequests().filter((r) => r.user && isBenchNode(r.user) && r.query.timeoutSeconds).map((r) => Number(r.query.timeoutSeconds))
  if (timeouts.length === 0) return { perNodePerMinute: null, meanTimeoutSeconds: null }
  const mean = timeouts.reduce((a, b) => a + b, 0) / timeouts.length
  return { perNodePerMinute: round(((watchesOpen / nodes) * 60) / mean, 3), meanTimeoutSeconds: round(mean, 0) }
}

/**
 * Counts the fleet's requests over `ms` real ms, in simulated minutes of `minuteMs`, and the server's CPU (percent
 * of one core over the window) and resident memory at its end, per process.
 */
async function countWindow(api, ms, minuteMs) {
  api.resetRequestCounts()
  const start = performance.now()
  const before = api.usage()
  await sleep(ms)
  const after = api.usage()
  const seconds = (performance.now() - start) / 1000
  const requests = fleetRequests(api)
  const usage = Object.fromEntries(
    Object.entries(after).map(([proc, u]) => [proc, { cpuPercent: round(((u.cpuSeconds - (before[proc]?.cpuSeconds ?? 0)) / seconds) * 100, 1), rssMiB: round(u.rssBytes / 2 ** 20, 0) }]),
  )
  return { requests, minutes: (performance.now() - start) / minuteMs, usage }
}

/** One fleet: N nodes under one strategy, idle and then under churn; the server's counts per window. */
async function runFleet(api, nodes, strategy) {
  const watch = strategy === 'Watch'
  const pods = podsPerNode(nodes, api.endsInProcess)
  const objects = pods * 2
  const minuteMs = watch ? 60_000 : Math.max(MIN_MINUTE_MS, Math.ceil(((nodes * objects) / CACHE_BUDGET) * 1000))
  const windowMs = (seconds) => (watch ? seconds * 1000 : Math.max(seconds * 1000, minuteMs * 1.05))
  const pending = new Map()
  const latencies = []
  const seen = (kind, object, value) => {
    const change = pending.get(`${kind}/${object}`)
    if (!change || change.v !== value) return
    pending.delete(`${kind}/${object}`)
    latencies.push(performance.now() - change.at)
  }
  const baseline = await api.openWatches()
  const started = performance.now()
  const fleet = Array.from({ length: nodes }, (_, i) => startNode(api, i, strategy, minuteMs, pods, seen))
  const watchesOpen = watch ? await waitWatching(api, nodes, objects, baseline) : undefined
  const setupSeconds = round((performance.now() - started) / 1000, 1)
  // A Cache fleet needs no warm-up: each node's sync starts at a random point of the first minute,
  // so any minute from the start holds one sync of every node, as on nodes that have run a while.
  const idle = await countWindow(api, windowMs(WINDOW.idle), minuteMs)
  const churnMs = windowMs(WINDOW.churn)
  const rate = Math.max((CHURN * nodes) / minuteMs, MIN_SAMPLES / churnMs)
  const stopChurn = startChurn(api, nodes, pods, rate, pending)
  const churn = await countWindow(api, churnMs, minuteMs)
  stopChurn()
  // Changes written near the end are still seen (the Cache strategy only at its next sync): no cut-off bias.
  await sleep(watch ? 2000 : minuteMs * 1.1)
  const renewals = watch ? renewalsPerNodePerMinute(api, nodes, watchesOpen) : undefined
  for (const node of fleet) node.stop()
  await sleep(500)
  return summarize({ server: api.name, nodes, objects, strategy, minuteMs, setupSeconds, watchesOpen, idle, churn, renewals, latencies, unseen: pending.size, churnRate: (rate * minuteMs) / nodes })
}

/** A fleet's row: requests per node per minute (with the renewals, for Watch) and latency percentiles. */
function summarize(f) {
  const perMinute = (w) => sum(w.requests) / f.nodes / w.minutes
  const plusRenewals = (x) => round(x + (f.renewals?.perNodePerMinute ?? 0), 3)
  // Watch: real ms. Cache: its latency is made of scaled periods, so it is scaled back.
  const factor = f.strategy === 'Watch' ? 1 : 60_000 / f.minuteMs
  const sorted = f.latencies.map((ms) => ms * factor).sort((a, b) => a - b)
  return {
    server: f.server,
    nodes: f.nodes,
    objectsPerNode: f.objects,
    strategy: f.strategy,
    minuteMs: f.minuteMs,
    setupSeconds: f.setupSeconds,
    ...(f.watchesOpen !== undefined ? { watchesOpen: f.watchesOpen, renewals: f.renewals } : {}),
    usage: { idle: f.idle.usage, churn: f.churn.usage },
    idle: { requests: f.idle.requests, counted: round(perMinute(f.idle), 3), perNodePerMinute: plusRenewals(perMinute(f.idle)), perObjectPerMinute: round(plusRenewals(perMinute(f.idle)) / f.objects, 4) },
    churn: {
      requests: f.churn.requests,
      counted: round(perMinute(f.churn), 3),
      perNodePerMinute: plusRenewals(perMinute(f.churn)),
      perObjectPerMinute: round(plusRenewals(perMinute(f.churn)) / f.objects, 4),
      changesPerNodePerMinute: round(f.churnRate, 1),
    },
    latency: { samples: sorted.length, unseenAtEnd: f.unseen, medianMs: round(percentile(sorted, 0.5), 0), p99Ms: round(percentile(sorted, 0.99), 0), maxMs: round(sorted.at(-1) ?? null, 0) },
  }
}

function markdown(rows, ratios) {
  const renewals = (r) => (r.renewals ? ` (${r.idle.counted} counted + ${r.renewals.perNodePerMinute} renewals)` : '')
  const lines = [
    '## API load and update latency (`api-load.js`)',
    '',
    `One fake API server; per node ${PODS} pods with a ConfigMap and a Secret volume each (20 objects), fewer where a fleet's watches would not fit in the process's open files ("objects/node"; per-object rates carry over). Requests per node per minute, counted by the server (Watch: plus the watch renewals, from the timeouts on the wire); latency from the write to the node reading the new content. Watch fleets run in real time; a Cache fleet's minute is scaled ("1 min lasts"). Method: bench/README.md.`,
    '',
    '| nodes | objects/node | strategy | 1 min lasts | idle req/node/min | idle req/object/min | churn req/node/min | changes/node/min | latency median | latency p99 | samples |',
    '| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (r) =>
        `| ${r.nodes} | ${r.objectsPerNode} | ${r.strategy} | ${r.minuteMs / 1000} s | ${r.idle.perNodePerMinute}${renewals(r)} | ${r.idle.perObjectPerMinute} | ${r.churn.perNodePerMinute} | ${r.churn.changesPerNodePerMinute} | ${r.latency.medianMs ?? '-'} ms | ${r.latency.p99Ms ?? '-'} ms | ${r.latency.samples} |`,
    ),
    '',
    '| nodes | Cache / Watch requests, idle | Cache / Watch requests, churn | Cache / Watch latency p99 | Watch p99 under 2 s |',
    '| ---: | ---: | ---: | ---: | --- |',
    ...ratios.map((r) => `| ${r.nodes} | ${r.idle ?? '-'} | ${r.churn ?? '-'} | ${r.latencyP99 ?? '-'} | ${r.p99Met ? 'met' : 'NOT met'} |`),
  ]
  return lines.join('\n')
}

const ratio = (a, b) => (b > 0 ? round(a / b, 1) : null)

async function main() {
  if (REAL) return mainReal()
  const api = fakeServer(await startFakeApiServer({ maxHistory: 200_000 }))
  const rows = []
  const ratios = []
  let provisioned = 0
  try {
    for (const nodes of SIZES) {
      await api.createAll(objectsOf(provisioned, nodes))
      provisioned = Math.max(provisioned, nodes)
      const byStrategy = {}
      for (const strategy of ['Watch', 'Cache']) {
        const row = await runFleet(api, nodes, strategy)
        console.log(JSON.stringify(row))
        rows.push(row)
        byStrategy[strategy] = row
      }
      const { Watch: w, Cache: c } = byStrategy
      ratios.push({
        nodes,
        idle: ratio(c.idle.perNodePerMinute, w.idle.perNodePerMinute),
        churn: ratio(c.churn.perNodePerMinute, w.churn.perNodePerMinute),
        latencyP99: ratio(c.latency.p99Ms ?? 0, w.latency.p99Ms ?? 0),
        p99Met: w.latency.p99Ms !== null && w.latency.p99Ms < TARGETS.latencyP99Ms,
      })
    }
  } finally {
    await api.close()
  }
  const machine = `${os.cpus()[0]?.model?.trim()} (${os.cpus().length} cores), Node ${process.version}, ${process.platform}/${process.arch}, ${new Date().toISOString()}`
  await writeResult('api-load', { machine, pods: PODS, openFileLimit: openFileLimit(), churnPerNodePerMinute: CHURN, cacheBudgetRequestsPerSecond: CACHE_BUDGET, targets: TARGETS, rows, ratios }, markdown(rows, ratios))
}

/** The Watch fleets of each size on the fake and on the real API server, each on a fresh server. */
async function mainReal() {
  const { startRealApiServer } = await import('./real-api-server.js')
  // A 1,000-node fleet on the real server once ended the run with an uncaught ECONNRESET ("socket hang up") from
  // a client's socket; each such error is counted in its fleet's row instead of ending the run.
  const uncaught = []
  process.on('uncaughtException', (err) => uncaught.push(`${err.code ?? ''} ${err.message}`.trim()))
  const rows = []
  for (const nodes of SIZES) {
    for (const server of ['fake', 'real']) {
      const api = server === 'fake' ? fakeServer(await startFakeApiServer({ maxHistory: 200_000 })) : await startRealApiServer(Array.from({ length: nodes }, (_, i) => nodeName(i)))
      if (api.skip) {
        console.log(`api-load (real API server) skipped: ${api.skip}`)
        return
      }
      if (server === 'real') Object.assign(api, { name: 'real', endsInProcess: 1 })
      try {
        const started = performance.now()
        await api.createAll(objectsOf(0, nodes).filter(([, o]) => Number(/^bench-(\d+)-p(\d+)$/.exec(o.metadata.name)?.[2]) < podsPerNode(nodes, api.endsInProcess)))
        console.log(`${server}: ${nodes} nodes provisioned in ${round((performance.now() - started) / 1000, 1)} s`)
        const before = uncaught.length
        const row = { ...(await runFleet(api, nodes, 'Watch')), uncaughtErrors: uncaught.slice(before) }
        console.log(JSON.stringify(row))
        rows.push(row)
      } finally {
        await api.close()
      }
    }
  }
  const machine = `${os.cpus()[0]?.model?.trim()} (${os.cpus().length} cores), Node ${process.version}, ${process.platform}/${process.arch}, ${new Date().toISOString()}`
  await writeResult('api-load-real', { machine, pods: PODS, openFileLimit: openFileLimit(), churnPerNodePerMinute: CHURN, rows }, markdownReal(rows))
}

function markdownReal(rows) {
  const usage = (u) =>
    Object.entries(u ?? {})
      .map(([proc, x]) => `${proc} ${x.cpuPercent}% / ${x.rssMiB} MiB`)
      .join(', ')
  return [
    '## API load on the fake and on the real API server (`api-load.js`, `KUBEVOL_BENCH_API_SERVER=real`)',
    '',
    'Watch fleets of simulated nodes (the agent\'s API object reader each, with its node identity) against the fake API server and against kube-apiserver v1.32 with etcd, each fresh. Requests per node per minute (counted by the server: the fake\'s counters, the real one\'s audit log; plus the watch renewals from the timeouts on the wire), open watches, update latency, and the server\'s CPU (percent of one core over the window) and resident memory: the fake\'s is the bench\'s one process (server and clients), the real one\'s kube-apiserver and etcd. Method: bench/README.md.',
    '',
    '| nodes | objects/node | server | start | watches open | idle req/node/min | churn req/node/min | latency median | latency p99 | server CPU / RSS, idle | server CPU / RSS, churn |',
    '| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |',
    ...rows.map(
      (r) =>
        `| ${r.nodes} | ${r.objectsPerNode} | ${r.server} | ${r.setupSeconds} s | ${r.watchesOpen} | ${r.idle.perNodePerMinute} (${r.idle.counted} counted) | ${r.churn.perNodePerMinute} | ${r.latency.medianMs ?? '-'} ms | ${r.latency.p99Ms ?? '-'} ms | ${usage(r.usage.idle)} | ${usage(r.usage.churn)} |`,
    ),
  ].join('\n')
}

await main()
