import { defineProject } from 'vitest/config'

// Tests across packages: whole-manager scenarios on the in-memory host, and the packed packages.
export default defineProject({
  ssr: { resolve: { conditions: ['@kubevol/source'] } },
  resolve: { conditions: ['@kubevol/source'] },
  test: { name: 'integration', include: ['**/*.test.ts'], testTimeout: 180_000, hookTimeout: 180_000 },
})
