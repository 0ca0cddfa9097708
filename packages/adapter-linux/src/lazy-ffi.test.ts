// Its own file (its own process): any system call made earlier would have loaded the bindings.
import { expect, it } from 'vitest'
import * as api from './index.js'
import { isLibcLoaded } from './libc.js'

it('importing the package and creating a host loads no FFI library; file calls do not need it', async () => {
  const host = api.createLinuxHost()
  expect(await host.lstat('/definitely/not/here')).toBeNull()
  expect(await host.readdir('/')).toContain('proc')
  expect(api.parseMountInfo('1 0 0:1 / / rw - rootfs rootfs rw')).toHaveLength(1)
  expect(isLibcLoaded()).toBe(false)
})

it('exports exactly these names', () => {
  expect(Object.keys(api).sort()).toMatchSnapshot()
})
