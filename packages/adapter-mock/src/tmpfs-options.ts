/**
 * The options of memory filesystems (tmpfs): `size=`, `nr_inodes=`, `mode=`, `uid=`, `gid=`, read
 * the way the kernel reads them (k/m/g/t/p/e suffixes, `%` of memory, sizes rounded up to pages).
 */
import { HostError } from '@kubevol/core'

const pageSize = 4096
const suffixes: Record<string, number> = { k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40, p: 2 ** 50, e: 2 ** 60 }

/** What the options of a memory filesystem come to. */
export interface TmpfsOptions {
  readonly capacityBytes: number
  readonly inodeLimit: number
  readonly mode: number
  readonly uid: number
  readonly gid: number
}

function parseAmount(value: string, memoryBytes: number): number | null {
  const match = /^(\d+)([kmgtpe%]?)$/i.exec(value)
  if (!match) return null
  const amount = Number(match[1])
  const suffix = (match[2] ?? '').toLowerCase()
  if (suffix === '%') return Math.floor((memoryBytes * amount) / 100)
  return amount * (suffixes[suffix] ?? 1)
}

/**
 * Reads tmpfs options over the defaults (half of `memoryBytes`, as Linux does; mode 1777). A
 * `size=0` means no limit; EINVAL for a value the kernel would refuse, naming `target` (the mount
 * point, as mount(2)'s failure does) or, without one, the option.
 */
export function parseTmpfsOptions(options: readonly string[], memoryBytes: number, defaults?: TmpfsOptions, target?: string): TmpfsOptions {
  let { capacityBytes, inodeLimit, mode, uid, gid } = defaults ?? {
    capacityBytes: Math.floor(memoryBytes / 2),
    inodeLimit: Math.floor(memoryBytes / 2 / pageSize),
    mode: 0o1777,
    uid: 0,
    gid: 0,
  }
  for (const option of options) {
    const [key, value = ''] = option.split('=', 2)
    const bad = (): never => {
      throw new HostError('EINVAL', 'mount', target ?? option, target === undefined ? 'bad tmpfs option' : `bad tmpfs option ${option}`)
    }
    if (key === 'size') {
      const bytes = parseAmount(value, memoryBytes) ?? bad()
      capacityBytes = bytes === 0 ? memoryBytes : Math.ceil(bytes / pageSize) * pageSize
    } else if (key === 'nr_inodes') {
      const count = parseAmount(value.replace('%', ''), memoryBytes) ?? bad()
      inodeLimit = count === 0 ? Number.MAX_SAFE_INTEGER : count
    } else if (key === 'mode') {
      mode = /^[0-7]+$/.test(value) ? Number.parseInt(value, 8) & 0o7777 : bad()
    } else if (key === 'uid' || key === 'gid') {
      const id = /^\d+$/.test(value) ? Number(value) : bad()
      if (key === 'uid') uid = id
      else gid = id
    }
  }
  return { capacityBytes, inodeLimit, mode, uid, gid }
}
