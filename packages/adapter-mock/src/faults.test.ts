import { HostError, isHostError } from '@kubevol/core'
import { createFakeClock } from '@kubevol/core/testing'
import { describe, expect, it } from 'vitest'
import type { CallMatch, HostCall } from './faults.js'
import { matchesCall } from './faults.js'
import { createMemoryHost } from './memory-host.js'

async function settled<T>(promise: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  return promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  )
}

describe('matchesCall', () => {
  const call: HostCall = { method: 'mount', args: [], path: '/var/lib/kubevol/pods/u1/volumes/x' }
  it.each<{ case: string; match: CallMatch; expected: boolean }>([
    { case: 'an empty match', match: {}, expected: true },
    { case: 'the method', match: { method: 'mount' }, expected: true },
    { case: 'another method', match: { method: 'unmount' }, expected: false },
    { case: 'the exact path', match: { path: '/var/lib/kubevol/pods/u1/volumes/x' }, expected: true },
    { case: 'the path with a trailing slash', match: { path: '/var/lib/kubevol/pods/u1/volumes/x/' }, expected: true },
    { case: 'a parent path', match: { path: '/var/lib/kubevol' }, expected: false },
    { case: 'a pattern', match: { method: 'mount', path: /\/pods\/u1\// }, expected: true },
    { case: 'a predicate', match: (c) => c.args.length === 0, expected: true },
  ])('$case: $expected', ({ match, expected }) => {
    expect(matchesCall(match, call)).toBe(expected)
  })

  it('a path match never selects a call without a path', () => {
    expect(matchesCall({ path: /.*/ }, { method: 'mounts', args: [] })).toBe(false)
  })
})

describe('fault injection', () => {
  it('failOn rejects the matching call without running it, until disposed', async () => {
    const host = createMemoryHost()
    const dispose = host.faults.failOn({ method: 'mkdir', path: '/a' }, 'EIO')
    const { error } = await settled(host.mkdir('/a'))
    expect(isHostError(error, 'EIO')).toBe(true)
    expect((error as HostError).message).toBe('EIO: mkdir /a: injected fault')
    expect(host.exists('/a')).toBe(false)
    await host.mkdir('/b')
    dispose()
    await host.mkdir('/a')
    expect(host.exists('/a')).toBe(true)
  })

  it('failOn takes an error or a function of the call', async () => {
    const host = createMemoryHost()
    host.faults.failOn({ method: 'filesystems.format' }, (call) => new HostError('EIO', 'mkfs', call.path ?? '', 'disk on fire'))
    host.faults.failOn({ method: 'statfs' }, new Error('plain'))
    host.addBlockDevice('/dev/sdb', 2 ** 20)
    expect((await settled(host.filesystems?.format('/dev/sdb', 'ext4') ?? Promise.resolve())).error).toMatchObject({
      message: 'EIO: mkfs /dev/sdb: disk on fire',
    })
    expect(await host.filesystems?.detect('/dev/sdb')).toBeNull()
    expect((await settled(host.statfs?.('/') ?? Promise.resolve())).error).toMatchObject({ message: 'plain' })
  })

  it('hangOn holds a call until released; then it runs and settles', async () => {
    const host = createMemoryHost()
    await host.mkdir('/m')
    const hang = host.faults.hangOn({ method: 'mount' })
    const mounting = host.mount({ source: 'tmpfs', target: '/m', fstype: 'tmpfs' })
    const held = await hang.reached()
    expect(held).toMatchObject({ method: 'mount', path: '/m' })
    expect(hang.held).toHaveLength(1)
    expect(host.mountTargets()).toEqual([])
    // Other calls are not held.
    expect(await host.isMountPoint('/m')).toBe(false)
    hang.release()
    await mounting
    expect(host.mountTargets()).toEqual(['/m'])
    expect(hang.held).toHaveLength(0)
    await host.unmount('/m')
    await host.mount({ source: 'tmpfs', target: '/m', fstype: 'tmpfs' })
  })

  it('delay adds latency on the injected clock', async () => {
    const clock = createFakeClock()
    const host = createMemoryHost({ clock })
    host.faults.delay(5_000, { method: 'unmount' })
    await host.mkdir('/m')
    await host.mount({ source: 'tmpfs', target: '/m', fstype: 'tmpfs' })
    let done = false
    const unmounting = host.unmount('/m').then(() => {
      done = true
    })
    await clock.advance(4_999)
    expect(done).toBe(false)
    expect(host.mountTargets()).toEqual(['/m'])
    await clock.advance(1)
    await unmounting
    expect(host.mountTargets()).toEqual([])
  })

  it('interceptors see every call, newest first, and may answer without the host', async () => {
    const host = createMemoryHost()
    const seen: string[] = []
    host.intercept(async (call, next) => {
      seen.push(`older ${call.method}`)
      return next()
    })
    const dispose = host.intercept(async (call, next) => {
      seen.push(`newer ${call.method}`)
      return call.method === 'readdir' ? ['invented'] : next()
    })
    await host.mkdir('/d')
    expect(seen).toEqual(['newer mkdir', 'older mkdir'])
    expect(await host.readdir('/')).toEqual(['invented'])
    dispose()
    expect(await host.readdir('/')).toEqual(['d', 'dev', 'tmp'])
    expect(seen).toEqual(['newer mkdir', 'older mkdir', 'newer readdir', 'older readdir'])
  })

  it('capability calls pass through interceptors under capability.member names', async () => {
    const host = createMemoryHost()
    const methods: string[] = []
    host.intercept((call, next) => {
      methods.push(call.method)
      return next()
    })
    host.allocateFile('/img', 2 ** 20)
    const device = await host.loopDevices?.attach('/img')
    await host.blockDevices?.size(device ?? '')
    expect(methods).toEqual(['loopDevices.attach', 'blockDevices.size'])
  })

  it('markBusy makes unmount fail with EBUSY until disposed; a lazy unmount detaches anyway', async () => {
    const host = createMemoryHost()
    await host.mkdir('/a')
    await host.mkdir('/b')
    await host.mount({ source: 'tmpfs', target: '/a', fstype: 'tmpfs' })
    await host.mount({ source: 'tmpfs', target: '/b', fstype: 'tmpfs' })
    const disposeA = host.faults.markBusy('/a')
    host.faults.markBusy('/b')
    expect(isHostError((await settled(host.unmount('/a'))).error, 'EBUSY')).toBe(true)
    disposeA()
    await host.unmount('/a')
    await host.unmount('/b', { lazy: true })
    expect(host.mountTargets()).toEqual([])
  })

  it('every call settles asynchronously', async () => {
    const host = createMemoryHost()
    const order: string[] = []
    const mkdir = host.mkdir('/x').then(() => order.push('settled'))
    order.push('after the call')
    expect(host.exists('/x')).toBe(false)
    await mkdir
    expect(order).toEqual(['after the call', 'settled'])
  })
})

describe('fault injection into file steps', () => {
  const steps = [
    { op: 'mkdir', path: '/v', recursive: true, mode: 0o777 },
    { op: 'setPermissions', path: '/v', permissions: 0o777 },
    { op: 'mkdir', path: '/p', recursive: true, mode: 0o750 },
    { op: 'writeFile', path: '/p/ready', data: '' },
  ] as const

  it.each([
    { method: 'mkdir', path: '/v', made: [] },
    { method: 'stat', path: '/v', made: ['/v'] },
    { method: 'mkdir', path: '/p', made: ['/v'] },
    { method: 'writeFile', path: '/p/ready', made: ['/v', '/p'] },
  ])('a fault on the step $method $path fails fileSteps there; the steps before it are made, none after', async ({ method, path, made }) => {
    const host = createMemoryHost()
    host.faults.failOn({ method, path }, 'EIO')
    const { error } = await settled(host.fileSteps(steps))
    expect(isHostError(error, 'EIO')).toBe(true)
    expect((error as HostError).path).toBe(path)
    expect(['/v', '/p', '/p/ready'].filter((p) => host.exists(p))).toEqual(made)
  })

  it('a step held by hangOn holds the whole call; a fault on fileSteps fails it before any step', async () => {
    const host = createMemoryHost()
    const hang = host.faults.hangOn({ method: 'writeFile' })
    const running = host.fileSteps(steps)
    expect((await hang.reached()).path).toBe('/p/ready')
    expect(host.exists('/p/ready')).toBe(false)
    hang.release()
    expect(await running).toBe(4)
    const other = createMemoryHost()
    other.faults.failOn({ method: 'fileSteps' }, 'EIO')
    expect(isHostError((await settled(other.fileSteps(steps))).error, 'EIO')).toBe(true)
    expect(other.exists('/v')).toBe(false)
  })
})
