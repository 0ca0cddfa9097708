import { execFileSync } from 'node:child_process'
import { closeSync, constants, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { afterEach, beforeEach, expect, it, vi } from 'vitest'
import type { CallContext } from './call-runner.js'
import type { FileFields } from './io-workers.js'
import { IoWorkers } from './io-workers.js'

let dir: string
let io: IoWorkers
const readers: number[] = []

beforeEach(() => {
  dir = mkdtempSync(`${tmpdir()}/kubevol-io-`)
  io = new IoWorkers({ maxWorkers: 3, stallMs: 50 })
})

afterEach(() => {
  for (const fd of readers.splice(0)) closeSync(fd)
  io.close()
  rmSync(dir, { recursive: true, force: true })
})

it('answers each of many calls asked for in one turn; a failure carries the errno and the call', async () => {
  // More than one batch (256 calls) at once.
  await Promise.all(Array.from({ length: 300 }, (_, i) => io.run(['mkdir', `${dir}/d${i}`, 0o755])))
  const [found, missing, again, removed] = await Promise.all([
    io.run<FileFields>(['lstat', `${dir}/d299`]),
    io.run<FileFields | null>(['lstat', `${dir}/nothing`]),
    io.run(['mkdir', `${dir}/d7`, 0o755]).catch((err: unknown) => err),
    io.run(['remove', `${dir}/d8`]),
  ])
  expect(found[0] & 0o170000).toBe(0o040000)
  expect(missing).toBeNull()
  expect(again).toMatchObject({ code: 'EEXIST', syscall: 'mkdir' })
  expect(removed).toBeUndefined()
  expect(await io.run(['lstat', `${dir}/d8`])).toBeNull()
  await io.run(['append', `${dir}/log`, 'a\n', true])
  await io.run(['append', `${dir}/log`, 'b\n', false])
  expect(readFileSync(`${dir}/log`, 'utf8')).toBe('a\nb\n')
  expect(io.workers).toEqual({ started: 1, stalled: 0 })
})

it('a call blocked in the kernel holds none of the calls behind it, and none of them runs twice', async () => {
  const fifo = `${dir}/fifo`
  execFileSync('mkfifo', [fifo])
  // open(O_WRONLY) of a FIFO blocks until a reader opens it: a worker stuck in the kernel.
  let answered = false
  const blocked = io.run(['writeFile', fifo, 'x', 0o644]).finally(() => {
    answered = true
  })
  // Asked for in the same turn: the same batch, behind the blocked call.
  const behind = Array.from({ length: 50 }, (_, i) => io.run(['mkdir', `${dir}/b${i}`, 0o755]))
  // Each made exactly once: a second mkdir(2) of the same directory would fail with EEXIST.
  await expect(Promise.all(behind)).resolves.toHaveLength(50)
  expect(answered).toBe(false)
  // One worker is blocked. On a loaded machine a second may have been slow past the 50 ms and a
  // third started for its calls; once that one answered, only the FIFO's worker stays stalled.
  await vi.waitFor(() => expect(io.workers.stalled).toBe(1))
  expect(io.workers.started).toBeGreaterThanOrEqual(2)
  expect(io.workers.started).toBeLessThanOrEqual(3)
  // Later calls go to the worker that is not blocked.
  expect(await io.run(['lstat', `${dir}/b49`])).not.toBeNull()

  readers.push(openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK))
  await blocked
  // Nothing is blocked any more: back to one worker (once the rest of its batch is answered).
  await vi.waitFor(() => expect(io.workers).toEqual({ started: 1, stalled: 0 }))
})

it('a worker that is slow to start a batch (a large write being copied to it) is not taken for blocked', async () => {
  const data = new Uint8Array(64 * 2 ** 20)
  await io.run(['writeFile', `${dir}/big`, data, 0o644])
  await io.run(['writeFile', `${dir}/big`, data, 0o644])
  expect(io.workers.stalled).toBe(0)
})

it('close stops the idle worker; the next call starts another', async () => {
  await io.run(['mkdir', `${dir}/a`, 0o755])
  expect(io.workers.started).toBe(1)
  io.close()
  expect(io.workers.started).toBe(0)
  expect(await io.run<FileFields | null>(['lstat', `${dir}/a`])).not.toBeNull()
  expect(io.workers.started).toBe(1)
})

it('a worker that ends before making any call fails the calls it held, and does not start workers in a loop', async () => {
  // A heap too small to start in: node ends the worker with ERR_WORKER_OUT_OF_MEMORY.
  const starved = new IoWorkers({ maxWorkers: 3, stallMs: 50, resourceLimits: { maxOldGenerationSizeMb: 1, maxYoungGenerationSizeMb: 1 } })
  try {
    const results = await Promise.allSettled([starved.run(['mkdir', `${dir}/a`, 0o755]), starved.run(['lstat', dir])])
    for (const result of results) {
      expect(result.status).toBe('rejected')
      expect(String((result as PromiseRejectedResult).reason)).toMatch(/the I\/O worker ended before making a call: .*memory limit/)
    }
    expect(starved.workers).toEqual({ started: 0, stalled: 0 })
    // Nothing ran, and a later call is answered the same way, not retried for ever.
    await expect(io.run(['lstat', `${dir}/a`])).resolves.toBeNull()
    await expect(starved.run(['lstat', dir])).rejects.toThrow(/ended before making a call/)
    expect(starved.workers.started).toBe(0)
  } finally {
    starved.close()
  }
})

it('a call blocked in the kernel holds neither the answers finished before it nor other filesystems; its own filesystem waits in one lane', async () => {
  const fifo = `${dir}/fifo`
  execFileSync('mkfifo', [fifo])
  // One batch: calls that finish, then one that blocks (open(2) of a FIFO for writing), then more.
  const started = Date.now()
  const before = Array.from({ length: 20 }, (_, i) => io.run(['mkdir', `${dir}/a${i}`, 0o755], { key: '/' }))
  const hungCall: CallContext = { key: 'F' }
  const blocked = io.run(['writeFile', fifo, 'x', 0o644], hungCall)
  await Promise.all(before)
  // Not held until the blocked call returns: the worker sends them itself, or, if it blocked
  // first, the watchdog delivers them from its arena.
  expect(Date.now() - started).toBeLessThan(1000)
  // The watchdog names the blocked filesystem once the call has been running for half of
  // `stallMs`; the answers above may well have come before that.
  await vi.waitFor(() => expect(io.blockedKeys).toEqual(['F']), { timeout: 1000, interval: 5 })
  // Later calls on F wait in F's lane: they take no new worker each, and can be taken back unmade.
  const waiting = Array.from({ length: 5 }, (_, i) => {
    const call: CallContext = { key: 'F' }
    return { call, answer: io.run(['mkdir', `${dir}/f${i}`, 0o755], call).catch((err: Error) => err) }
  })
  await Promise.all(Array.from({ length: 5 }, (_, i) => io.run(['mkdir', `${dir}/b${i}`, 0o755], { key: '/' })))
  expect(io.workers).toEqual({ started: 2, stalled: 1 })
  expect(waiting[0]?.call.cancel?.()).toBe(true)
  expect(await waiting[0]?.answer).toBeInstanceOf(Error)
  expect(hungCall.cancel?.()).toBe(false)

  readers.push(openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK))
  await blocked
  // The lane flows again once the blocked call returned; the one taken back was never made.
  await Promise.all(waiting.slice(1).map((w) => w.answer))
  expect(await io.run(['lstat', `${dir}/f0`])).toBeNull()
  expect(await io.run(['lstat', `${dir}/f4`])).not.toBeNull()
  expect(io.blockedKeys).toEqual([])
})
