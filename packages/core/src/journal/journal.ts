/**
 * kubevol's durable journal: what the manager set out to do to the machine and how far it got,
 * appended and synced through the Host before each step that changes the machine, so a restart
 * knows about every attach, device mount and pod set-up that may exist, including the ones the disk
 * layout cannot show (a loop device attached before the crash, a device mounted but not yet bound).
 *
 * Format: one record per line, `<crc32 hex> <json>\n`. A torn or corrupt record (a crash mid-append)
 * fails its checksum and is dropped with everything after it. The journal is compacted (its live
 * records rewritten to a new file, synced, renamed over the old one) when it grows well past them.
 *
 * Where the host can write into a file at an offset (`writeFileAt`), the file is made with room
 * after its records, zeros, and records are written into that room: a synced write then changes
 * neither the file's size nor its extents, so its fdatasync waits for the data alone and not for
 * the filesystem's own journal (on ext4, about 0.2 ms instead of 0.6-0.7). The records end at the
 * first zero byte. When the room runs out, more zeros are written after it (the file doubles);
 * a compaction makes a file with room again.
 *
 * Records that need not be durable (notes of things gone, unsynced intents) do not start a write of
 * their own at once when a clock is given: they wait up to `noteDelayMs` for an intent, and share its
 * write. A CSI round trip's last note (the device unmounted) used to hold the I/O worker when the
 * next pod's intents came, so they waited for it and then made a trip of their own.
 */
import type { UniquePodName, UniqueVolumeName } from '../api/names.js'
import type { VolumeSpec } from '../api/volume-spec.js'
import type { SmallMap } from '../cache/small-map.js'
import type { Clock, Timer } from '../clock.js'
import { isHostError } from '../errors.js'
import type { Host } from '../host/host.js'
import type { Logger } from '../observability.js'
import { dirname } from '../paths.js'
import { decodeUtf8, encodeUtf8 } from '../text.js'
import { crc32Utf8 } from './crc32-utf8.js'
import { JournalState } from './journal-state.js'

/** One record. Intents (`attach`, `device`, `setup`) are written before the step; the rest after it. */
export type JournalRecord =
  /** The volume is attached (kubevol attaches): the device path. */
  | { readonly kind: 'attached'; readonly volume: UniqueVolumeName; readonly spec: VolumeSpec; readonly devicePath: string }
  /** The device is about to be (or is) mounted at `path`. */
  | {
      readonly kind: 'device'
      readonly volume: UniqueVolumeName
      readonly spec: VolumeSpec
      readonly devicePath: string
      readonly path: string
    }
  /** The volume is about to be (or is) set up for the pod. */
  | {
      readonly kind: 'setup'
      readonly volume: UniqueVolumeName
      readonly pod: UniquePodName
      readonly podUID: string
      readonly outerName: string
      readonly spec: VolumeSpec
      readonly gid: string
    }
  /** The pod's volume was torn down. */
  | { readonly kind: 'torn-down'; readonly volume: UniqueVolumeName; readonly pod: UniquePodName }
  /** The device was unmounted. */
  | { readonly kind: 'device-unmounted'; readonly volume: UniqueVolumeName }
  /** The volume was detached (or forgotten: nothing of it is left on the node). */
  | { readonly kind: 'detached'; readonly volume: UniqueVolumeName }

/** What the journal says may exist on the machine, per volume. */
export interface JournalVolume {
  readonly volume: UniqueVolumeName
  spec: VolumeSpec
  attached?: { readonly devicePath: string }
  device?: { readonly devicePath: string; readonly path: string }
  readonly pods: SmallMap<UniquePodName, { readonly podUID: string; readonly outerName: string; readonly spec: VolumeSpec; readonly gid: string }>
}

export interface JournalOptions {
  readonly host: Host
  /** The journal file, e.g. `<root>/journal/volumes.log`. */
  readonly path: string
  readonly logger: Logger
  /** Compact when the file holds more than this many records and at least twice the live ones. @default 1000 */
  readonly compactAfter?: number
  /** The least room (bytes) a compaction leaves after the records, where the host has `writeFileAt`. @default 262144 */
  readonly minRoomBytes?: number
  /** With a clock, a write of records that need not be durable waits `noteDelayMs` for an intent to share it; without one, every write starts at once. */
  readonly clock?: Clock
  /** How long records that need not be durable wait for an intent (see {@link VolumeJournal.note}). @default 5 */
  readonly noteDelayMs?: number
}

