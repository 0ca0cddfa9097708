/**
 * The "kubevol and the kubelet: measured" page and its charts, from the recorded benchmark results in
 * bench/results/*.json. Each chart is a Vega-Lite spec rendered to SVG in Node (`view.toSVG()`, no
 * canvas, no network); each SVG's <desc> lists the figures it was drawn from. Pure: returns the files,
 * scripts/generate-results-pages.mjs writes them and test/results-pages.test.ts compares them.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import * as vega from 'vega'
import { compile } from 'vega-lite'

const REPO = 'https://github.com/kubevol/kubevol/blob/main'
/**
 * The whole chart's width, labels included (autosize fit). The page shows a chart at this size, never
 * scaled down (on a narrow screen it scrolls inside its own box), so a label keeps its size: 600 fits the
 * text column at a desktop width, and no text is under 11 px.
 */
const WIDTH = 600

/** A benchmark's results file, parsed, with its name for citations. */
function load(benchDir, name) {
  const json = JSON.parse(readFileSync(join(benchDir, 'results', `${name}.json`), 'utf8'))
  return { name, file: `bench/results/${name}.json`, json, md: readFileSync(join(benchDir, 'results', `${name}.md`), 'utf8') }
}

/**
 * The machine a result was measured on: the results file's `machine` (an object or a line); the CSI and
 * Linux benchmarks record theirs only in the header line of their .md, written by the same script.
 */
function machineOf(result) {
  const m = result.json.machine
  if (typeof m === 'string') return m
  if (m && typeof m === 'object') return `${m.cpu} (${m.cores} cores), Node ${m.node}${m.platform ? `, ${m.platform}/${m.arch}` : ''}, ${m.date}`
  const line = result.md.split('\n').find((l) => /Node v\d/.test(l))
  if (!line) throw new Error(`${result.file}: no machine recorded (neither in the JSON nor in ${result.name}.md)`)
  return line.trim()
}

const fmt = (n, digits = 2) => Number(n.toFixed(digits)).toLocaleString('en-US', { maximumFractionDigits: digits })

// vega-lite notes that a fixed-height chart cannot fit its height; nothing else is logged while compiling.
const quiet = { level: () => quiet, info: () => quiet, debug: () => quiet, warn: () => quiet, error: (...m) => { throw new Error(m.join(' ')) } }

/** Renders a Vega-Lite spec to SVG, with a <title> and a <desc> naming every figure drawn. */
async function render(spec, title, figures) {
  const { spec: vg } = compile({
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    width: WIDTH,
    autosize: { type: 'fit-x', contains: 'padding' },
    background: 'white',
    padding: 8,
    // No canvas in Node: vega estimates text widths, generously, so label limits are raised.
    config: {
      font: 'sans-serif',
      view: { stroke: null },
      title: { anchor: 'start', fontSize: 15, subtitleFontSize: 12 },
      axis: { labelLimit: 600, labelFontSize: 11, titleFontSize: 12 },
      legend: { labelLimit: 600, orient: 'bottom', direction: 'vertical', labelFontSize: 11, titleFontSize: 12 },
      text: { fontSize: 11 },
    },
    ...spec,
  }, { logger: quiet })
  const view = new vega.View(vega.parse(vg), { renderer: 'none', logLevel: vega.Error })
  const svg = await view.toSVG()
  view.finalize()
  const desc = figures.map(([source, value]) => `${source} = ${value}`).join('; ')
  const xml = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
  return `${svg.replace(/^<svg([^>]*)>/, (open) => `${open}<title>${xml(title)}</title><desc>drawn from ${xml(desc)}</desc>`)}\n`
}

const barsWithLabels = (x, y, extra = {}) => ({
  layer: [
    { mark: { type: 'bar', height: { band: 0.7 } }, encoding: { x, y, ...(extra.color ? { color: extra.color } : {}) } },
    { mark: { type: 'text', align: 'left', dx: 4 }, encoding: { x: extra.labelX ?? x, y, text: { field: 'label' } } },
  ],
})

