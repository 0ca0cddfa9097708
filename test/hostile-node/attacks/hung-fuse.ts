/**
 * Item 5: one hung file system must hold up only its own volumes. A pod's hostPath volumes live on
 * a bindfs mount whose daemon is stopped (SIGSTOP: every call on it hangs): one with a type check
 * (a stat), one with a subPath (a bind). A pod with plain emptyDirs, added while those calls hang,
 * is mounted within a few seconds; `/livez` answers; once the daemon runs again the hung pod is
 * mounted too.
 */
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { type Fuse, goodPod, podYaml, startFuse } from '../harness/fixtures.js'
import type { HostileNode } from '../harness/node.js'
import { until } from '../harness/processes.js'
import type { Attack } from './common.js'

/** How long the plain pod may take while another pod's calls hang. */
const FEW_SECONDS = 5_000

/** Starts the agent (unless it runs), freezes a FUSE daemon under the `hung` pod and waits until its calls hang. */
export async function hangAPod(n: HostileNode): Promise<Fuse> {
  const fuse = startFuse(n, 'hung', { 'dir/file': 'on fuse\n', 'sub/file': 'on fuse\n' })
  if (!n.agent) await n.start()
  fuse.freeze()
  n.write(
    'hung.yaml',
    podYaml({
      name: 'hung',
      uid: 'hung',
      volumes: [
        { name: 'typed', hostPath: { path: join(fuse.mountPoint, 'dir'), type: 'Directory' } },
        { name: 'sub', hostPath: { path: fuse.mountPoint } },
      ],
      mounts: [
        { name: 'typed', mountPath: '/typed' },
        { name: 'sub', mountPath: '/sub', subPath: 'sub' },
      ],
    }),
  )
  await until('the hung pod to be taken up', async () => ((await n.pod('hung'))?.volumes.length ?? 0) === 2, 10_000)
  // Let the calls reach the frozen daemon.
  await new Promise((resolve) => setTimeout(resolve, 1_000))
  return fuse
}

export const hungFuse: Attack = (node) => {
  it(`item 5: with a FUSE daemon stopped under one pod, a plain emptyDir pod is mounted within ${FEW_SECONDS / 1000} s`, async () => {
    const n = node()
    const fuse = await hangAPod(n)
    const added = Date.now()
    n.write('fine.yaml', goodPod('fine'))
    let late: Error | undefined
    await n.waitMounted('fine', 2, FEW_SECONDS).catch((err: Error) => (late = err))
    const took = Date.now() - added
    const live = await fetch(`${n.agent?.url}/livez`)
    expect(late?.message, `the plain pod waited on the hung one (${took} ms)`).toBeUndefined()
    expect(live.status, '/livez').toBe(200)
    const hung = await n.pod('hung')
    expect(hung?.volumes.some((v) => v.phase !== 'mounted'), 'the hung pod is held up, as it should be').toBe(true)

    fuse.resume()
    await n.waitMounted('hung', 2, 20_000)
  }, 90_000)
}
