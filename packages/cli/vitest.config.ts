import { defineProject } from 'vitest/config'

export default defineProject({
  ssr: { resolve: { conditions: ['@kubevol/source'] } },
  resolve: { conditions: ['@kubevol/source'] },
  test: {
    name: 'cli',
    include: ['src/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 30_000,
  },
})