const NOTE_DELAY_MS = 5

const MIN_ROOM_BYTES = 256 * 1024

function encode(record: JournalRecord): string {
  const json = JSON.stringify(record)
  return `${crc32Utf8(json).toString(16).padStart(8, '0')} ${json}\n`
}

/** Records joined per chunk by {@link encodeAll}. */
const ENCODE_CHUNK = 1000

/**
 * The lines of `records` as one text. Joined a chunk at a time: with 100,000 records in one group
 * commit, every line lived until the last one was encoded and was copied by the collector on the
 * way; a chunk's lines die as soon as the chunk is joined.
 */
function encodeAll(records: readonly JournalRecord[]): string {
  if (records.length <= ENCODE_CHUNK) return records.map(encode).join('')
  const chunks: string[] = []
  for (let i = 0; i < records.length; i += ENCODE_CHUNK) chunks.push(records.slice(i, i + ENCODE_CHUNK).map(encode).join(''))
  return chunks.join('')
}

/** Parses journal text: the valid records in order, and whether a torn or corrupt tail was dropped. */
export function parseJournal(text: string): { records: JournalRecord[]; dropped: number } {
  const records: JournalRecord[] = []
  // The room made for records to come is zeros, and no record holds one: the records end at the
  // first. Records after it were written after one that never reached the disk (a crash before
  // their sync): dropped, as records after a torn one are.
  const room = text.indexOf('\0')
  const lines = (room < 0 ? text : text.slice(0, room)).split('\n')
  // The text after the last newline is a record still being written when the process died.
  const complete = lines.slice(0, -1)
  let dropped = lines[lines.length - 1] === '' ? 0 : 1
  if (room >= 0) dropped += text.slice(room).split('\n').filter((line) => /[^\0]/.test(line)).length
  for (let i = 0; i < complete.length; i++) {
    const line = complete[i] as string
    const match = /^([0-9a-f]{8}) (.*)$/.exec(line)
    let record: JournalRecord | undefined
    if (match && Number.parseInt(match[1] as string, 16) === crc32Utf8(match[2] as string)) {
      try {
        record = JSON.parse(match[2] as string) as JournalRecord
      } catch {
        record = undefined
      }
    }
    if (!record) {
      dropped += complete.length - i
      break
    }
    records.push(record)
  }
  return { records, dropped }
}

/** Applies records in order to the per-volume state. */
export function replay(records: Iterable<JournalRecord>): Map<UniqueVolumeName, JournalVolume> {
  const state = new JournalState()
  for (const record of records) state.apply(record)
  return state.volumes()
}

/**
 * Records written together, and the one promise all their writers wait on. They succeed or fail
 * together anyway; a promise and two resolving functions per record were most of what a node
 * setting up 100,000 volumes at once held for its journal.
 */
interface Batch {
  readonly records: JournalRecord[]
  /** Some record in it is an intent: the write is synced before the batch resolves. */
  sync: boolean
  readonly done: Promise<void>
  readonly resolve: () => void
  readonly reject: (err: unknown) => void
}

function createBatch(): Batch {
  let resolve!: () => void
  let reject!: (err: unknown) => void
  const done = new Promise<void>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { records: [], sync: false, done, resolve, reject }
}

export class VolumeJournal {
  readonly #o: JournalOptions
  readonly #state: JournalState
  #lines: number
  /** Where the records end in the file (bytes). */
  #bytes = 0
  /** The file's size with its room, where records are written into it (`writeFileAt`); else 0. */
  #capacity = 0
  #liveAtCompaction = 0
  #readOnly = false
  /** Records handed over since the last write began: the next write's batch. */
  #next: Batch | undefined
  #writing = false
  /** Set while the next write holds only records that need not be durable, waiting for an intent. */
  #noteTimer: Timer | undefined
  /** The last append failed: the file may end in a fragment of it, cleared by a rewrite before the next append. */
  #torn = false
  #drained: Promise<void> = Promise.resolve()

  private constructor(options: JournalOptions, records: readonly JournalRecord[]) {
    this.#o = options
    this.#state = new JournalState()
    for (const record of records) this.#state.apply(record)
    this.#lines = records.length
  }

