#!/usr/bin/env node
// The `kubevol` command: runs the built CLI in ../dist. Committed (not built), so that npm links it
// at install time, before any build, and `npx kubevol` works in a fresh clone after `npm ci && npm start`.
import { existsSync } from 'node:fs'

const main = new URL('../dist/main.js', import.meta.url)
if (!existsSync(main)) {
  process.stderr.write('error: the kubevol CLI is not built (packages/cli/dist/main.js is missing): run `npm run build` in the repository first\n')
  process.exit(1)
}
await import(main.href)
