import { runHostContract } from '@kubevol/core/testing/host-contract'
import { describeAsRoot } from '../test/as-root.js'
import { cleanupTempRoot, makeTempRoot } from '../test/temp-root.js'
import { createLinuxHost } from './create-linux-host.js'

describeAsRoot('linux host on the real kernel', () => {
  runHostContract('linux host', async () => {
    const root = makeTempRoot('kubevol-contract-')
    const host = createLinuxHost({ callTimeoutMs: 20_000 })
    return {
      host,
      root,
      cleanup: async () => {
        host.close()
        cleanupTempRoot(root)
      },
    }
  })
})
