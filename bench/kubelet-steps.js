// The kubelet's own steps for emptyDir and hostPath volumes as plain loops on the Linux host: what
// the kubelet (and kubevol's plugins) do to the machine for each volume, with nothing around them
// (no populator, reconciler, operations, journal, or checks beyond the kubelet's). A manager's time
// against these loops is what it adds; the loops are the floor it is measured from. Used by
// linux-scale.js, and by linux-host.js (its raw loop and its kubelet-steps floor).
import { createRequire } from 'node:module'
import { chmodSync, lstatSync, mkdirSync, rmdirSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import { lstat, mkdir, rmdir, stat, chmod, unlink, writeFile } from 'node:fs/promises'

const require = createRequire(import.meta.url)

// 64 volumes at a time: of 4, 16 and 64 the fastest for the memory + hostPath loop on the 2-core
// machine (see linux-host.js), so the floor it sets is the lowest; koffi refuses many more async calls.
export const WIDTH = 64

const seconds = (t0) => (performance.now() - t0) / 1000
const missing = (p) => lstat(p).then(() => false, () => true)

/** mount(2) and umount2(2) through koffi, asynchronous (libuv's pool), as a plain loop makes them. */
export function koffiMounts() {
  const koffi = require('koffi')
  const libc = koffi.load('libc.so.6')
  const fn = {
    mount: libc.func('int mount(const char *source, const char *target, const char *fstype, unsigned long flags, const char *data)'),
    umount2: libc.func('int umount2(const char *target, int flags)'),
  }
  const call = (f, ...args) => new Promise((resolve, reject) => f.async(...args, (err, res) => (err ? reject(err) : resolve(res))))
  return {
    async mountTmpfs(dir) {
      if ((await call(fn.mount, 'tmpfs', dir, 'tmpfs', 0, 'size=1m')) !== 0) throw new Error(`mount ${dir}: errno ${koffi.errno()}`)
    },
    async umount(dir) {
      if ((await call(fn.umount2, dir, 0)) !== 0) throw new Error(`umount ${dir}: errno ${koffi.errno()}`)
    },
  }
}

/** `work` over `items`, `width` at a time. */
export async function pool(width, items, work) {
  let next = 0
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) {
        const i = next++
        await work(items[i], i)
      }
    }),
  )
}

// Per pod, once: its volume and plugin directories for `plugin` (the kubelet's makePodDataDirs and
// the plugin's MkdirAll of its parent), shared by the pod's volumes.
function podDirMaker(pods, plugin) {
  const made = new Map()
  return (uid) => {
    if (!made.has(uid)) {
      made.set(uid, Promise.all([mkdir(`${pods}/${uid}/volumes/${plugin}`, { recursive: true }), mkdir(`${pods}/${uid}/plugins/${plugin}`, { recursive: true })]))
    }
    return made.get(uid)
  }
}

const EMPTY_DIR = 'kubernetes.io~empty-dir'

// An emptyDir on disk set up as the kubelet does (SPEC §7.3), through node:fs's promises (libuv's pool).
async function setUpEmptyDirOnDisk(pods, uid, name) {
  const vol = `${pods}/${uid}/volumes/${EMPTY_DIR}/${name}`
  const meta = `${pods}/${uid}/plugins/${EMPTY_DIR}/${name}`
  await missing(`${meta}/ready`)
  await mkdir(vol, { mode: 0o777 })
  const info = await stat(vol)
  if ((info.mode & 0o777) !== 0o777) await chmod(vol, 0o777)
  await mkdir(meta, { mode: 0o750 })
  await writeFile(`${meta}/ready`, '')
}

// The same steps made synchronously on the calling thread, one after another: no hand-off at all.
function setUpEmptyDirOnDiskSync(pods, uid, name) {
  const vol = `${pods}/${uid}/volumes/${EMPTY_DIR}/${name}`
  const meta = `${pods}/${uid}/plugins/${EMPTY_DIR}/${name}`
  try {
    lstatSync(`${meta}/ready`)
  } catch {}
  mkdirSync(vol, { mode: 0o777 })
  if ((statSync(vol).mode & 0o777) !== 0o777) chmodSync(vol, 0o777)
  mkdirSync(meta, { mode: 0o750 })
  writeFileSync(`${meta}/ready`, '')
}

/**
 * Pod start-up at the floor: a node of `pods` × `perPod` disk emptyDirs under `dir`, then `samples`
 * (+ `warmup`) pods of `perPod` each set up, timed from the first step to the last (the pod's
 * directories included), and torn down untimed. The pods alternate between the kubelet's steps
 * through node:fs's promises, a pod's volumes all at once on libuv's pool (as the plain loops
 * above), and the same steps synchronously on one thread, the least any hand-off can cost.
 * Returns the sorted times of each, in ms.
 */
