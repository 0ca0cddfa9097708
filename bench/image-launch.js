// How deploy/Dockerfile starts the agent, read from the Dockerfile itself, so a benchmark that runs
// kubevol "as the image starts it" follows the image when its flags change (memory.js, kubelet.js).
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

/**
 * How the image starts the agent (deploy/Dockerfile): the node flags of its ENTRYPOINT (between
 * `node` and the script) and its `ENV MALLOC_*` lines (glibc's allocator settings).
 */
export function imageLaunch() {
  const dockerfile = readFileSync(new URL('../deploy/Dockerfile', import.meta.url), 'utf8')
  const entrypoint = JSON.parse(/^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(dockerfile)?.[1] ?? '[]')
  const env = Object.fromEntries([...dockerfile.matchAll(/^ENV\s+(MALLOC_\w+)=(\S+)\s*$/gm)].map((m) => [m[1], m[2]]))
  // The script the ENTRYPOINT runs (the agent's bundle), under the image's WORKDIR: the same file here.
  const script = fileURLToPath(new URL(`../${String(entrypoint.at(-1)).replace(/^\/opt\/kubevol\//, '')}`, import.meta.url))
  return { flags: entrypoint.slice(1, -1), env, script }
}
