#!/usr/bin/env node
// Measures what the README's "Why koffi" section quotes. Run as root, in a private mount namespace:
//   unshare -m --propagation private node packages/adapter-linux/scripts/measure-ffi.mjs [path/to/ffi-napi]
// Prints one line per measurement: microseconds per call (median of 5 rounds).
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { statfs as statfsAsync } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'

const require = createRequire(import.meta.url)
const koffi = require('koffi')
const lib = koffi.load('libc.so.6')
const getpid = lib.func('int getpid()')
const Statfs = koffi.struct({
  f_type: 'long', f_bsize: 'long', f_blocks: 'unsigned long', f_bfree: 'unsigned long', f_bavail: 'unsigned long',
  f_files: 'unsigned long', f_ffree: 'unsigned long', f_fsid: koffi.array('int', 2), f_namelen: 'long', f_frsize: 'long',
  f_flags: 'long', f_spare: koffi.array('long', 4),
})
const statfs = lib.func('statfs', 'int', ['const char *', koffi.out(koffi.pointer(Statfs))])
const mount = lib.func('int mount(const char *, const char *, const char *, unsigned long, const char *)')
const umount2 = lib.func('int umount2(const char *, int)')
const call = (fn, ...args) => new Promise((resolve, reject) => fn.async(...args, (err, res) => (err ? reject(err) : resolve(res))))

const median = (values) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]
const report = (name, us) => {
  console.log(`${name.padEnd(52)} ${us < 10 ? us.toFixed(3) : us.toFixed(1)} µs/call`)
  return us
}
async function measure(name, n, body) {
  const rounds = []
  for (let round = 0; round < 5; round++) {
    const start = performance.now()
    for (let i = 0; i < n; i++) await body(i)
    rounds.push(((performance.now() - start) * 1000) / n)
  }
  return report(name, median(rounds))
}
function measureSync(name, n, body) {
  const rounds = []
  for (let round = 0; round < 5; round++) {
    const start = performance.now()
    for (let i = 0; i < n; i++) body(i)
    rounds.push(((performance.now() - start) * 1000) / n)
  }
  return report(name, median(rounds))
}

const root = mkdtempSync(join(tmpdir(), 'kubevol-measure-'))
const target = join(root, 'm')
mkdirSync(target)
try {
  const out = {}
  out.getpidSync = measureSync('getpid, koffi sync', 1_000_000, () => getpid())
  out.getpidAsync = await measure('getpid, koffi async (awaited one by one)', 20_000, () => call(getpid))
  const buf = {}
  out.statfsSync = measureSync('statfs, koffi sync', 200_000, () => statfs('/', buf))
  out.statfsAsync = await measure('statfs, koffi async', 20_000, () => call(statfs, '/', buf))
  out.statfsNode = await measure('statfs, node:fs/promises (libuv pool, for scale)', 20_000, () => statfsAsync('/'))
  out.mountSync = await measure('tmpfs mount + umount pair, koffi sync', 2_000, () => {
    if (mount('tmpfs', target, 'tmpfs', 0, null) !== 0 || umount2(target, 0) !== 0) throw new Error(`errno ${koffi.errno()}`)
  })
  out.mountAsync = await measure('tmpfs mount + umount pair, koffi async', 2_000, async () => {
    if ((await call(mount, 'tmpfs', target, 'tmpfs', 0, null)) !== 0 || (await call(umount2, target, 0)) !== 0) throw new Error(`errno ${koffi.errno()}`)
  })
  try {
    const { createLinuxHost } = await import('../dist/index.js')
    const host = createLinuxHost()
    out.mountHost = await measure('tmpfs mount + unmount pair, LinuxHost (dist)', 2_000, async () => {
      await host.mount({ source: 'tmpfs', target, fstype: 'tmpfs' })
      await host.unmount(target)
    })
    host.close()
  } catch (err) {
    console.log(`LinuxHost: not measured (${err.message}; run npm run build first)`)
  }
  out.mountSpawn = await measure('tmpfs mount + umount pair, spawning mount(8)', 100, () => {
    execFileSync('mount', ['-t', 'tmpfs', 'tmpfs', target])
    execFileSync('umount', [target])
  })
  out.spawnTrue = await measure('spawning /bin/true (any process, for scale)', 100, () => spawnSync('/bin/true'))

  const ffiPath = process.argv[2]
  if (ffiPath) {
    const ffi = require(join(ffiPath, 'ffi-napi'))
    const ref = require(join(ffiPath, 'ref-napi'))
    const libc = ffi.Library('libc.so.6', {
      getpid: ['int', []],
      mount: ['int', ['string', 'string', 'string', 'ulong', 'string']],
      umount2: ['int', ['string', 'int']],
      statfs: ['int', ['string', ref.refType(ref.types.void)]],
    })
    const sbuf = Buffer.alloc(120)
    out.ffiGetpid = measureSync('getpid, ffi-napi sync', 200_000, () => libc.getpid())
    out.ffiStatfs = measureSync('statfs, ffi-napi sync', 100_000, () => libc.statfs('/', sbuf))
    out.ffiGetpidAsync = await measure('getpid, ffi-napi async', 20_000, () => new Promise((r, j) => libc.getpid.async((e, v) => (e ? j(e) : r(v)))))
    out.ffiMountSync = await measure('tmpfs mount + umount pair, ffi-napi sync', 2_000, () => {
      if (libc.mount('tmpfs', target, 'tmpfs', 0, null) !== 0 || libc.umount2(target, 0) !== 0) throw new Error('ffi-napi mount failed')
    })
  }
  console.log(JSON.stringify(out))
} finally {
  try {
    execFileSync('umount', ['-l', target], { stdio: 'ignore' })
  } catch {}
  rmSync(root, { recursive: true, force: true })
}
