import { defineProject } from 'vitest/config'

export default defineProject({
  ssr: { resolve: { conditions: ['@kubevol/source'] } },
  resolve: { conditions: ['@kubevol/source'] },
  test: {
    name: 'docs',
    include: ['test/**/*.test.ts', 'examples/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 240_000,
  },
})
