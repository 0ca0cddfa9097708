/**
 * The live mount table: one parsed snapshot of /proc/self/mountinfo, read again only when the
 * kernel says the table changed.
 *
 * How the change is noticed: the kernel bumps a per-namespace event counter on every mount,
 * unmount and propagation change, and poll(2) on an open mountinfo file reports POLLPRI|POLLERR
 * when the counter moved since that file's last poll (fs/proc_namespace.c `mounts_poll`). kubevol
 * keeps one descriptor open and polls it with a zero timeout before answering from the snapshot:
 * a non-blocking call of about a microsecond on the main thread, no thread parked in poll, no timer.
 * fs.watch cannot do this (inotify does not fire for /proc), and a thread blocked in poll(2) would
 * hold one of the four libuv threads forever. The order (poll, then read) means a change that lands
 * during a read is seen by the next poll, so the snapshot is never older than the last answer.
 */
import { closeSync, openSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import * as c from './constants.js'
import { type Libc, PollFd } from './libc.js'
import type { LinuxMountEntry } from './mountinfo.js'
import { parseMountInfo } from './mountinfo.js'

/** Reads the table text; the host runs it with a deadline. */
export type MountInfoReader = () => Promise<string>

/** The snapshot and how it is kept fresh. */
/** mount-utils `maxListTries`. */
const MAX_LIST_TRIES = 10

export class MountTable {
  #targetsOf: readonly LinuxMountEntry[] | undefined
  #targets: ReadonlySet<string> = new Set()
  readonly #read: MountInfoReader
  readonly #ordered: boolean
  readonly #libc: () => Libc
  readonly #path: string
  #fd = -1
  #pollFd: PollFd | undefined
  #current: readonly LinuxMountEntry[] | undefined
  /** Bumped on every change seen (our own mounts, or the kernel's poll). */
  #generation = 0
  /** The generation the current snapshot's read began at: it holds every change before that. */
  #currentGeneration = -1
  #reading: Promise<void> | undefined
  #reads = 0

  /**
   * `ordered`: reads asked together are made one after another in the order asked (the Linux host's
   * I/O worker makes the calls of one turn so), and the consistent read asks its first two at once:
   * one trip to the worker instead of two in a row.
   */
  constructor(libcLoader: () => Libc, path = '/proc/self/mountinfo', read?: MountInfoReader, options?: { readonly ordered?: boolean }) {
    this.#libc = libcLoader
    this.#path = path
    this.#read = read ?? (() => readFile(path, 'utf8'))
    this.#ordered = options?.ordered ?? false
  }

  /** How many times the table was read (a measure of how well the snapshot is reused). */
  get reads(): number {
    return this.#reads
  }

  /** The last snapshot, without checking for changes (may be undefined before the first read). */
  peek(): readonly LinuxMountEntry[] | undefined {
    return this.#current
  }

  /** The mount targets of the current snapshot, indexed (built once per snapshot). */
  async targets(): Promise<ReadonlySet<string>> {
    return this.#index(await this.entries())
  }

  /** The targets of the last snapshot, without checking for changes. */
  peekTargets(): ReadonlySet<string> {
    return this.#index(this.#current ?? [])
  }

  /**
   * The targets of the last snapshot without waiting for a read, and whether the snapshot is
   * current: read, and no change since its read began (the poll is asked now). Undefined before
   * the first read.
   */
  lastTargets(): { readonly targets: ReadonlySet<string>; readonly current: boolean } | undefined {
    if (!this.#current) return undefined
    if (this.#changed()) this.#generation++
    return { targets: this.#index(this.#current), current: this.#currentGeneration === this.#generation }
  }

  #index(entries: readonly LinuxMountEntry[]): ReadonlySet<string> {
    if (this.#targetsOf !== entries) {
      this.#targetsOf = entries
      this.#targets = new Set(entries.map((e) => e.target))
    }
    return this.#targets
  }

  /** Marks the snapshot stale (after a mount or unmount of our own; the poll would say so too). */
  invalidate(): void {
    this.#generation++
  }

  /** The current table: the snapshot when the kernel reports no change, else a fresh read. */
  async entries(): Promise<readonly LinuxMountEntry[]> {
    // A burst of changes during reads could loop; three rounds always give a table no older than the call.
    for (let round = 0; round < 3; round++) {
      if (this.#changed()) this.#generation++
      // Fresh only when no change came after the read that made it began. A caller that arrives
      // while a read is in flight waits for it: the snapshot it would replace predates a change.
      if (this.#current && this.#currentGeneration === this.#generation) return this.#current
      if (!this.#reading) {
        this.#reading = this.#refresh(this.#generation).finally(() => {
          this.#reading = undefined
        })
      }
      await this.#reading
    }
    return this.#current ?? []
  }

  /** Closes the descriptor kept for polling. */
  close(): void {
    if (this.#fd >= 0) closeSync(this.#fd)
    this.#fd = -1
    this.#pollFd = undefined
  }

  async #refresh(generation: number): Promise<void> {
    // A read of mountinfo is not atomic: a mount or unmount between two chunks of it can hide an
    // entry. Read until two reads agree (mount-utils' consistent read, at most 10 tries). A failed
    // read leaves the snapshot's generation behind, so the next call reads again.
    // Best effort: when the host refuses more calls (stalled threads), the first read stands.
    const first = this.#read()
    const second = this.#ordered ? this.#read() : undefined
    second?.catch(() => undefined)
    let text = await first
    for (let tries = 1; tries < MAX_LIST_TRIES; tries++) {
      const again = await ((tries === 1 ? second : undefined) ?? this.#read()).catch(() => text)
      if (again === text) break
      text = again
    }
    this.#reads++
    this.#current = parseMountInfo(text)
    this.#currentGeneration = generation
  }

  // True when the kernel reports a change since the last poll (or when it cannot tell).
  #changed(): boolean {
    if (this.#fd < 0) {
      try {
        // Opened synchronously: opening a proc file does not block, and it happens once.
        this.#fd = openSync(this.#path, 'r')
      } catch {
        return true
      }
      // Everything before the open is in the read that follows; later changes show in the poll.
      return true
    }
    this.#pollFd ??= new PollFd(this.#fd, c.POLLPRI)
    this.#pollFd.clear()
    const { ret } = this.#libc().sync.poll(this.#pollFd.buffer, 1, 0)
    if (ret < 0) return true
    return ret > 0 && (this.#pollFd.revents & (c.POLLPRI | c.POLLERR)) !== 0
  }
}
