import { fileURLToPath } from 'node:url'
import { defineProject } from 'vitest/config'

export default defineProject({
  ssr: { resolve: { conditions: ['@kubevol/source'] } },
  resolve: { conditions: ['@kubevol/source'] },
  test: {
    name: 'adapter-linux',
    include: ['src/**/*.test.ts'],
    // One child process per test file, each in its own private mount namespace (see the preload).
    pool: 'forks',
    isolate: true,
    execArgv: ['--require', fileURLToPath(new URL('./test/mount-namespace.cjs', import.meta.url))],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
})
