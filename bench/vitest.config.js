import { defineProject } from 'vitest/config'

// Unit tests of the benchmarks' own arithmetic; the benchmarks themselves run from `npm run bench`, never here.
export default defineProject({
  test: { name: 'bench', include: ['*.test.js'] },
})