async function podStartup(r) {
  const kind = (mode) => (mode === 'event' ? 'kubevol, event-driven' : "the kubelet's timing (pollingCompat)")
  // The chart's rows, short enough to leave the plot its width; the table gives the long names.
  const short = (mode) => (mode === 'event' ? 'event-driven' : "kubelet's timing")
  const rows = []
  const figures = []
  r.json.results.forEach((row, i) => {
    for (const stat of ['median', 'p90', 'p99']) {
      const ms = row[`${stat}Ms`]
      rows.push({ row: `${row.variant} · ${short(row.mode)}`, stat, ms, label: `${fmt(ms)} ms` })
      figures.push([`${r.file} results[${i}].${stat}Ms (${row.variant}, ${row.mode})`, ms])
    }
  })
  const c = r.json.config
  const title = `Pod to mounted: a pod with ${c.volumesPerPod} volumes on a node with ${fmt(c.nodePods, 0)} pods`
  const ranges = r.json.results.map((row) => ({ row: `${row.variant} · ${short(row.mode)}`, from: row.medianMs, to: row.p99Ms }))
  const y = { field: 'row', type: 'nominal', title: null, sort: null }
  const svg = await render(
    {
      title: { text: title, subtitle: ['ms from the pod added to waitForAttachAndMount resolving:', 'median, p90, p99'] },
      height: { step: 44 },
      layer: [
        { data: { values: ranges }, mark: { type: 'rule', color: '#999', strokeWidth: 2 }, encoding: { x: { field: 'from', type: 'quantitative', scale: { type: 'log', domain: [0.1, 1000] }, axis: { values: [0.1, 1, 10, 100, 1000] }, title: 'ms (log scale); the figures are in the table' }, x2: { field: 'to' }, y } },
        { data: { values: rows }, mark: { type: 'point', filled: true, size: 90, opacity: 1 }, encoding: { x: { field: 'ms', type: 'quantitative' }, y, color: { field: 'stat', title: 'percentile', sort: ['median', 'p90', 'p99'], scale: { range: ['#1f4e8c', '#5b8fd0', '#c0504d'] } } } },
      ],
    },
    title,
    figures,
  )
  const table = [
    '| volumes | timing | samples | median | p90 | p99 | max |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: |',
    ...r.json.results.map((row) => `| ${row.variant} | ${kind(row.mode)} | ${row.samples} | ${fmt(row.medianMs)} ms | ${fmt(row.p90Ms)} ms | ${fmt(row.p99Ms)} ms | ${fmt(row.maxMs)} ms |`),
  ]
  return { svg, table, machine: machineOf(r) }
}

async function idleCpu(r) {
  const idle = r.json.idle
  const label = (row) => `${row.mix} mix, ${row.mode === 'event' ? 'event-driven' : "the kubelet's timing"}${row.announcing ? '' : ', re-read each minute'}`
  const rows = idle.map((row) => ({ row: label(row), mode: row.mode === 'event' ? 'kubevol, event-driven' : "the kubelet's timing (pollingCompat)", pct: row.cpuPercent, label: `${fmt(row.cpuPercent)} %` }))
  const counts = [...new Set(idle.map((row) => row.volumes))]
  const title = `Idle CPU with ${counts.map((n) => fmt(n, 0)).join(', ')} mounted volumes, % of one core`
  const target = r.json.targets.idleCpuPercent
  const svg = await render(
    {
      title: { text: title, subtitle: [`CPU over ${fmt(idle[0].wallSeconds, 0)} s of a node doing nothing;`, `the dashed rule is the target (< ${target} %)`] },
      height: { step: 34 },
      layer: [
        ...barsWithLabels(
          { field: 'pct', type: 'quantitative', title: '% of one core', scale: { domain: [0, 12] } },
          { field: 'row', type: 'nominal', title: null, sort: null, axis: { labelLimit: 600 } },
          // The rows name the timing: no legend to repeat it.
          { color: { field: 'mode', title: null, legend: null, scale: { range: ['#3c6fb4', '#c0504d'] } } },
        ).layer.map((l) => ({ ...l, data: { values: rows } })),
        { data: { values: [{ target }] }, mark: { type: 'rule', strokeDash: [4, 3], color: '#444' }, encoding: { x: { field: 'target', type: 'quantitative' } } },
      ],
    },
    title,
    idle.map((row, i) => [`${r.file} idle[${i}].cpuPercent (${label(row)}, ${row.volumes} volumes)`, row.cpuPercent]),
  )
  const table = [
    '| volumes | node | CPU in the window | % of one core |',
    '| ---: | --- | ---: | ---: |',
    ...idle.map((row) => `| ${fmt(row.volumes, 0)} | ${label(row)} | ${fmt(row.cpuSeconds)} s in ${fmt(row.wallSeconds, 0)} s | ${fmt(row.cpuPercent, 3)} % |`),
  ]
  return { svg, table, machine: machineOf(r) }
}

