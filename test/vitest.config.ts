import { fileURLToPath } from 'node:url'
import { defineProject } from 'vitest/config'

// Tests across packages: whole-manager scenarios on the in-memory host, and the packed packages.
export default defineProject({
  ssr: { resolve: { conditions: ['@kubevol/source'] } },
  resolve: { conditions: ['@kubevol/source'] },
  test: {
    name: 'integration',
    include: ['**/*.test.ts'],
    testTimeout: 180_000,
    hookTimeout: 180_000,
    // Forks, each in a private mount namespace when root (see the preload), so the hostile-node
    // suite's real mounts cannot reach the machine's.
    pool: 'forks',
    execArgv: ['--require', fileURLToPath(new URL('../packages/agent/test/mount-namespace.cjs', import.meta.url))],
  },
})
