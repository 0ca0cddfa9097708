import { fileURLToPath } from 'node:url'
import { defineProject } from 'vitest/config'

export default defineProject({
  ssr: { resolve: { conditions: ['@kubevol/source'] } },
  resolve: { conditions: ['@kubevol/source'] },
  test: {
    name: 'agent',
    include: ['src/**/*.test.ts'],
    // Forks, each in a private mount namespace when root (see the preload), so the Linux-host test
    // cannot reach the machine's mounts.
    pool: 'forks',
    execArgv: ['--require', fileURLToPath(new URL('./test/mount-namespace.cjs', import.meta.url))],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
})