async function converge(r) {
  const rows = r.json.converge.map((row) => ({ row: `${row.mix} mix, ${fmt(row.pods, 0)} pods`, s: row.seconds, label: `${fmt(row.seconds)} s` }))
  const target = r.json.targets.convergeSeconds
  const title = `Converging ${fmt(r.json.converge[0].volumes, 0)} volumes from empty, seconds`
  const svg = await render(
    {
      title: { text: title, subtitle: ['every pod added at once to an empty node;', `the dashed rule is the target (< ${target} s, scratch mix)`] },
      height: { step: 40 },
      layer: [
        ...barsWithLabels({ field: 's', type: 'quantitative', title: 'seconds', scale: { domain: [0, 22] } }, { field: 'row', type: 'nominal', title: null, sort: null, axis: { labelLimit: 600 } }).layer.map((l) => ({ ...l, data: { values: rows } })),
        { data: { values: [{ target }] }, mark: { type: 'rule', strokeDash: [4, 3], color: '#444' }, encoding: { x: { field: 'target', type: 'quantitative' } } },
      ],
    },
    title,
    r.json.converge.map((row, i) => [`${r.file} converge[${i}].seconds (${row.mix}, ${row.volumes} volumes)`, row.seconds]),
  )
  const table = [
    '| mix | pods | volumes | seconds | manager heap per volume |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...r.json.converge.map((row) => `| ${row.mix} | ${fmt(row.pods, 0)} | ${fmt(row.volumes, 0)} | ${fmt(row.seconds)} s | ${fmt(row.heapBytesPerVolume, 0)} B |`),
  ]
  return { svg, table, machine: machineOf(r) }
}

async function linuxHost(r) {
  const j = r.json
  const rows = [
    { row: 'raw system calls (koffi), median of 3', s: j.raw, lx: Math.max(...j.raws), label: `${fmt(j.raw)} s` },
    { row: "the kubelet's steps as a loop, median of 3", s: j.kubeletSteps, lx: Math.max(...j.steps), label: `${fmt(j.kubeletSteps)} s` },
    { row: 'the whole kubevol manager', s: j.managed.total, lx: j.managed.total, label: `${fmt(j.managed.total)} s (${fmt(j.ratio)}× raw)` },
  ]
  const runs = [...j.raws.map((s) => ({ row: rows[0].row, s })), ...j.steps.map((s) => ({ row: rows[1].row, s }))]
  const title = '1,000 emptyDir (Memory) + 1,000 hostPath mounted and unmounted on Linux, seconds'
  const svg = await render(
    {
      title: { text: ['1,000 emptyDir + 1,000 hostPath mounted and unmounted', 'on Linux, s'], subtitle: ['real kernel, private mount namespace;', 'the dots are the runs behind each median'] },
      height: { step: 40 },
      layer: [
        ...barsWithLabels({ field: 's', type: 'quantitative', title: 'seconds', scale: { domain: [0, 0.8] } }, { field: 'row', type: 'nominal', title: null, sort: null }, { labelX: { field: 'lx', type: 'quantitative' } }).layer.map((l) => ({ ...l, data: { values: rows } })),
        { data: { values: runs }, mark: { type: 'point', filled: true, color: '#222', size: 30 }, encoding: { x: { field: 's', type: 'quantitative' }, y: { field: 'row', type: 'nominal', sort: null } } },
      ],
    },
    title,
    [
      [`${r.file} raw`, j.raw],
      [`${r.file} raws`, j.raws.join(', ')],
      [`${r.file} kubeletSteps`, j.kubeletSteps],
      [`${r.file} steps`, j.steps.join(', ')],
      [`${r.file} managed.total`, j.managed.total],
    ],
  )
  const table = [
    '| figure | value |',
    '| --- | ---: |',
    `| kubevol / raw system calls | ${fmt(j.ratio)}× |`,
    `| the kubelet's steps / raw system calls | ${fmt(j.stepsRatio)}× |`,
    `| mount table parse, ${fmt(j.table.lines, 0)} mounts (median of 20) | ${fmt(j.table.parseMedianMs)} ms |`,
    `| reconstruction of ${fmt(j.managed.reconstruction.volumes, 0)} mounted volumes | ${fmt(j.managed.reconstruction.seconds, 3)} s |`,
  ]
  return { svg, table, machine: machineOf(r) }
}

