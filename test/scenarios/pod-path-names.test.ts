/**
 * Pods from any source (here the harness's, standing in for an API server) whose UID or container
 * names are not one path component are refused by the populator on that pod alone: nothing is
 * created outside the root, and a pod whose UID aliases another pod's directory cannot touch it.
 */
import type { Pod } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { afterEach, describe, expect, it } from 'vitest'
import { scenario } from './setup.js'

const ROOT = '/var/lib/kubevol'

function pod(uid: string, options: { container?: string; subPath?: string; name?: string } = {}): Pod {
  return {
    metadata: { name: options.name ?? 'p', namespace: 'default', uid },
    spec: {
      nodeName: 'node-1',
      volumes: [{ name: 'cache', emptyDir: {} }],
      containers: [{ name: options.container ?? 'main', volumeMounts: [{ name: 'cache', mountPath: '/c', ...(options.subPath ? { subPath: options.subPath } : {}) }] }],
    },
  }
}

let current: ReturnType<typeof scenario> | undefined
afterEach(async () => {
  await current?.stop()
  current = undefined
})

/** Every path on the host outside the root, with file contents. */
function outside(host: ReturnType<typeof scenario>['host']): string {
  type Dir = { children?: Record<string, Dir> }
  const tree = structuredClone(host.tree('/')) as Dir
  delete tree.children?.var?.children?.lib?.children?.kubevol
  return JSON.stringify(tree)
}

async function start() {
  const h = scenario({ plugins: createBuiltinPlugins() })
  current = h
  await h.host.mkdir('/tmp/x', { recursive: true })
  await h.host.writeFile('/tmp/x/canary', 'canary')
  await h.host.mkdir(`${ROOT}/pods`, { recursive: true })
  h.start()
  return h
}

async function outcome(h: Awaited<ReturnType<typeof start>>, p: Pod): Promise<string> {
  let result = 'pending'
  h.manager.waitForAttachAndMount(p, { timeoutMs: 5_000 }).then(
    () => (result = 'mounted'),
    (err: Error) => (result = `rejected: ${err.message}`),
  )
  await h.advanceUntil(() => result !== 'pending', { maxMs: 6_000, step: 250 })
  return result
}

describe('pod UIDs and names that are not one path component', () => {
  it.each([
    { name: 'a traversing UID', bad: pod('../../../x'), error: /metadata\.uid: Invalid value: "\.\.\/\.\.\/\.\.\/x": a pod UID must not contain '\/'/ },
    { name: 'a UID of ..', bad: pod('..'), error: /a pod UID must not be '\.\.'/ },
    { name: 'a UID of .', bad: pod('.'), error: /a pod UID must not be '\.'/ },
    { name: 'a UID with a slash', bad: pod('a/b'), error: /a pod UID must not contain '\/'/ },
    {
      name: 'a traversing container name with a subPath',
      bad: pod('bad', { container: '../../../../tmp/x/target', subPath: 'sub' }),
      error: /spec\.containers\[0\]\.name: Invalid value: "\.\.\/\.\.\/\.\.\/\.\.\/tmp\/x\/target": must not contain '\/'/,
    },
  ])('$name is refused on that pod alone', async ({ bad, error }) => {
    const h = await start()
    const before = outside(h.host)
    h.pods.setPod(pod('good', { name: 'good' }))
    h.pods.setPod(bad)
    expect(await outcome(h, bad)).toMatch(error)
    await h.advanceUntil(() => h.manager.getMountedVolumesForPod('good').size === 1)
    expect(outside(h.host)).toBe(before)
    expect(h.host.mountTargets().filter((t) => !t.startsWith(`${ROOT}/pods/good/`))).toEqual([])
    expect(new TextDecoder().decode(await h.host.readFile('/tmp/x/canary'))).toBe('canary')
  })

  it('a UID that aliases a running pod cannot touch its data, even once deleted', async () => {
    const h = await start()
    h.pods.setPod(pod('victim', { name: 'victim' }))
    await h.advanceUntil(() => h.manager.getMountedVolumesForPod('victim').size === 1)
    const data = `${ROOT}/pods/victim/volumes/kubernetes.io~empty-dir/cache/data`
    await h.host.writeFile(data, 'precious')
    const alias = pod('victim/../victim', { name: 'alias' })
    h.pods.setPod(alias)
    expect(await outcome(h, alias)).toMatch(/metadata\.uid: Invalid value: "victim\/\.\.\/victim"/)
    h.pods.deletePod('victim/../victim')
    await h.clock.advance(5_000)
    expect(h.manager.getMountedVolumesForPod('victim').size).toBe(1)
    expect(new TextDecoder().decode(await h.host.readFile(data))).toBe('precious')
  })
})