  /**
   * Reads the journal (a missing file is an empty journal), drops a torn tail, and rewrites it
   * compacted so the file holds exactly the live records. The host must support `appendFile`.
   */
  static async open(options: JournalOptions): Promise<VolumeJournal> {
    const { host, path, logger } = options
    if (!host.appendFile && !host.writeFileAt) throw new Error('the host cannot append to files: no journal')
    let text = ''
    try {
      text = decodeUtf8(await host.readFile(path))
    } catch (err) {
      if (!isHostError(err, 'ENOENT')) throw err
    }
    const { records, dropped } = parseJournal(text)
    if (dropped > 0) logger.warn('Dropped torn or corrupt journal records', { path, dropped })
    const journal = new VolumeJournal(options, records)
    await host.mkdir(dirname(path), { recursive: true, mode: 0o700 })
    await journal.#compact()
    return journal
  }

  /**
   * Reads the journal without changing it (no compaction, no directory made): for dry runs and
   * inspection. A missing file is an empty journal; a torn tail is dropped. `record` is refused.
   */
  static async read(options: Pick<JournalOptions, 'host' | 'path' | 'logger'>): Promise<VolumeJournal> {
    let text = ''
    try {
      text = decodeUtf8(await options.host.readFile(options.path))
    } catch (err) {
      if (!isHostError(err, 'ENOENT')) throw err
    }
    const { records } = parseJournal(text)
    const journal = new VolumeJournal(options, records)
    journal.#readOnly = true
    return journal
  }

  /** What may exist on the machine, per volume (a copy). */
  volumes(): Map<UniqueVolumeName, JournalVolume> {
    return this.#state.volumes()
  }

  /** The journal holds a live set-up intent for this pod's use of the volume. */
  hasSetup(volume: UniqueVolumeName, pod: UniquePodName): boolean {
    return this.#state.hasSetup(volume, pod)
  }