async function csi(r) {
  const j = r.json
  // Medians and p99s, as the table beside it gives them: a mean of the rounds would hide their spread.
  const rows = [
    { row: 'the four calls, made directly', ms: j.raw.medianMs, p99: j.raw.p99Ms, label: `${fmt(j.raw.medianMs)} ms (p99 ${fmt(j.raw.p99Ms)})` },
    { row: 'through kubevol', ms: j.managed.medianMs, p99: j.managed.p99Ms, label: `${fmt(j.managed.medianMs)} ms (p99 ${fmt(j.managed.p99Ms)})` },
  ]
  const title = `A CSI volume's round trip (NodeStage, NodePublish, NodeUnpublish, NodeUnstage), median and p99 of ${j.rounds}, ms`
  const y = { field: 'row', type: 'nominal', title: null, sort: null, axis: { labelLimit: 600 } }
  const svg = await render(
    {
      title: { text: `A CSI volume's round trip, median of ${j.rounds}, ms`, subtitle: ['NodeStage, NodePublish, NodeUnpublish, NodeUnstage; the hostpath', 'driver in its own process over gRPC; the rule reaches the p99'] },
      height: { step: 50 },
      layer: [
        { data: { values: rows }, mark: { type: 'rule', color: '#999', strokeWidth: 2 }, encoding: { x: { field: 'ms', type: 'quantitative' }, x2: { field: 'p99' }, y } },
        {
          data: { values: rows },
          mark: { type: 'bar', height: { band: 0.7 } },
          encoding: {
            x: { field: 'ms', type: 'quantitative', title: 'ms per round trip', scale: { domain: [0, 140] } },
            y,
            color: { field: 'row', title: null, legend: null, scale: { range: ['#9aa5b1', '#3c6fb4'] } },
          },
        },
        { data: { values: rows }, mark: { type: 'text', align: 'left', dx: 4 }, encoding: { x: { field: 'p99', type: 'quantitative' }, y, text: { field: 'label' } } },
      ],
    },
    title,
    [
      [`${r.file} rounds`, j.rounds],
      [`${r.file} raw.medianMs`, j.raw.medianMs],
      [`${r.file} raw.p99Ms`, j.raw.p99Ms],
      [`${r.file} managed.medianMs`, j.managed.medianMs],
      [`${r.file} managed.p99Ms`, j.managed.p99Ms],
    ],
  )
  const table = [
    '| figure | value |',
    '| --- | ---: |',
    `| round trip through kubevol, median (p99) | ${fmt(j.managed.medianMs)} ms (${fmt(j.managed.p99Ms)} ms) |`,
    `| the same four calls made directly, median (p99) | ${fmt(j.raw.medianMs)} ms (${fmt(j.raw.p99Ms)} ms) |`,
    `| kubevol / direct (medians) | ${fmt(j.ratio)}× |`,
    `| kubevol's part of a round trip, median | ${fmt(j.kubevolPerRound.medianMs)} ms |`,
    `| kubevol's share of all round-trip time | ${fmt(j.share * 100, 1)} % |`,
  ]
  return { svg, table, machine: machineOf(r) }
}

/** Short names for the side-by-side chart's rows; the table beside it gives the long ones. */
const KUBELET_ROW = {
  'startup-median': 'pod start-up, median',
  'startup-p99': 'pod start-up, p99',
  'unmount-median': 'pod removed → unmounted, median',
  fill: 'node filled from empty, wall',
  'fill-cpu': 'node filled from empty, CPU',
  'idle-cpu': 'idle CPU, node full',
  'latency-rss': 'peak RSS, latency workload',
  'kernel-mount': 'tmpfs + hostPath: all mounted',
  'kernel-unmount': 'tmpfs + hostPath: all unmounted',
  'kernel-cpu': 'tmpfs + hostPath: CPU a round',
  'kernel-rss': 'peak RSS, kernel workload',
}

