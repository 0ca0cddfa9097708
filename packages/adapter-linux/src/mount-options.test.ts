import { describe, expect, it } from 'vitest'
import * as c from './constants.js'
import { describeMountCall, lockedFlags, parseMountOptions, planMount } from './mount-options.js'

describe('parseMountOptions', () => {
  it.each([
    { options: ['ro'], flags: c.MS_RDONLY, data: [] },
    { options: ['ro', 'rw'], flags: 0, data: [] },
    { options: ['nosuid', 'nodev', 'noexec', 'noatime'], flags: c.MS_NOSUID | c.MS_NODEV | c.MS_NOEXEC | c.MS_NOATIME, data: [] },
    { options: ['size=64m', 'mode=0755'], flags: 0, data: ['size=64m', 'mode=0755'] },
    { options: ['defaults', '_netdev', 'nofail', 'x-systemd.automount', 'comment=x'], flags: 0, data: [] },
    { options: ['context="a:b:c:s0:c1,c2"', 'relatime'], flags: c.MS_RELATIME, data: ['context="a:b:c:s0:c1,c2"'] },
    { options: ['rbind'], flags: c.MS_BIND | c.MS_REC, data: [] },
  ])('$options → flags $flags, data $data', ({ options, flags, data }) => {
    expect(parseMountOptions(options)).toEqual({ flags, data })
  })
})

describe('planMount', () => {
  it('a filesystem mount is one call with flags and data', () => {
    expect(planMount({ source: 'tmpfs', target: '/m', fstype: 'tmpfs', readOnly: true, options: ['size=1m', 'nosuid'] })).toEqual([
      { source: 'tmpfs', target: '/m', fstype: 'tmpfs', flags: c.MS_RDONLY | c.MS_NOSUID, data: 'size=1m' },
    ])
  })

  it('a plain bind is one call; a recursive bind adds MS_REC', () => {
    expect(planMount({ source: '/s', target: '/t', bind: true })).toEqual([{ source: '/s', target: '/t', fstype: null, flags: c.MS_BIND, data: null }])
    expect(planMount({ source: '/s', target: '/t', bind: true, recursive: true })[0]?.flags).toBe(c.MS_BIND | c.MS_REC)
  })

  it('a read-only bind is a bind, then a remount of the bind that keeps the locked flags', () => {
    expect(planMount({ source: '/s', target: '/t', bind: true, readOnly: true })).toEqual([
      { source: '/s', target: '/t', fstype: null, flags: c.MS_BIND, data: null },
      { source: '/s', target: '/t', fstype: null, flags: c.MS_BIND | c.MS_REMOUNT | c.MS_RDONLY, data: null, keepLockedFlags: true },
    ])
  })

  it('bind options in `options` act like the request flags (mount -o bind,ro)', () => {
    expect(planMount({ source: '/s', target: '/t', options: ['bind', 'ro'] }).map((call) => call.flags)).toEqual([c.MS_BIND, c.MS_BIND | c.MS_REMOUNT | c.MS_RDONLY])
  })

  it('a remount of a bind changes only that mount; read-write clears MS_RDONLY', () => {
    expect(planMount({ source: '/s', target: '/t', bind: true, remount: true, readOnly: false })).toEqual([
      { source: '/s', target: '/t', fstype: null, flags: c.MS_BIND | c.MS_REMOUNT, data: null, keepLockedFlags: true },
    ])
  })

  it('a filesystem remount passes its data', () => {
    expect(planMount({ source: 'tmpfs', target: '/m', remount: true, options: ['size=2m'] })).toEqual([
      { source: 'tmpfs', target: '/m', fstype: null, flags: c.MS_REMOUNT, data: 'size=2m' },
    ])
  })

  it.each([
    { propagation: 'shared', flag: c.MS_SHARED },
    { propagation: 'slave', flag: c.MS_SLAVE },
    { propagation: 'private', flag: c.MS_PRIVATE },
  ] as const)('propagation $propagation is a last call on the target alone', ({ propagation, flag }) => {
    const calls = planMount({ source: 'tmpfs', target: '/m', fstype: 'tmpfs', propagation })
    expect(calls.at(-1)).toEqual({ source: null, target: '/m', fstype: null, flags: flag, data: null })
  })
})

describe('lockedFlags and describeMountCall', () => {
  it('carries nosuid, nodev, noexec and the atime flags, never read-only', () => {
    expect(lockedFlags(c.ST_RDONLY | c.ST_NOSUID | c.ST_NODEV | c.ST_NOEXEC | c.ST_RELATIME)).toBe(c.MS_NOSUID | c.MS_NODEV | c.MS_NOEXEC | c.MS_RELATIME)
    expect(lockedFlags(0)).toBe(0)
  })

  it('reads like the mount command', () => {
    expect(describeMountCall({ source: 'tmpfs', target: '/m', fstype: 'tmpfs', flags: c.MS_RDONLY, data: 'size=1m' })).toBe('mount -t tmpfs -o ro,size=1m tmpfs /m')
    expect(describeMountCall({ source: null, target: '/m', fstype: null, flags: c.MS_SHARED, data: null })).toBe('mount -o make-shared none /m')
  })
})