export async function emptyDirPodStartUpSteps(dir, { pods: podCount, perPod, samples, warmup }) {
  const pods = `${dir}/pods`
  const names = Array.from({ length: perPod }, (_, v) => `d${v}`)
  const podDirs = (uid) => [`${pods}/${uid}/volumes/${EMPTY_DIR}`, `${pods}/${uid}/plugins/${EMPTY_DIR}`]
  const node = []
  for (let p = 0; p < podCount; p++) for (const name of names) node.push({ uid: `uid-${p}`, name })
  const made = podDirMaker(pods, EMPTY_DIR)
  await pool(WIDTH, node, async ({ uid, name }) => {
    await made(uid)
    await setUpEmptyDirOnDisk(pods, uid, name)
  })
  const times = { libuv: [], sync: [] }
  for (let i = 0; i < 2 * (warmup + samples); i++) {
    const uid = `uid-${podCount + i}`
    const way = i % 2 === 0 ? 'libuv' : 'sync'
    const t0 = performance.now()
    if (way === 'libuv') {
      await Promise.all(podDirs(uid).map((d) => mkdir(d, { recursive: true })))
      await Promise.all(names.map((name) => setUpEmptyDirOnDisk(pods, uid, name)))
    } else {
      for (const d of podDirs(uid)) mkdirSync(d, { recursive: true })
      for (const name of names) setUpEmptyDirOnDiskSync(pods, uid, name)
    }
    const ms = performance.now() - t0
    if (i >= 2 * warmup) times[way].push(ms)
    for (const name of names) {
      unlinkSync(`${pods}/${uid}/plugins/${EMPTY_DIR}/${name}/ready`)
      rmdirSync(`${pods}/${uid}/plugins/${EMPTY_DIR}/${name}`)
      rmdirSync(`${pods}/${uid}/volumes/${EMPTY_DIR}/${name}`)
    }
  }
  return { libuv: times.libuv.sort((a, b) => a - b), sync: times.sync.sort((a, b) => a - b) }
}

/**
 * emptyDir on the node's disk, `pods` × `perPod` volumes under `dir`, converged then torn down, each
 * timed. Set-up (SPEC §7.3): is the ready marker there (lstat), make the directory 0777, stat it
 * (the umask took bits away), chmod 0777, make the marker's directory and write the marker.
 * Tear-down: the subPath directory checked, the marker and its directory removed, the mount-point
 * check (a stat), the directory removed.
 */
export async function emptyDirDiskSteps(dir, { pods: podCount, perPod }) {
  const pods = `${dir}/pods`
  const podDirs = podDirMaker(pods, EMPTY_DIR)
  const volumes = []
  for (let p = 0; p < podCount; p++) for (let v = 0; v < perPod; v++) volumes.push({ uid: `uid-${p}`, name: `d${v}` })
  const t0 = performance.now()
  await pool(WIDTH, volumes, async ({ uid, name }) => {
    await podDirs(uid)
    await setUpEmptyDirOnDisk(pods, uid, name)
  })
  const converge = seconds(t0)
  const t1 = performance.now()
  await pool(WIDTH, volumes, async ({ uid, name }) => {
    await missing(`${pods}/${uid}/volume-subpaths/${name}`)
    const vol = `${pods}/${uid}/volumes/${EMPTY_DIR}/${name}`
    const meta = `${pods}/${uid}/plugins/${EMPTY_DIR}/${name}`
    await unlink(`${meta}/ready`)
    await rmdir(meta)
    await lstat(vol)
    await rmdir(vol)
  })
  return { converge, teardown: seconds(t1) }
}

/**
 * emptyDir (Memory) + hostPath (type Directory), `pods` pods of half each under `dir`; hostPath `i`
 * is `hostDir(i)`. Mounted, then torn down, each timed. emptyDir (Memory): is the ready marker there,
 * make the directory, is it a mount point (stat), mount tmpfs, stat it (permissions), make the
 * marker's directory and write the marker; tear-down: the subPath directory checked, the marker and
 * its directory removed, unmount, the directory removed. hostPath: stat the path; tear-down: the
 * subPath directory checked.
 */
export async function memoryHostPathSteps(dir, { pods: podCount, perPod, hostDir }) {
  const { mountTmpfs, umount } = koffiMounts()
  const pods = `${dir}/pods`
  const podDirs = podDirMaker(pods, EMPTY_DIR)
  const volumes = []
  for (let p = 0; p < podCount; p++) for (let v = 0; v < perPod; v++) volumes.push({ uid: `uid-${p}`, v, i: p * perPod + v, memory: v < perPod / 2 })
  const t0 = performance.now()
  await pool(WIDTH, volumes, async ({ uid, v, i, memory }) => {
    await podDirs(uid)
    if (!memory) {
      await stat(hostDir(i))
      return
    }
    const vol = `${pods}/${uid}/volumes/${EMPTY_DIR}/m${v}`
    const meta = `${pods}/${uid}/plugins/${EMPTY_DIR}/m${v}`
    await missing(`${meta}/ready`)
    await mkdir(vol)
    await stat(vol)
    await mountTmpfs(vol)
    await stat(vol)
    await mkdir(meta)
    await writeFile(`${meta}/ready`, '')
  })
  const mounted = seconds(t0)
  const t1 = performance.now()
  await pool(WIDTH, volumes, async ({ uid, v, memory }) => {
    const name = memory ? `m${v}` : `h${v - perPod / 2}`
    await missing(`${pods}/${uid}/volume-subpaths/${name}`)
    if (!memory) return
    const vol = `${pods}/${uid}/volumes/${EMPTY_DIR}/${name}`
    const meta = `${pods}/${uid}/plugins/${EMPTY_DIR}/${name}`
    await unlink(`${meta}/ready`)
    await rmdir(meta)
    await umount(vol)
    await rmdir(vol)
  })
  return { mounted, unmounted: seconds(t1) }
}