async function kubelet(r) {
  const j = r.json
  const value = (n, unit) => `${fmt(n, n >= 100 ? 0 : n >= 1 ? 2 : 3)} ${unit}`
  const times = (n) => `${fmt(n, n >= 10 ? 0 : 2)}×`
  const points = []
  const spans = []
  const labels = []
  for (const row of j.rows) {
    const name = KUBELET_ROW[row.id] ?? row.what
    const share = row.kubevol.median / row.kubelet.median
    points.push({ row: name, side: 'kubelet v1.32', share: 1 }, { row: name, side: 'kubevol', share })
    // The line from kubevol's figure to the kubelet's, and the pairs' own ratios as kubevol's range.
    spans.push({ row: name, from: share, to: 1, lo: 1 / row.range[1], hi: 1 / row.range[0] })
    // The figures themselves are in the table below the chart; the label says which way and how far.
    labels.push({ row: name, at: Math.max(1, share, 1 / row.range[0]), label: row.ratio >= 1 ? `${times(row.ratio)} less` : `${times(1 / row.ratio)} more` })
  }
  const title = 'kubelet v1.32 against kubevol: each figure as a share of the kubelet\'s'
  const y = { field: 'row', type: 'nominal', title: null, sort: null, axis: { labelLimit: 600 } }
  const x = { field: 'share', type: 'quantitative', scale: { type: 'log', domain: [0.001, 10] }, axis: { values: [0.001, 0.01, 0.1, 1, 10], format: '~g' }, title: "kubevol ÷ kubelet v1.32 (log scale)" }
  const svg = await render(
    {
      title: { text: ['kubelet v1.32 against kubevol, same workloads,', 'same machine, runs alternating'], subtitle: [`each figure as a share of the kubelet's (log scale): left of 1 is less time, CPU`, 'or memory than the kubelet; the shaded bar is the range over the pairs'] },
      height: { step: 30 },
      layer: [
        { data: { values: spans }, mark: { type: 'rule', color: '#bbb', strokeWidth: 2 }, encoding: { x: { field: 'from', type: 'quantitative' }, x2: { field: 'to' }, y } },
        { data: { values: spans }, mark: { type: 'rule', color: '#3c6fb4', strokeWidth: 6, opacity: 0.35 }, encoding: { x: { field: 'lo', type: 'quantitative' }, x2: { field: 'hi' }, y } },
        { data: { values: points }, mark: { type: 'point', filled: true, size: 90, opacity: 1 }, encoding: { x, y, color: { field: 'side', title: null, sort: ['kubelet v1.32', 'kubevol'], scale: { range: ['#c0504d', '#1f4e8c'] } } } },
        { data: { values: labels }, mark: { type: 'text', align: 'left', dx: 8 }, encoding: { x: { field: 'at', type: 'quantitative' }, y, text: { field: 'label' } } },
      ],
    },
    title,
    j.rows.flatMap((row, i) => [
      [`${r.file} rows[${i}].kubelet.median (${row.id})`, row.kubelet.median],
      [`${r.file} rows[${i}].kubevol.median (${row.id})`, row.kubevol.median],
    ]),
  )
  const range = (row) => `${times(row.ratio)} (${times(row.range[0])}–${times(row.range[1])})`
  const table = [
    '| figure | kubelet v1.32 | kubevol | kubelet ÷ kubevol (range over the pairs) |',
    '| --- | ---: | ---: | ---: |',
    ...j.rows.map((row) => `| ${row.what} | ${value(row.kubelet.median, row.unit)} | ${value(row.kubevol.median, row.unit)} | ${range(row)} |`),
  ]
  if (j.imageRows?.length) {
    const flags = [...Object.entries(j.config.image.env).map(([k, v]) => `${k}=${v}`), 'node', ...j.config.image.flags].join(' ')
    table.push('', `The kernel workload again as the image starts the agent (\`${flags}\`), a third run in each pair:`, '', '| figure | kubevol, as the image | kubelet ÷ image (range) | image ÷ Node\'s defaults (range) |', '| --- | ---: | ---: | ---: |')
    for (const row of j.rows.filter((x) => x.workload === 'kernel')) {
      const k = j.imageRows.find((x) => x.id === row.id && x.kubelet)
      const d = j.imageRows.find((x) => x.id === row.id && x.kubevol)
      table.push(`| ${row.what} | ${value(k['kubevol-image'].median, row.unit)} | ${range(k)} | ${range(d)} |`)
    }
  }
  // Where kubevol's peak goes: its fixed part and V8's heap spaces, each kubevol run's own figures.
  if (j.parts?.length) {
    const columns = Object.keys(j.parts[0].values)
    const title = { 'latency kubevol': "latency, Node's defaults", 'kernel kubevol': "kernel, Node's defaults", 'kernel kubevol-image': 'kernel, as the image' }
    const cell = (v) => (typeof v === 'number' ? value(v, 'MiB') : '–')
    table.push('', "Where kubevol's peak goes (medians over the pairs):", '', `| | ${columns.map((c) => title[c] ?? c).join(' | ')} |`, `| --- |${columns.map(() => ' ---: |').join('')}`)
    for (const part of j.parts) table.push(`| ${part.what} | ${columns.map((c) => cell(part.values[c])).join(' | ')} |`)
  }
  // A workload run again alone keeps the other's recorded pairs: each has its own date and load.
  const when = j.runs
    ? Object.entries(j.runs).map(([w, x]) => `the ${w} workload ${x.date} (${x.pairs} pairs), load average ${x.loadBefore} before and ${x.loadAfter} after`)
    : [`load average ${j.loadBefore} before and ${j.loadAfter} after`]
  return { svg, table, machine: `${machineOf(r)}; ${when.join('; ')} (1, 5 and 15 minutes, on 2 cores shared with other work)` }
}

