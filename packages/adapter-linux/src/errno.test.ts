import { HostError } from '@kubevol/core'
import { describe, expect, it } from 'vitest'
import { errnoError, errnoName, hostCodeOf, toHostError } from './errno.js'

describe('errno mapping', () => {
  it.each([
    { errno: 2, name: 'ENOENT', code: 'ENOENT' },
    { errno: 16, name: 'EBUSY', code: 'EBUSY' },
    { errno: 95, name: 'ENOTSUP', code: 'ENOTSUP' },
    { errno: 116, name: 'ESTALE', code: 'EIO' },
    { errno: 107, name: 'ENOTCONN', code: 'EIO' },
    { errno: 25, name: 'ENOTTY', code: 'ENOTSUP' },
    { errno: 36, name: 'ENAMETOOLONG', code: 'EINVAL' },
  ])('errno $errno is $name and becomes $code', ({ errno, name, code }) => {
    expect(errnoName(errno)).toBe(name)
    expect(hostCodeOf(name)).toBe(code)
    expect(errnoError(errno, 'stat', '/x').code).toBe(code)
  })

  it('puts the call, the path, the detail and the kernel text in the message; folded codes keep their name', () => {
    expect(errnoError(16, 'umount', '/var/lib/kubevol/pods/u1').message).toBe('EBUSY: umount /var/lib/kubevol/pods/u1: resource busy or locked')
    expect(errnoError(2, 'mount', '/m', 'mount -t tmpfs tmpfs /m').message).toBe('ENOENT: mount /m: mount -t tmpfs tmpfs /m: no such file or directory')
    expect(errnoError(116, 'stat', '/nfs').message).toBe('EIO: stat /nfs: ESTALE: stale file handle')
  })

  it('maps node:fs errors by their code and passes HostErrors through', () => {
    const fsError = Object.assign(new Error('ENOENT: no such file'), { code: 'ENOENT', errno: -2, syscall: 'open' })
    const mapped = toHostError(fsError, 'read', '/x')
    expect(mapped).toBeInstanceOf(HostError)
    expect(mapped).toMatchObject({ code: 'ENOENT', syscall: 'read', path: '/x', cause: fsError })
    const original = new HostError('EBUSY', 'rmdir', '/m')
    expect(toHostError(original, 'x', '/y')).toBe(original)
    expect(toHostError(new Error('boom'), 'read', '/x')).toMatchObject({ code: 'EIO', message: 'EIO: read /x: boom' })
  })
})
