/**
 * A call that really blocks. A FIFO opened for reading blocks in open(2) until a writer appears:
 * a real thread stuck in the kernel, as on a hung NFS server, without needing one. The FIFO sits on
 * its own tmpfs so the quarantine (per filesystem) can be seen. Every test unblocks its FIFOs at the
 * end: a process with a thread stuck in the kernel cannot exit (libuv joins its threads at exit).
 */
import { closeSync, constants, openSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { expectHostError } from '@kubevol/core/testing/host-contract'
import { afterEach, expect, it, vi } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'
import type { LinuxHost } from './linux-host.js'

const fifos: string[] = []

/** Readers opened to release writers blocked in open(2); closed once the writers are done. */
const readers: number[] = []

/** Opens a writer on each FIFO so that the readers blocked in open(2) return, and a reader for the writers. */
function unblock(): void {
  for (const fifo of fifos.splice(0)) {
    try {
      closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK))
    } catch {}
    try {
      readers.push(openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK))
    } catch {}
  }
}

async function fifoOnItsOwnFilesystem(host: LinuxHost, dir: string): Promise<string> {
  await host.mkdir(dir)
  await host.mount({ source: 'tmpfs', target: dir, fstype: 'tmpfs' })
  const fifo = `${dir}/fifo`
  execFileSync('mkfifo', [fifo])
  fifos.push(fifo)
  return fifo
}

describeAsRoot('a call that blocks in the kernel', () => {
  const h = useLinuxHost({ callTimeoutMs: 1500 })
  afterEach(async () => {
    unblock()
    // Let the stalled threads come back before the harness unmounts.
    await vi.waitFor(() => expect(h().host.stalledCalls()).toEqual([]), { timeout: 5000 })
    for (const fd of readers.splice(0)) closeSync(fd)
  })

  it('a call blocked on the I/O worker holds none of the calls asked for with it; it times out and its filesystem is quarantined', async () => {
    const { host, p } = h()
    const fifo = await fifoOnItsOwnFilesystem(host, p('hung'))
    // A small write goes to the I/O worker; open(2) for writing blocks until the FIFO has a reader.
    let settled = false
    const hung = host.writeFile(fifo, 'x').finally(() => {
      settled = true
    })
    const started = Date.now()
    // Asked for in the same turn: the same batch, behind the blocked call.
    const [, root, missing] = await Promise.all([host.mkdir(p('other')), host.lstat(p()), host.stat(p('nothing'))])
    expect(root?.type).toBe('directory')
    expect(missing).toBeNull()
    expect(Date.now() - started).toBeLessThan(1000)
    await host.mount({ source: 'tmpfs', target: p('other'), fstype: 'tmpfs' })
    expect(await host.isMountPoint(p('other'))).toBe(true)
    await host.unmount(p('other'))
    expect(settled).toBe(false)

    const error = await expectHostError(hung, 'ETIMEDOUT')
    expect(error.message).toBe(`ETIMEDOUT: write ${fifo}: no answer within 1500 ms; the call is left to finish in the background`)
    await vi.waitFor(() => expect(host.stalledCalls()).toMatchObject([{ syscall: 'write', path: fifo, key: p('hung') }]))
    const before = Date.now()
    await expectHostError(host.lstat(`${p('hung')}/other`), 'ETIMEDOUT')
    expect(Date.now() - before).toBeLessThan(500)
    expect(await host.readdir(p())).toEqual(['hung', 'other'])
  })

  it('times out with ETIMEDOUT while other calls, mounts included, complete meanwhile', async () => {
    const { host, p } = h()
    const fifo = await fifoOnItsOwnFilesystem(host, p('hung'))
    let settled = false
    const hung = host.readFile(fifo).finally(() => {
      settled = true
    })
    const started = Date.now()

    // The read blocks the I/O worker; what follows goes to another worker (and to libuv's pool).
    await host.mkdir(p('other'))
    await host.mount({ source: 'tmpfs', target: p('other'), fstype: 'tmpfs' })
    await host.writeFile(p('other', 'f'), 'still working')
    expect(new TextDecoder().decode(await host.readFile(p('other', 'f')))).toBe('still working')
    expect((await host.stat(p('other')))?.type).toBe('directory')
    expect(await host.isMountPoint(p('other'))).toBe(true)
    expect((await host.statfs(p('other'))).capacityBytes).toBeGreaterThan(0)
    await host.unmount(p('other'))
    expect(settled).toBe(false)

    const error = await expectHostError(hung, 'ETIMEDOUT')
    expect(error.message).toBe(`ETIMEDOUT: read ${fifo}: no answer within 1500 ms; the call is left to finish in the background`)
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400)
    expect(host.stalledCalls()).toMatchObject([{ syscall: 'read', path: fifo }])
  })

  it('quarantines the hung filesystem (fail fast, no new thread) and nothing else; lifts when the call returns', async () => {
    const { host, p } = h()
    const fifo = await fifoOnItsOwnFilesystem(host, p('hung'))
    await expectHostError(host.readFile(fifo), 'ETIMEDOUT')
    await vi.waitFor(() => expect(host.stalledCalls()[0]?.key).toBe(p('hung')))

    const before = Date.now()
    const refused = await expectHostError(host.readdir(p('hung')), 'ETIMEDOUT')
    expect(Date.now() - before).toBeLessThan(500)
    expect(refused.message).toContain(`the filesystem at ${p('hung')} is not answering: read ${fifo} has been blocked for`)
    await host.writeFile(p('elsewhere'), 'fine')
    expect(await host.readdir(p())).toEqual(['elsewhere', 'hung'])
    // The mount table answers for the hung mount point without touching it (a stat there would fail fast).
    expect(await host.isMountPoint(p('hung'))).toBe(true)
    expect((await host.mounts()).some((e) => e.target === p('hung'))).toBe(true)

    unblock()
    await vi.waitFor(() => expect(host.stalledCalls()).toEqual([]))
    expect(await host.readdir(p('hung'))).toEqual(['fifo'])
  })

  it('with the pool nearly used up by stalled calls, refuses new calls instead of queueing them forever', async () => {
    const { host, p } = h()
    // Three of libuv's four threads blocked for good (syncFile opens with node:fs, on the pool, and
    // open(2) for reading waits for a writer); one stays free for everything else.
    const stuck = [await fifoOnItsOwnFilesystem(host, p('a')), await fifoOnItsOwnFilesystem(host, p('b')), await fifoOnItsOwnFilesystem(host, p('c'))]
    await Promise.all(stuck.map((fifo) => expectHostError(host.syncFile(fifo), 'ETIMEDOUT')))
    expect(host.stalledCalls().map((call) => call.path)).toEqual(stuck)
    await vi.waitFor(() => expect(host.stalledCalls().map((call) => call.key)).toEqual([p('a'), p('b'), p('c')]))
    const refused = await expectHostError(host.stat(p()), 'ETIMEDOUT')
    expect(refused.message).toContain('3 calls are blocked in the kernel')
    // The fourth thread still serves the rest of the process.
    expect(await readFile('/proc/self/status', 'utf8')).toContain('Threads:')
    unblock()
    await vi.waitFor(() => expect(host.stalledCalls()).toEqual([]))
    expect((await host.stat(p()))?.type).toBe('directory')
  })
})