/** Each chart: its file, the results it reads, how it was measured, and its drawing. */
const CHARTS = [
  {
    id: 'kubelet',
    heading: 'Side by side with the kubelet v1.32 VolumeManager',
    bench: 'kubelet',
    draw: kubelet,
    method:
      "\"kubelet v1.32\" is the kubelet's own VolumeManager (`pkg/kubelet/volumemanager` of v1.32.13, unchanged) with its real emptyDir and hostPath plugins and the mount-utils mounter, which runs mount(8) and umount(8) as the kubelet does, built into a small driver that feeds it pods the way the kubelet's own `volume_manager_test.go` does (`kubelet-volumemanager-bench` in the envtest assets). \"kubevol\" is the whole manager on the Linux host, started with Node's defaults, as an embedder runs it. Both run the same two workloads on the same machine: a node of 1,000 pods with 10 emptyDir each, filled from empty, left idle for 60 s, then 200 pods of 10 emptyDir added and removed one at a time (after 20 not counted); and 200 pods of 5 emptyDir (Memory, a tmpfs each) and 5 hostPath added at once and removed at once, two rounds counted after one that is not. Each run is a fresh process in a private mount namespace (`unshare -m --propagation private`) on a fresh loop-backed ext4; the kubelet's runs and kubevol's alternate, the side going first changing each pair. Each figure is a side's median over its runs; the ratio is of the medians, and its range is the lowest and highest of the pairs' own ratios. The kubelet waits by polling (its reconciler every 100 ms, `WaitForAttachAndMount` every 300 ms), so its start-up and unmount times are 300 ms or more whatever the work (more when the machine is loaded); kubevol reacts to each change. `pollingCompat` (the chart below) is something else: kubevol's own code on the kubelet's schedule, not the kubelet. Peak RSS is each process's own high-water mark (getrusage's maxrss); the kubelet's kernel-workload CPU includes the mount(8) and umount(8) processes it starts.",
  },
  {
    id: 'pod-startup',
    heading: 'Pod to mounted',
    bench: 'pod-startup',
    draw: podStartup,
    method:
      'A pod with ten volumes is added to a node that already runs a thousand such pods (in-memory host, no injected latency, real clock); the time is from the pod added to `waitForAttachAndMount` resolving. "per-pod" is ten fake scratch volumes, "mixed" the built-in plugins with disks. The kubelet\'s timing is kubevol with `pollingCompat: true`: a populator tick and reconciler passes every 100 ms and the 300 ms wait poll, as the kubelet runs them. Percentiles are nearest-rank; each polling sample starts at a random (seeded) phase.',
  },
  {
    id: 'idle-cpu',
    heading: 'Idle CPU against volume count',
    bench: 'node-scale',
    draw: idleCpu,
    method:
      'The node is filled, then left alone for a minute and more while the process\'s CPU time is measured. The built-in mix has 4,000 configMap, secret, downwardAPI and projected volumes among its 10,000: with an object reader that announces changes they are set up again only when something changes; with one that does not, each is set up again every minute, as in the kubelet. The recorded run measured one volume count, so the chart has one group; a run at other counts adds its rows here.',
  },
  {
    id: 'converge',
    heading: 'Converging 100,000 volumes',
    bench: 'node-scale',
    draw: converge,
    method:
      'Ten thousand pods with ten volumes each are added at once to an empty node on the in-memory host, and the clock stops when every volume is mounted. The scratch mix is a fake plugin (one tmpfs per volume: what kubevol itself costs); the built-in mix runs the real plugins, whose file writes are part of the figure. Heap per volume is the heap after a full collection with the manager, minus the heap once it is stopped and dropped.',
  },
  {
    id: 'linux-host',
    heading: 'The Linux round trip',
    bench: 'linux-host',
    draw: linuxHost,
    method:
      'On the real kernel in a private mount namespace, on a fresh journaled ext4 of its own: 1,000 Memory emptyDirs and 1,000 hostPaths mounted and unmounted by the whole manager (journal synced, after one uncounted round while V8 compiles), against the same mounts as raw system calls and as the kubelet\'s own steps in a plain loop, each baseline the median of three runs interleaved with the manager\'s.',
  },
  {
    id: 'csi',
    heading: 'The CSI round trip',
    bench: 'csi',
    draw: csi,
    method:
      "A pod with one CSI volume is started and deleted 200 times in a row, the hostpath reference driver in its own process: NodeStage, NodePublish, NodeUnpublish and NodeUnstage with real bind mounts each time. The driver's part is the time in its gRPC calls (NodeGetCapabilities included); kubevol's part is everything else: populator, reconciler, journal, directories, `vol_data.json`, checks.",
  },
]

