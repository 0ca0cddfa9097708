// Draws the concept pages' diagrams as static SVG files in pages/public/diagrams/ (committed).
// Run `node scripts/diagrams.mjs` after changing a diagram here. Boxes and arrows only, no fonts or
// scripts from elsewhere: they render the same everywhere.
import { mkdirSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const OUT = fileURLToPath(new URL('../pages/public/diagrams/', import.meta.url))
const TONES = {
  source: ['#e8f1fb', '#3b7dd8'],
  state: ['#eaf7ee', '#2f8f4e'],
  logic: ['#fff6e0', '#c08a00'],
  host: ['#f3ecfb', '#7b4bc4'],
  warn: ['#fdecec', '#c0392b'],
  plain: ['#f5f5f5', '#777777'],
}
const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

function box({ x, y, w, h, label, tone = 'plain', small }) {
  const [fill, stroke] = TONES[tone]
  const lines = label.split('\n')
  const size = small ? 12 : 14
  const first = y + h / 2 - ((lines.length - 1) * (size + 3)) / 2 + size / 3
  const text = lines
    .map((line, i) => `<text x="${x + w / 2}" y="${first + i * (size + 3)}" font-size="${i === 0 && !small ? size : size - 2}" font-weight="${i === 0 && !small ? 600 : 400}" text-anchor="middle">${esc(line)}</text>`)
    .join('')
  return `<rect x="${x}" y="${y}" width="${w}" height="${h}" rx="8" fill="${fill}" stroke="${stroke}" stroke-width="1.5"/>${text}`
}

function arrow({ points, label, dashed, at = 0.5, dx = 0, dy = -6, color = '#555' }) {
  const d = points.map(([x, y], i) => `${i === 0 ? 'M' : 'L'}${x},${y}`).join(' ')
  let out = `<path d="${d}" fill="none" stroke="${color}" stroke-width="1.6" marker-end="url(#head)"${dashed ? ' stroke-dasharray="5 4"' : ''}/>`
  if (label) {
    const i = Math.min(points.length - 2, Math.floor(at * (points.length - 1)))
    const [[x1, y1], [x2, y2]] = [points[i], points[i + 1]]
    const f = at * (points.length - 1) - i
    const lx = x1 + (x2 - x1) * (points.length === 2 ? at : f || 0.5) + dx
    const ly = y1 + (y2 - y1) * (points.length === 2 ? at : f || 0.5) + dy
    out += label
      .split('\n')
      .map((line, k) => `<text x="${lx}" y="${ly + k * 14}" font-size="12" text-anchor="middle" fill="#333">${esc(line)}</text>`)
      .join('')
  }
  return out
}

function note({ x, y, text, anchor = 'start', size = 12, color = '#444' }) {
  return text
    .split('\n')
    .map((line, k) => `<text x="${x}" y="${y + k * (size + 3)}" font-size="${size}" text-anchor="${anchor}" fill="${color}">${esc(line)}</text>`)
    .join('')
}

function svg(name, title, width, height, parts) {
  const body = parts.join('\n')
  const doc = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${esc(title)}" font-family="system-ui, -apple-system, 'Segoe UI', sans-serif">
<title>${esc(title)}</title>
<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>
<rect width="${width}" height="${height}" fill="#ffffff"/>
${body}
</svg>
`
  writeFileSync(`${OUT}${name}.svg`, doc)
}

mkdirSync(OUT, { recursive: true })

svg('desired-actual', 'Desired state, actual state and the loop between them', 860, 340, [
  box({ x: 20, y: 30, w: 150, h: 56, label: 'PodSource\nAPI or manifest files', tone: 'source' }),
  box({ x: 230, y: 30, w: 150, h: 56, label: 'Populator\nPVC → PV, plugin', tone: 'logic' }),
  box({ x: 440, y: 30, w: 170, h: 56, label: 'Desired state\n(pod, volume) wanted', tone: 'state' }),
  box({ x: 440, y: 250, w: 170, h: 56, label: 'Actual state\nattached, mounted, uncertain', tone: 'state' }),
  box({ x: 670, y: 140, w: 170, h: 56, label: 'Reconciler\none ordered pass', tone: 'logic' }),
  box({ x: 230, y: 140, w: 170, h: 56, label: 'Operation executor\none op per key, backoff', tone: 'logic' }),
  box({ x: 20, y: 140, w: 150, h: 56, label: 'Plugins → Host\nmount, attach, …', tone: 'host' }),
  arrow({ points: [[170, 58], [230, 58]], label: 'pods' }),
  arrow({ points: [[380, 58], [440, 58]], label: 'fills' }),
  arrow({ points: [[610, 58], [755, 58], [755, 140]], label: 'changed', at: 0.3 }),
  arrow({ points: [[610, 278], [755, 278], [755, 196]], label: 'changed', at: 0.3, dy: 16 }),
  arrow({ points: [[670, 168], [400, 168]], label: 'start operation (never waits)' }),
  arrow({ points: [[230, 168], [170, 168]], label: 'steps', dy: -8 }),
  arrow({ points: [[315, 196], [315, 278], [440, 278]], label: 'marks outcome', at: 0.8, dy: -8 }),
  note({ x: 20, y: 240, text: 'A change to either state schedules\na pass in the same turn of the\nevent loop; a slow resync catches\nwhat no event announced.' }),
])

svg('reconcile-pass', 'The three phases of one reconcile pass', 860, 300, [
  box({ x: 20, y: 70, w: 240, h: 110, label: '1. Unmount\nvolumes no pod wants any more\n(pod deleted or volume removed)', tone: 'warn' }),
  box({ x: 310, y: 70, w: 240, h: 110, label: '2. Attach and mount\nattach / verify attached,\nmount device, set up in pod,\nexpand, remount', tone: 'state' }),
  box({ x: 600, y: 70, w: 240, h: 110, label: '3. Unmount devices, detach\nvolumes no pod holds:\nglobal mount, then detach', tone: 'host' }),
  arrow({ points: [[260, 125], [310, 125]] }),
  arrow({ points: [[550, 125], [600, 125]] }),
  note({ x: 140, y: 40, text: 'gate: every pod source read once\n(and reconstruction complete)', anchor: 'middle' }),
  note({ x: 430, y: 50, text: 'no gate: mounting is always safe', anchor: 'middle' }),
  note({ x: 720, y: 40, text: 'gate: sources read once and no\npod still mounts the volume', anchor: 'middle' }),
  note({
    x: 20,
    y: 220,
    text: 'Why this order: a volume moving from one pod to another is released before it is mounted again;\nnew pods never wait for tear-downs they do not depend on; and a device is unmounted and detached only\nafter the last pod mount of it is gone. Each phase only starts operations: the pass never waits for one.',
  }),
])

svg('operation-executor', 'Operation keys and the backoff after failures', 860, 330, [
  box({ x: 20, y: 30, w: 250, h: 70, label: 'Key = volume\nshared device (attachable or\ndevice-mountable): one op at a time', tone: 'logic', small: false }),
  box({ x: 20, y: 120, w: 250, h: 70, label: 'Key = volume + pod\nno shared device (emptyDir,\nconfigMap, …): pods in parallel', tone: 'logic' }),
  note({ x: 20, y: 230, text: 'Starting an op whose key is running:\n→ already-pending (a value, not an error)\nStarting during its backoff:\n→ backing-off until retryAt' }),
  note({ x: 320, y: 40, text: 'after consecutive failures of one key (kubelet exponential backoff)', size: 13 }),
  `<line x1="320" y1="160" x2="840" y2="160" stroke="#999" stroke-width="1"/>`,
  ...[
    [320, '✗'],
    [370, '✗'],
    [440, '✗'],
    [560, '✗'],
    [790, '✓'],
  ].map(([x, mark]) => `<circle cx="${x}" cy="160" r="11" fill="${mark === '✓' ? '#eaf7ee' : '#fdecec'}" stroke="${mark === '✓' ? '#2f8f4e' : '#c0392b'}"/><text x="${x}" y="165" font-size="13" text-anchor="middle">${mark}</text>`),
  arrow({ points: [[331, 140], [359, 140]], label: '0.5 s' }),
  arrow({ points: [[381, 140], [429, 140]], label: '1 s' }),
  arrow({ points: [[451, 140], [549, 140]], label: '2 s' }),
  arrow({ points: [[571, 140], [779, 140]], label: '4 s … doubling, at most 2 min 2 s' }),
  note({ x: 320, y: 210, text: 'A success forgets the record: the next failure waits 0.5 s again.\nWhen a backoff ends, a timer marks the volume dirty and schedules a pass:\nthe retry is a normal pass deciding again, not a blind re-run.' }),
])

svg('uncertain-states', 'Mount states of a volume in a pod', 860, 300, [
  box({ x: 30, y: 110, w: 160, h: 56, label: 'not mounted', tone: 'plain' }),
  box({ x: 350, y: 20, w: 160, h: 56, label: 'mounted', tone: 'state' }),
  box({ x: 350, y: 200, w: 160, h: 56, label: 'uncertain\nmay be mounted', tone: 'warn' }),
  box({ x: 670, y: 110, w: 160, h: 56, label: 'tear down\n(unmount)', tone: 'host' }),
  arrow({ points: [[190, 125], [350, 55]], label: 'set-up succeeded', dx: -20 }),
  arrow({ points: [[190, 152], [350, 222]], label: 'timeout, crash,\nuncertain error', dx: -30, dy: 2 }),
  arrow({ points: [[430, 200], [430, 76]], label: 'set up again\n(pod still wants it)', dx: 62, dy: 0 }),
  arrow({ points: [[510, 55], [670, 125]], label: 'no pod wants it' , dx: 20 }),
  arrow({ points: [[510, 222], [670, 152]], label: 'no pod wants it\n(still torn down)', dx: 30, dy: 6 }),
  arrow({ points: [[750, 166], [750, 290], [110, 290], [110, 166]], label: 'unmounted', at: 0.5, dy: -6 }),
  note({ x: 30, y: 40, text: 'a final error leaves it\nnot mounted (retry after backoff)' }),
])

svg('reconstruction', 'Reconstruction after a restart', 860, 320, [
  box({ x: 20, y: 20, w: 200, h: 56, label: 'Journal\nintents + outcomes, synced', tone: 'source' }),
  box({ x: 20, y: 100, w: 200, h: 56, label: 'Pods directory\npods/<uid>/volumes/…', tone: 'source' }),
  box({ x: 20, y: 180, w: 200, h: 56, label: 'Mount table\nwhat is mounted where', tone: 'source' }),
  box({ x: 320, y: 100, w: 210, h: 56, label: 'Reconstruct\nplugin rebuilds each spec', tone: 'logic' }),
  box({ x: 620, y: 30, w: 220, h: 56, label: 'Actual state\neverything found: uncertain', tone: 'warn' }),
  box({ x: 620, y: 170, w: 220, h: 70, label: 'First passes\nafter every source is read:\nremount wanted, tear down rest', tone: 'state' }),
  arrow({ points: [[220, 48], [320, 118]] }),
  arrow({ points: [[220, 128], [320, 128]] }),
  arrow({ points: [[220, 208], [320, 138]] }),
  arrow({ points: [[530, 118], [620, 62]], label: 'mark uncertain', dx: -10 }),
  arrow({ points: [[730, 86], [730, 170]], label: 'pods listed', dx: 44, dy: 4 }),
  arrow({ points: [[530, 140], [620, 200]], label: 'cannot rebuild:\ntear down by plugin', dx: -20, dy: 18, dashed: true }),
  note({ x: 20, y: 275, text: 'Nothing is deleted through a mount point; orphaned pod directories are removed only once nothing is mounted under them.' }),
])

svg('volume-plugins', 'A volume plugin and its optional capabilities', 860, 300, [
  box({ x: 20, y: 20, w: 240, h: 120, label: 'VolumePlugin (required)\nname, canSupport(spec)\ngetVolumeName(spec)\nnewMounter → setUp\nnewUnmounter → tearDown', tone: 'logic' }),
  box({ x: 310, y: 20, w: 170, h: 56, label: 'attach?\nattach, waitForAttach, detach', tone: 'state', small: false }),
  box({ x: 500, y: 20, w: 170, h: 56, label: 'deviceMount?\nglobal mount per node', tone: 'state' }),
  box({ x: 310, y: 100, w: 170, h: 56, label: 'block?\nmap raw devices', tone: 'state' }),
  box({ x: 500, y: 100, w: 170, h: 56, label: 'nodeExpand?\ngrow the file system', tone: 'state' }),
  box({ x: 685, y: 20, w: 165, h: 136, label: 'constructVolumeSpec?\nrebuild a spec from\ndisk after a restart', tone: 'state', small: true }),
  box({ x: 20, y: 200, w: 820, h: 60, label: 'Host port: files, mounts and the mount table, loop devices, file systems, statistics\n(the Linux host, or the in-memory host)', tone: 'host' }),
  arrow({ points: [[140, 140], [140, 200]] }),
  arrow({ points: [[480, 156], [480, 200]] }),
  note({ x: 310, y: 180, text: 'a capability exists exactly when the member is present: the manager checks presence, not a flag', size: 11 }),
])

svg('csi', 'How the CSI plugin drives a CSI node driver', 860, 320, [
  box({ x: 20, y: 30, w: 200, h: 56, label: 'attach (if required)\nwait for VolumeAttachment', tone: 'logic' }),
  box({ x: 20, y: 120, w: 200, h: 56, label: 'mount device\n(once per node)', tone: 'logic' }),
  box({ x: 20, y: 210, w: 200, h: 56, label: 'set up in pod\n(per pod)', tone: 'logic' }),
  box({ x: 330, y: 120, w: 220, h: 56, label: 'NodeStageVolume\n…/globalmount', tone: 'host' }),
  box({ x: 330, y: 210, w: 220, h: 56, label: 'NodePublishVolume\npods/<uid>/volumes/…/mount', tone: 'host' }),
  box({ x: 640, y: 120, w: 200, h: 56, label: 'NodeUnstageVolume\nafter the last unpublish', tone: 'host' }),
  box({ x: 640, y: 210, w: 200, h: 56, label: 'NodeUnpublishVolume\npod tear-down', tone: 'host' }),
  arrow({ points: [[120, 86], [120, 120]] }),
  arrow({ points: [[120, 176], [120, 210]] }),
  arrow({ points: [[220, 148], [330, 148]], label: 'if the driver\nstages', dy: -22 }),
  arrow({ points: [[220, 238], [330, 238]] }),
  arrow({ points: [[740, 210], [740, 176]], dashed: true }),
  note({ x: 330, y: 40, text: 'Every call has a 2-minute deadline. gRPC codes that mean "may have\nhappened" (DeadlineExceeded, Unavailable, …) leave the volume uncertain;\nthe others are final failures that back off.', size: 12 }),
])
svg('architecture', 'The packages of kubevol and the ports between them', 860, 420, [
  box({ x: 20, y: 20, w: 250, h: 64, label: '@kubevol/cli\nthe kubevol command: run, status,\nexplain, plan, gc, doctor', tone: 'source', small: false }),
  box({ x: 300, y: 20, w: 540, h: 64, label: '@kubevol/agent\nservices: pod source (manifests or API), node registration and status, events,\nCSI registration, pod workers, metrics, HTTP status; one start and stop shape', tone: 'source' }),
  box({ x: 20, y: 130, w: 820, h: 110, label: '@kubevol/core  (pure TypeScript: no node: import, runs in a browser)\nmanager: pass scheduler, pod waiters, stats, orphans · populator · desired and actual state · reconciler\noperation executor with backoff · reconstruction and journal · volume plugins (emptyDir, hostPath, configMap,\nsecret, downwardAPI, projected, local, fileDisk, CSI) · ports', tone: 'logic' }),
  box({ x: 20, y: 320, w: 400, h: 80, label: '@kubevol/adapter-linux\nmount(2), loop devices, statfs through FFI; the mount table;\nfilesystem tools; CSI drivers over gRPC; plugin registration', tone: 'host' }),
  box({ x: 440, y: 320, w: 400, h: 80, label: '@kubevol/adapter-mock\nan in-memory host that behaves like the kernel where it\nmatters, with fault injection and a strict mode', tone: 'host' }),
  arrow({ points: [[145, 84], [145, 130]], label: 'creates the agent', dx: 58, dy: 4 }),
  arrow({ points: [[570, 84], [570, 130]], label: 'createVolumeManager', dx: 70, dy: 4 }),
  arrow({ points: [[270, 52], [300, 52]] }),
  arrow({ points: [[220, 320], [220, 240]], label: 'implements Host, CsiDriver', dx: 90, dy: 24, dashed: true }),
  arrow({ points: [[640, 320], [640, 240]], label: 'implements Host', dx: 60, dy: 24, dashed: true }),
  note({ x: 430, y: 262, text: 'ports: Host · PodSource · ObjectReader · Clock · Logger · Recorder · Metrics · CsiDriver', anchor: 'middle', size: 12 }),
])

svg('pod-to-mount', 'From a pod to a mounted volume', 860, 320, [
  box({ x: 20, y: 20, w: 150, h: 60, label: '1 PodSource\nwatch or manifests', tone: 'source' }),
  box({ x: 200, y: 20, w: 150, h: 60, label: '2 Populator\nPVC → PV, plugin,\nunique name', tone: 'logic' }),
  box({ x: 380, y: 20, w: 150, h: 60, label: '3 Desired state\n(pod, volume) wanted', tone: 'state' }),
  box({ x: 560, y: 20, w: 150, h: 60, label: '4 Pass scheduler\nwhen passes run', tone: 'logic' }),
  box({ x: 560, y: 130, w: 150, h: 60, label: '5 Reconciler\nwhat is missing?', tone: 'logic' }),
  box({ x: 380, y: 130, w: 150, h: 60, label: '6 Executor\nattach → mount device\n→ set up (backoff)', tone: 'logic' }),
  box({ x: 200, y: 130, w: 150, h: 60, label: '7 Plugin → Host\nmount(2), loop, CSI', tone: 'host' }),
  box({ x: 20, y: 130, w: 150, h: 60, label: '8 Actual state\nmounted', tone: 'state' }),
  box({ x: 20, y: 240, w: 330, h: 60, label: '9 Pod waiters\nwaitForAttachAndMount resolves; the agent\nreports the pod mounted (status, events)', tone: 'source' }),
  arrow({ points: [[170, 50], [200, 50]] }),
  arrow({ points: [[350, 50], [380, 50]] }),
  arrow({ points: [[530, 50], [560, 50]] }),
  note({ x: 545, y: 102, text: 'a change: one pass\nper turn of the loop', anchor: 'middle', size: 11 }),
  arrow({ points: [[635, 80], [635, 130]] }),
  arrow({ points: [[560, 160], [530, 160]] }),
  arrow({ points: [[380, 160], [350, 160]] }),
  arrow({ points: [[200, 160], [170, 160]] }),
  arrow({ points: [[95, 190], [95, 240]], label: 'the pod changed', dx: 52, dy: 8 }),
  note({ x: 400, y: 250, text: 'Each step is one file or folder of @kubevol/core: populator/,\ncache/, manager/pass-scheduler.ts, reconciler/, operations/,\nplugins/, host/host.ts (the port), manager/pod-waiters.ts.\nA failure backs off and schedules the next pass itself.', size: 12 }),
])
console.log('diagrams written')
