/**
 * Synchronous views for test assertions: a JSON-able snapshot of a subtree as a process would see it
 * (crossing mounts), whether a path exists, and where things are mounted.
 */
import { HostError, isHostError } from '@kubevol/core'
import { deviceName } from './filesystem.js'
import type { HostState } from './host-state.js'
import type { Location } from './lookup.js'
import { crossMounts, lookup } from './lookup.js'
import type { Mount } from './mount-table.js'
import { decodeText } from './text.js'

/** What is mounted where a snapshot crosses into another mount. */
export interface TreeMount {
  readonly fstype: string
  readonly source: string
  readonly readOnly: boolean
}

/**
 * A snapshot of one entry. Files carry `text` (their bytes as UTF-8) up to 64 KiB; directories list
 * their children by name, in sorted order; devices give `major:minor`. `mount` is set where a mount
 * is crossed.
 */
export type TreeNode =
  | { readonly type: 'directory'; readonly mode: number; readonly children: Readonly<Record<string, TreeNode>>; readonly mount?: TreeMount }
  | { readonly type: 'file'; readonly mode: number; readonly size: number; readonly text?: string; readonly mount?: TreeMount }
  | { readonly type: 'symlink'; readonly target: string }
  | { readonly type: 'block-device' | 'char-device'; readonly mode: number; readonly device: string; readonly mount?: TreeMount }
  | { readonly type: 'socket' | 'fifo'; readonly mode: number }

const maxText = 64 * 1024

function mountInfo(mount: Mount): TreeMount {
  return { fstype: mount.fs.fstype, source: mount.source, readOnly: mount.readOnly || mount.fs.readOnly }
}

function snapshot(state: HostState, loc: Location, crossed: boolean): TreeNode {
  const { node } = loc
  const mount = crossed ? { mount: mountInfo(loc.mount) } : {}
  switch (node.type) {
    case 'directory': {
      const children: Record<string, TreeNode> = {}
      for (const name of [...node.children.keys()].sort()) {
        const child = node.children.get(name)
        if (!child) continue
        const next = crossMounts(state.table, { mount: loc.mount, node: child })
        children[name] = snapshot(state, next, next.mount !== loc.mount)
      }
      return { type: 'directory', mode: node.mode, children, ...mount }
    }
    case 'file': {
      const bytes = new Uint8Array(node.size <= maxText ? node.size : 0)
      bytes.set(node.data.subarray(0, bytes.length))
      const text = node.size <= maxText ? { text: decodeText(bytes) } : {}
      return { type: 'file', mode: node.mode, size: node.size, ...text, ...mount }
    }
    case 'symlink':
      return { type: 'symlink', target: node.target }
    case 'block-device':
    case 'char-device':
      return { type: node.type, mode: node.mode, device: deviceName(node.rdev), ...mount }
    default:
      return { type: node.type, mode: node.mode }
  }
}

/** The subtree at `path` (a symlink there is not followed). ENOENT when it does not exist. */
export function tree(state: HostState, path: string): TreeNode {
  const found = lookup({ table: state.table }, path, { follow: false, syscall: 'tree' }).found
  if (!found) throw new HostError('ENOENT', 'tree', path, 'no such file or directory')
  return snapshot(state, found, found.node === found.mount.root && found.mount.parent !== null)
}

/** True when something (a dangling symlink included) is at `path`. */
export function exists(state: HostState, path: string): boolean {
  try {
    return lookup({ table: state.table }, path, { follow: false, syscall: 'lstat' }).found !== null
  } catch (err) {
    if (isHostError(err)) return false
    throw err
  }
}

/** The targets of every mount but the root filesystem's, in mount order. */
export function mountTargets(state: HostState): string[] {
  return state.table.all.filter((mount) => mount.parent).map((mount) => state.table.targetOf(mount))
}