/**
 * The page and its charts. `benchDir` is the repository's bench/. Returns a map from a path relative
 * to apps/docs to the file's content.
 */
export async function measuredFiles(benchDir) {
  const files = new Map()
  const sections = []
  const machines = new Set()
  for (const chart of CHARTS) {
    const result = load(benchDir, chart.bench)
    const { svg, table, machine } = await chart.draw(result)
    machines.add(machine)
    files.set(`pages/public/charts/${chart.id}.svg`, svg)
    sections.push(
      [
        `## ${chart.heading}`,
        '',
        `![${chart.heading}: the figures are in the table below.](/charts/${chart.id}.svg){.kv-diagram data-chart="${chart.id}"}`,
        '',
        ...table,
        '',
        `**Method.** ${chart.method}`,
        '',
        `**Machine.** ${machine}. **From** [\`${result.file}\`](${REPO}/${result.file}), written by \`bench/${chart.bench === 'pod-startup' ? 'run' : chart.bench}.js\`.`,
      ].join('\n'),
    )
  }
  const page = [
    '<!-- Generated by scripts/generate-results-pages.mjs from bench/results/*.json: edit the script, not this page. -->',
    '',
    '# kubevol and the kubelet: measured',
    '',
    'The figures `npm run bench` recorded, drawn from its results files when the site is built. The first chart is',
    "kubevol against the kubelet itself: the kubelet v1.32 VolumeManager's own code, run beside kubevol on the same",
    'workloads. In the charts after it, "the kubelet\'s timing" is kubevol with `pollingCompat: true`, which restores the',
    "kubelet's 100 ms passes and 300 ms wait poll: kubevol's code on the kubelet's schedule, not the kubelet. What kubevol does differently, and why, is in",
    '[kubevol and the kubelet](./kubelet-fidelity.md); how the figures are taken and where the time went is in',
    `[bench/README.md](${REPO}/bench/README.md).`,
    '',
    'The machine is a shared virtual machine whose speed drifts by up to a third within an hour, so figures from',
    'different benchmarks were not taken at the same moment; ratios measured side by side in one run move much less.',
    '',
    ...sections.flatMap((s) => [s, '']),
  ].join('\n')
  files.set('pages/concepts/measured.md', page)
  return files
}
