import { runHostContract } from '@kubevol/core/testing/host-contract'
import type { MemoryHost } from './memory-host.js'
import { createMemoryHost } from './memory-host.js'

/** Swaps in the middle of a call: an interceptor runs the hook before every call, steps of a composite call included. */
const beforeEachCall = (host: MemoryHost) => (hook: () => Promise<void>) =>
  host.intercept(async (_call, next) => {
    await hook()
    return next()
  })

runHostContract('memory host', async () => {
  const host = createMemoryHost()
  await host.mkdir('/contract')
  return { host, root: '/contract', beforeEachCall: beforeEachCall(host) }
})

runHostContract('memory host without capabilities', async () => {
  const host = createMemoryHost({ capabilities: { loopDevices: false, blockDevices: false, filesystems: false, statfs: false } })
  await host.mkdir('/var/lib/kubevol', { recursive: true })
  return { host, root: '/var/lib/kubevol', beforeEachCall: beforeEachCall(host) }
})
