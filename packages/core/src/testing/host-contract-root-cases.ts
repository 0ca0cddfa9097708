/**
 * The members the locked-root contract calls (see `host-contract-root.ts`): for each, what must be
 * at the path before the call, the call, and what a symlink as the path's last component gives.
 */
import { expect } from 'vitest'
import type { HostErrorCode } from '../errors.js'
import type { Host } from '../host/host.js'
import { dirname } from '../paths.js'
import { encoder } from './host-contract-support.js'

/** What a case needs at its path before the call. */
export type Leaf = 'file' | 'dir' | 'none' | 'mount' | 'symlink'

/** Where a case runs: the host, the kubevol root, and a directory at the root's top for its other end. */
export interface CaseEnv {
  readonly host: Host
  readonly root: string
  /** A real directory directly in the root, for a case's other end (a bind's target, a subPath's volume). */
  readonly aside: string
}

/** One Host member under the rule. */
export interface MemberCase {
  readonly name: string
  readonly leaf: Leaf
  /**
   * With a symlink as the last component: the refusal (ELOOP for members that would follow it) or
   * another code, or a check of what acting on the link itself did. Absent: ELOOP.
   */
  readonly atLink?: HostErrorCode | ((env: CaseEnv, path: string, result: unknown) => Promise<void>)
  /** Needs mounts (a tmpfs, a bind) where the host may make them. */
  readonly mounts?: boolean
  /** The member is optional and this host has it. */
  readonly has?: (host: Host) => boolean
  /** Makes what the case needs outside its path (under `aside`), before any plant. */
  readonly prepareAside?: (env: CaseEnv) => Promise<void>
  readonly call: (env: CaseEnv, path: string) => Promise<unknown>
}

/** Makes `leaf` at `path`, whose parent exists; a mount is a tmpfs over a new directory. */
export async function makeLeaf(host: Host, path: string, leaf: Leaf): Promise<void> {
  switch (leaf) {
    case 'file':
      await host.writeFile(path, 'leaf file\n')
      await makeBeside(host, path, leaf)
      return
    case 'dir':
      await host.mkdir(path)
      await host.mkdir(`${path}/sub`)
      await host.writeFile(`${path}/sub/f`, 'in the leaf directory\n')
      return
    case 'mount':
      await host.mkdir(path)
      await host.mount({ source: 'tmpfs', target: path, fstype: 'tmpfs', options: ['size=1m'] })
      await host.writeFile(`${path}/on-tmpfs`, 'on the tmpfs\n')
      return
    case 'symlink':
      await host.symlink('link-target', path)
      return
    case 'none':
      return
  }
}

/** What a case needs beside its leaf, in the same directory: for a file, rename's other end that replaces it. */
export async function makeBeside(host: Host, path: string, leaf: Leaf): Promise<void> {
  if (leaf === 'file') await host.writeFile(`${path}.new`, 'replacement\n')
}

const ok = async (): Promise<void> => undefined
const has = (member: keyof Host) => (host: Host) => host[member] !== undefined

