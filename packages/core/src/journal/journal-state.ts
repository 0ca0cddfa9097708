/**
 * What the journal's live records say, per volume, as the open journal keeps it in memory. It holds
 * an entry for every volume set up on the node; nearly all of them are one pod's set-up and nothing
 * else (no attachment, no device), and such a volume is kept as a packed set-up entry alone instead
 * of a {@link JournalVolume} with a map of one pod: the biggest of kubevol's per-volume structures
 * after the two caches.
 */
import type { UniquePodName, UniqueVolumeName } from '../api/names.js'
import type { VolumeSpec } from '../api/volume-spec.js'
import { SmallMap } from '../cache/small-map.js'
import type { JournalRecord, JournalVolume } from './journal.js'

type SetupRecord = Extract<JournalRecord, { kind: 'setup' }>

/** What a set-up entry keeps beyond its pod and spec, when any of it is not the usual. */
interface SetupDetails {
  readonly podUID: string
  readonly outerName: string
  readonly gid: string
}

/**
 * One pod's set-up record of a volume, packed: the volume's name is the state's key, and nearly
 * every record's pod UID is its pod's name, its outer name its spec's name and its gid empty, so
 * those three are kept only when one of them differs. Three fields instead of the record's seven.
 */
class SetupEntry {
  readonly pod: UniquePodName
  readonly spec: VolumeSpec
  readonly #details: SetupDetails | undefined

  constructor(r: SetupRecord) {
    this.pod = r.pod
    this.spec = r.spec
    const { podUID, outerName, gid } = r
    this.#details = podUID === r.pod && outerName === r.spec.name && gid === '' ? undefined : { podUID, outerName, gid }
  }

  get podUID(): string {
    return this.#details?.podUID ?? this.pod
  }

  get outerName(): string {
    return this.#details?.outerName ?? this.spec.name
  }

  get gid(): string {
    return this.#details?.gid ?? ''
  }

  /** The record this entry was made from (the same fields, in the record's order). */
  record(volume: UniqueVolumeName): SetupRecord {
    return { kind: 'setup', volume, pod: this.pod, podUID: this.podUID, outerName: this.outerName, spec: this.spec, gid: this.gid }
  }
}

/** A volume whose only content is one pod's set-up, or the general form. */
type Entry = SetupEntry | JournalVolume

function isSetupEntry(entry: Entry): entry is SetupEntry {
  return entry instanceof SetupEntry
}

/** The general form of an entry (a new object for a set-up entry, the entry itself otherwise). */
function expand(volume: UniqueVolumeName, entry: Entry): JournalVolume {
  if (!isSetupEntry(entry)) return entry
  const pods: JournalVolume['pods'] = new SmallMap()
  pods.set(entry.pod, { podUID: entry.podUID, outerName: entry.outerName, spec: entry.spec, gid: entry.gid })
  return { volume, spec: entry.spec, pods }
}

function copyPods(pods: JournalVolume['pods']): JournalVolume['pods'] {
  const copy: JournalVolume['pods'] = new SmallMap()
  for (const [pod, p] of pods) copy.set(pod, p)
  return copy
}

export class JournalState {
  readonly #volumes = new Map<UniqueVolumeName, Entry>()

  /**
   * Applies one record: a record carrying a spec makes it the volume's;
   * a volume with no attachment, device or pod left is forgotten. The state keeps the record.
   */
  apply(r: JournalRecord): void {
    const entry = this.#volumes.get(r.volume)
    switch (r.kind) {
      case 'setup':
        if (entry === undefined || (isSetupEntry(entry) && entry.pod === r.pod)) {
          this.#volumes.set(r.volume, new SetupEntry(r))
        } else {
          const v = this.#general(r.volume, entry)
          v.spec = r.spec
          v.pods.set(r.pod, { podUID: r.podUID, outerName: r.outerName, spec: r.spec, gid: r.gid })
        }
        return
      case 'attached': {
        const v = entry === undefined ? this.#create(r.volume, r.spec) : this.#general(r.volume, entry)
        v.spec = r.spec
        v.attached = { devicePath: r.devicePath }
        return
      }
      case 'device': {
        const v = entry === undefined ? this.#create(r.volume, r.spec) : this.#general(r.volume, entry)
        v.spec = r.spec
        v.device = { devicePath: r.devicePath, path: r.path }
        return
      }
      case 'torn-down':
        if (entry === undefined) return
        if (isSetupEntry(entry)) {
          if (entry.pod === r.pod) this.#volumes.delete(r.volume)
          return
        }
        entry.pods.delete(r.pod)
        this.#forgetIfEmpty(entry)
        return
      case 'device-unmounted':
        if (entry === undefined || isSetupEntry(entry)) return
        entry.device = undefined
        this.#forgetIfEmpty(entry)
        return
      case 'detached':
        this.#volumes.delete(r.volume)
        return
    }
  }

  #create(volume: UniqueVolumeName, spec: JournalVolume['spec']): JournalVolume {
    const v: JournalVolume = { volume, spec, pods: new SmallMap() }
    this.#volumes.set(volume, v)
    return v
  }

  #general(volume: UniqueVolumeName, entry: Entry): JournalVolume {
    if (!isSetupEntry(entry)) return entry
    const v = expand(volume, entry)
    this.#volumes.set(volume, v)
    return v
  }

  #forgetIfEmpty(v: JournalVolume): void {
    if (!v.attached && !v.device && v.pods.size === 0) this.#volumes.delete(v.volume)
  }

  /** A live set-up record of this pod's use of the volume. */
  hasSetup(volume: UniqueVolumeName, pod: UniquePodName): boolean {
    const entry = this.#volumes.get(volume)
    if (entry === undefined) return false
    return isSetupEntry(entry) ? entry.pod === pod : entry.pods.has(pod)
  }

  /** What may exist, per volume, in the general form (a copy: changing it changes nothing here). */
  volumes(): Map<UniqueVolumeName, JournalVolume> {
    const volumes = new Map<UniqueVolumeName, JournalVolume>()
    for (const [volume, entry] of this.#volumes) {
      const v = expand(volume, entry)
      volumes.set(volume, v === entry ? { ...v, pods: copyPods(v.pods) } : v)
    }
    return volumes
  }

  /** Live records: every volume's attachment, device and set-ups, in that order per volume. */
  records(): JournalRecord[] {
    const records: JournalRecord[] = []
    for (const [volume, v] of this.#volumes) {
      if (isSetupEntry(v)) {
        records.push(v.record(volume))
        continue
      }
      if (v.attached) records.push({ kind: 'attached', volume: v.volume, spec: v.spec, devicePath: v.attached.devicePath })
      if (v.device) records.push({ kind: 'device', volume: v.volume, spec: v.spec, ...v.device })
      for (const [pod, p] of v.pods) records.push({ kind: 'setup', volume: v.volume, pod, ...p })
    }
    return records
  }

  /** Number of live records, without building them. */
  get recordCount(): number {
    let count = 0
    for (const entry of this.#volumes.values()) {
      if (isSetupEntry(entry)) count++
      else count += (entry.attached ? 1 : 0) + (entry.device ? 1 : 0) + entry.pods.size
    }
    return count
  }
}
