#!/usr/bin/env node
/**
 * `kubevol-oci-runner MANIFEST [--root-dir DIR] [--work-dir DIR] [--runtime crun]`: runs the Pods of
 * a manifest with crun on the volumes kubevol mounts, printing each container's output. As root, in
 * the host's mount namespace (or one where cgroups are not hybrid: crun refuses a hybrid layout).
 */
import { readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { runManifest } from './node.js'

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { 'root-dir': { type: 'string' }, 'work-dir': { type: 'string' }, runtime: { type: 'string' } },
})
const [manifest] = positionals
if (!manifest) {
  process.stderr.write('usage: kubevol-oci-runner MANIFEST [--root-dir DIR] [--work-dir DIR] [--runtime crun]\n')
  process.exit(2)
}
const results = await runManifest(readFileSync(manifest, 'utf8'), {
  ...(values['root-dir'] ? { rootDir: values['root-dir'] } : {}),
  workDir: values['work-dir'] ?? join(tmpdir(), 'kubevol-oci-runner'),
  ...(values.runtime ? { runtime: { runtime: values.runtime } } : {}),
})
let failed = false
for (const [pod, exits] of results) {
  for (const exit of exits) {
    process.stdout.write(`${pod} ${exit.id} exited ${exit.exitCode}\n${exit.stdout}${exit.stderr}`)
    failed ||= exit.exitCode !== 0
  }
}
process.exit(failed ? 1 : 0)