  /** Records in the file now. */
  get size(): { records: number; bytes: number } {
    return { records: this.#lines, bytes: this.#bytes }
  }

  /**
   * Appends and syncs `record`; resolves once it is durable. Records that arrive while a write is
   * syncing are written together by the next one (group commit), so a thousand concurrent
   * operations cost a handful of syncs, not a thousand. The records of one write share the
   * returned promise: it settles for all of them at once, as their write does.
   *
   * With `sync: false`, the record goes into the next write like any other but does not make that
   * write wait for a sync: it resolves once the record is written (in the kernel's cache), and is
   * durable with the next synced write (fdatasync covers all of the file's data written before it)
   * or the kernel's writeback. Only for an intent whose step reconstruction finds from the disk
   * layout without the journal (an emptyDir's directory): a crash that loses it loses nothing the
   * disk scan does not find. Fails as the write fails.
   */
  record(record: JournalRecord, options?: { readonly sync?: boolean }): Promise<void> {
    if (this.#readOnly) return Promise.reject(new Error('the journal was opened read-only'))
    return this.#enqueue(record, options?.sync !== false)
  }

  #enqueue(record: JournalRecord, sync: boolean): Promise<void> {
    const batch = (this.#next ??= createBatch())
    batch.records.push(record)
    if (sync) batch.sync = true
    if (this.#writing) return batch.done
    const { clock } = this.#o
    if (batch.sync || !clock) this.#startWrite()
    else this.#noteTimer ??= clock.setTimer(this.#o.noteDelayMs ?? NOTE_DELAY_MS, () => this.#startWrite())
    return batch.done
  }

  // The write starts once the code that handed its records over has run to its end, so the records
  // it hands over together share one write and one sync (a device's intent and its set-up's,
  // recorded one after the other, used to be two fdatasyncs in a row).
  #startWrite(): void {
    this.#noteTimer?.cancel()
    this.#noteTimer = undefined
    if (this.#writing) return
    this.#writing = true
    this.#drained = Promise.resolve().then(() => this.#write())
  }

  /**
   * Appends a record that something is gone (torn down, unmounted, detached) without waiting for
   * it to be durable. Only intents must reach the disk before the change they announce; losing
   * this kind in a crash leaves the journal saying a thing may exist, and reconstruction then finds
   * it gone and cleans up, which is what the record would have said. Records keep their order.
   *
   * So a write that holds nothing but such records is not synced: it reaches the disk with the next
   * intent's sync (fdatasync covers all of the file's data written before it), or with the kernel's
   * writeback. A torn one at the end of the file after a crash is dropped by its checksum. With a
   * clock, it waits up to `noteDelayMs` for an intent to share its write.
   */
  note(record: JournalRecord): void {
    if (this.#readOnly) return
    this.#enqueue(record, false).catch((err: unknown) => this.#o.logger.warn('Journal write failed', { err: String(err), kind: record.kind }))
  }

  /**
   * Resolves once every record handed over so far is written (or failed): what a stopping manager
   * waits for, so nothing touches the file after it returns.
   */
  async flush(): Promise<void> {
    if (this.#noteTimer) this.#startWrite()
    while (this.#writing) await this.#drained
  }

  async #write(): Promise<void> {
    this.#writing = true
    try {
      while (this.#next) {
        const batch = this.#next
        this.#next = undefined
        const { records } = batch
        const bytes = encodeUtf8(encodeAll(records))
        const { host, path } = this.#o
        try {
          // A failed append may have left part of its records at the end of the file, and a reader
          // drops a torn record with everything after it: the file is rewritten from the live
          // records first, so nothing appended later sits behind the fragment.
          if (this.#torn) {
            await this.#compact(bytes.length)
            this.#torn = false
          }
          if (host.writeFileAt) {
            // Never an append behind the room (a reader stops at its first zero): written where the
            // records end, into the room, or past the end of a file made without room.
            if (this.#capacity > 0 && this.#bytes + bytes.length > this.#capacity) await this.#grow(bytes.length)
            await host.writeFileAt(path, this.#bytes, bytes, { sync: batch.sync })
          } else {
            await host.appendFile?.(path, bytes, { sync: batch.sync })
          }
        } catch (err) {
          this.#torn = true
          batch.reject(err)
          continue
        }
        this.#lines += records.length
        this.#bytes += bytes.length
        for (const record of records) this.#state.apply(record)
        // Counting the live records walks every volume: do it only when the file may have doubled.
        if (this.#lines > (this.#o.compactAfter ?? 1000) && this.#lines >= 2 * this.#liveAtCompaction) {
          const live = this.#state.recordCount
          if (this.#lines >= 2 * live) {
            await this.#compact().catch((err: unknown) => this.#o.logger.warn('Journal compaction failed', { err: String(err) }))
          } else {
            this.#liveAtCompaction = live
          }
        }
        batch.resolve()
      }
    } finally {
      this.#writing = false
    }
  }

  /**
   * More room at the end of the file, for at least `needed` bytes: zeros written past it, as much
   * as the file holds (so the file doubles, and growths come ever further apart), not synced (the
   * next synced record's fdatasync carries the new size, once). No record is encoded again. A
   * filesystem too full for it leaves the file as it is: records then extend it.
   */
  async #grow(needed: number): Promise<void> {
    const { host, path } = this.#o
    const grow = Math.max(this.#o.minRoomBytes ?? MIN_ROOM_BYTES, this.#capacity, 2 * needed)
    try {
      await host.writeFileAt?.(path, this.#capacity, new Uint8Array(grow))
      this.#capacity += grow
    } catch (err) {
      if (!isHostError(err, 'ENOSPC')) throw err
      this.#capacity = 0
    }
  }

  /**
   * Rewrites the file with the live records alone. Where records are written into room, the new
   * file has room after them for at least `needed` bytes more: as much as the records take (so
   * compactions for room come ever further apart as the node grows), and no less than the minimum.
   * On a filesystem too full for the room, the file is made without it (records then extend it,
   * as appends do) and the next compaction tries again: a full disk costs the sync's speed, not
   * the journal.
   */
  async #compact(needed = 0): Promise<void> {
    const { host, path } = this.#o
    const records = this.#state.records()
    const bytes = encodeUtf8(encodeAll(records))
    const tmp = `${path}.tmp`
    let file = bytes
    if (host.writeFileAt) {
      file = new Uint8Array(bytes.length + Math.max(this.#o.minRoomBytes ?? MIN_ROOM_BYTES, bytes.length, 2 * needed))
      file.set(bytes)
      try {
        await host.writeFile(tmp, file, { mode: 0o600 })
      } catch (err) {
        if (!isHostError(err, 'ENOSPC')) throw err
        file = bytes
      }
    }
    if (file === bytes) await host.writeFile(tmp, file, { mode: 0o600 })
    if (host.syncFile) await host.syncFile(tmp)
    await host.rename(tmp, path)
    this.#lines = records.length
    this.#bytes = bytes.length
    this.#capacity = file.length > bytes.length ? file.length : 0
    this.#liveAtCompaction = records.length
  }
}
