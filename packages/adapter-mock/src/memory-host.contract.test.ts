import { runHostContract } from '@kubevol/core/testing/host-contract'
import { createMemoryHost } from './memory-host.js'

runHostContract('memory host', async () => {
  const host = createMemoryHost()
  await host.mkdir('/contract')
  return { host, root: '/contract' }
})

runHostContract('memory host without capabilities', async () => {
  const host = createMemoryHost({ capabilities: { loopDevices: false, blockDevices: false, filesystems: false, statfs: false } })
  await host.mkdir('/var/lib/kubevol', { recursive: true })
  return { host, root: '/var/lib/kubevol' }
})
