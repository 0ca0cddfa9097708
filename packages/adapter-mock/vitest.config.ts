import { defineProject } from 'vitest/config'

export default defineProject({
  ssr: { resolve: { conditions: ['@kubevol/source'] } },
  resolve: { conditions: ['@kubevol/source'] },
  test: { name: 'adapter-mock', include: ['src/**/*.test.ts'] },
})
