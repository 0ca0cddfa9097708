// Every Host passes the same contract suite. A new host adapter runs it in its own test file, like this
// one does for the in-memory host; the Linux host runs it on the real kernel.
import { createMemoryHost } from '@kubevol/adapter-mock'
import { runHostContract } from '@kubevol/core/testing/host-contract'

runHostContract('the in-memory host', async () => {
  const host = createMemoryHost()
  await host.mkdir('/contract', { recursive: true })
  return { host, root: '/contract' }
})