/** Every Host member that takes a path, as the engine calls it. */
export const memberCases: readonly MemberCase[] = [
  {
    name: 'lstat',
    leaf: 'file',
    atLink: async (_env, _path, info) => expect((info as { type?: string } | null)?.type).toBe('symlink'),
    call: ({ host }, path) => host.lstat(path),
  },
  { name: 'stat', leaf: 'file', call: ({ host }, path) => host.stat(path) },
  { name: 'readFile', leaf: 'file', call: ({ host }, path) => host.readFile(path) },
  { name: 'writeFile', leaf: 'file', call: ({ host }, path) => host.writeFile(path, 'written through\n') },
  { name: 'appendFile', leaf: 'file', has: has('appendFile'), call: ({ host }, path) => host.appendFile?.(path, 'appended\n', { sync: true }) as Promise<void> },
  {
    name: 'writeFileAt',
    leaf: 'file',
    has: has('writeFileAt'),
    call: ({ host }, path) => host.writeFileAt?.(path, 2, encoder.encode('XY'), { sync: true }) as Promise<void>,
  },
  { name: 'syncFile', leaf: 'file', has: has('syncFile'), call: ({ host }, path) => host.syncFile?.(path) as Promise<void> },
  { name: 'truncate', leaf: 'file', has: has('truncate'), call: ({ host }, path) => host.truncate?.(path, 1) as Promise<void> },
  { name: 'statfs', leaf: 'file', has: has('statfs'), call: ({ host }, path) => host.statfs?.(path) as Promise<unknown> },
  { name: 'chmod', leaf: 'file', call: ({ host }, path) => host.chmod(path, 0o600) },
  { name: 'lchown', leaf: 'file', atLink: ok, call: ({ host }, path) => host.lchown(path, 4321, 4321) },
  { name: 'readdir', leaf: 'dir', call: ({ host }, path) => host.readdir(path) },
  { name: 'mkdir', leaf: 'none', call: ({ host }, path) => host.mkdir(path, { mode: 0o750 }) },
  { name: 'mkdir recursive', leaf: 'none', call: ({ host }, path) => host.mkdir(`${path}/below`, { recursive: true, mode: 0o750 }) },
  { name: 'mkdir recursive of an existing directory', leaf: 'dir', call: ({ host }, path) => host.mkdir(path, { recursive: true }) },
  {
    name: 'rename (from)',
    leaf: 'file',
    atLink: async ({ host }, path) => expect((await host.lstat(`${path}.moved`))?.type).toBe('symlink'),
    call: ({ host }, path) => host.rename(path, `${path}.moved`),
  },
  {
    name: 'rename (to)',
    leaf: 'file',
    atLink: async ({ host }, path) => expect((await host.lstat(path))?.type).toBe('file'),
    call: ({ host }, path) => host.rename(`${path}.new`, path),
  },
  { name: 'symlink', leaf: 'none', atLink: 'EEXIST', call: ({ host }, path) => host.symlink('anywhere', path) },
  { name: 'readlink', leaf: 'symlink', atLink: ok, call: ({ host }, path) => host.readlink(path) },
  { name: 'remove', leaf: 'file', atLink: unlinked, call: ({ host }, path) => host.remove(path) },
  { name: 'removeAll', leaf: 'dir', atLink: unlinked, call: ({ host }, path) => host.removeAll(path) },
  {
    name: 'removeUnmounted',
    leaf: 'file',
    has: has('removeUnmounted'),
    atLink: unlinked,
    call: ({ host }, path) => host.removeUnmounted?.([path]) as Promise<void>,
  },
  {
    name: 'removeUnmounted with unmountLast',
    leaf: 'mount',
    mounts: true,
    has: has('removeUnmounted'),
    atLink: unlinked,
    call: ({ host }, path) => host.removeUnmounted?.([path], { unmountLast: true }) as Promise<void>,
  },
  {
    name: 'fileSteps',
    leaf: 'none',
    has: has('fileSteps'),
    call: ({ host }, path) =>
      host.fileSteps?.([
        { op: 'lstat', path: `${path}/ready`, stopIfFound: true },
        { op: 'mkdir', path, recursive: true, mode: 0o777 },
        { op: 'setPermissions', path, permissions: 0o777 },
        { op: 'writeFile', path: `${path}/ready`, data: 'x', mode: 0o640 },
      ]) as Promise<number>,
  },
  {
    name: 'fileSteps with a tmpfs',
    leaf: 'none',
    mounts: true,
    has: has('fileSteps'),
    call: ({ host }, path) =>
      host.fileSteps?.([
        { op: 'mkdir', path, recursive: true, mode: 0o777 },
        { op: 'mountUnlessMountPoint', path, mount: { source: 'tmpfs', fstype: 'tmpfs', options: ['size=1m'] } },
      ]) as Promise<number>,
  },
  { name: 'mount tmpfs', leaf: 'dir', mounts: true, call: ({ host }, path) => host.mount({ source: 'tmpfs', target: path, fstype: 'tmpfs', options: ['size=1m'] }) },
  {
    name: 'mount bind (source)',
    leaf: 'dir',
    mounts: true,
    prepareAside: ({ host, aside }) => host.mkdir(`${aside}/bind-target`),
    call: ({ host, aside }, path) => host.mount({ source: path, target: `${aside}/bind-target`, bind: true }),
  },
  {
    name: 'mount bind (target)',
    leaf: 'dir',
    mounts: true,
    prepareAside: ({ host, aside }) => makeLeaf(host, `${aside}/bind-source`, 'dir'),
    call: ({ host, aside }, path) => host.mount({ source: `${aside}/bind-source`, target: path, bind: true }),
  },
  { name: 'unmount', leaf: 'mount', mounts: true, atLink: 'EINVAL', call: ({ host }, path) => host.unmount(path) },
  {
    name: 'isMountPoint',
    leaf: 'mount',
    mounts: true,
    atLink: async (_env, _path, answer) => expect(answer).toBe(false),
    call: ({ host }, path) => host.isMountPoint(path),
  },
  { name: 'mountReferences', leaf: 'dir', call: ({ host }, path) => host.mountReferences(path) },
  {
    name: 'subPaths.bind (volume)',
    leaf: 'dir',
    mounts: true,
    has: (host) => host.subPaths !== undefined,
    call: ({ host, aside }, path) => host.subPaths?.bind(path, 'sub', `${aside}/subpath-target`) as Promise<void>,
  },
  {
    name: 'subPaths.bind (target)',
    leaf: 'none',
    mounts: true,
    has: (host) => host.subPaths !== undefined,
    prepareAside: ({ host, aside }) => makeLeaf(host, `${aside}/volume`, 'dir'),
    call: ({ host, aside }, path) => host.subPaths?.bind(`${aside}/volume`, 'sub', path) as Promise<void>,
  },
]

/** A symlink acted on as an entry: it is gone, and its directory is still there. */
async function unlinked({ host }: CaseEnv, path: string): Promise<void> {
  expect(await host.lstat(path)).toBeNull()
  expect((await host.lstat(dirname(path)))?.type).toBe('directory')
}
