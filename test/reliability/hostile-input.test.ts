/**
 * Hostile input on the in-memory host: hand-written and generated pod manifests with wrong types,
 * missing fields, huge sizes, unicode and control characters, path traversal in volume names,
 * configMap keys and item paths, subPath and subPathExpr, a symlink swapped in under a subPath
 * between the check and the bind, and hostPath types that do not match. Each fails its own pod with
 * its own error and nothing else: a well-formed pod next to it is mounted, nothing is mounted or
 * written outside the kubevol root, and canary files elsewhere are untouched.
 */
import { createMemoryHost } from '@kubevol/adapter-mock'
import type { Pod } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { type Harness, createHarness } from '@kubevol/core/testing'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { createFastClock } from './fast-clock.js'

const ROOT = '/var/lib/kubevol'
const CANARIES = ['/etc/canary', '/var/lib/canary', '/var/lib/kubevol-canary', '/srv/dir/canary']

interface World {
  readonly h: Harness
  readonly host: ReturnType<typeof createMemoryHost>
  /** Everything outside the kubevol root (and, with `hostPathDir`, outside /srv/dir but its canary), as JSON. */
  readonly outside: (hostPathDir?: boolean) => string
}

async function world(): Promise<World> {
  const clock = createFastClock()
  const host = createMemoryHost({ clock })
  await host.mkdir('/srv/dir', { recursive: true })
  host.allocateFile('/srv/file', 10)
  for (const canary of CANARIES) {
    await host.mkdir(canary.slice(0, canary.lastIndexOf('/')), { recursive: true })
    await host.writeFile(canary, 'canary')
  }
  const h = createHarness({ host, clock, plugins: createBuiltinPlugins() })
  h.objects.put('ConfigMap', { metadata: { name: 'cfg', namespace: 'default' }, data: { k: 'v' } })
  h.objects.put('ConfigMap', { metadata: { name: 'evil', namespace: 'default' }, data: { '../../../../escape': 'x', 'a/b': 'y', '..data': 'z' } })
  h.objects.put('Secret', { metadata: { name: 'sec', namespace: 'default' }, data: { k: 'dg==' } })
  // Everything outside the kubevol root, as JSON: it must not change.
  const outside = (hostPathDir = false): string => {
    type Dir = { children: Record<string, unknown> }
    const tree = host.tree('/') as Dir
    const varLib = ((tree.children.var as Dir).children.lib as Dir).children
    const { kubevol: _ignored, ...rest } = varLib
    // A hostPath volume of type DirectoryOrCreate may create what it names under /srv/dir.
    const srvDir = ((tree.children.srv as Dir).children.dir as Dir).children
    const srv = hostPathDir ? { ...(tree.children.srv as Dir).children, dir: { canary: srvDir.canary } } : tree.children.srv
    return JSON.stringify({ ...tree.children, srv, var: { lib: rest } })
  }
  h.start()
  return { h, host, outside }
}

function rawPod(uid: string, volumes: unknown, mounts: readonly Record<string, unknown>[], env: unknown[] = []): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `pod-${uid}`, namespace: 'default', uid },
    spec: { nodeName: 'node-1', volumes, containers: [{ name: 'main', image: 'busybox', env, volumeMounts: mounts }] },
  } as unknown as Pod
}

const goodPod = rawPod('good', [{ name: 'ok', emptyDir: {} }, { name: 'cfg', configMap: { name: 'cfg' } }], [
  { name: 'ok', mountPath: '/ok' },
  { name: 'cfg', mountPath: '/cfg' },
])

/** Adds the pods; resolves with the bad pod's outcome: its rejection and the Warning events about it. */
async function run(w: World, bad: Pod): Promise<{ outcome: string; errors: string }> {
  const { h } = w
  let outcome = 'pending'
  h.pods.setPod(goodPod)
  h.pods.setPod(bad)
  h.manager.waitForAttachAndMount(bad, { timeoutMs: 10_000 }).then(
    () => {
      outcome = 'mounted'
    },
    (err: Error) => {
      outcome = `rejected: ${err.message}`
    },
  )
  await h.advanceUntil(() => outcome !== 'pending', { maxMs: 11_000, step: 500 })
  const events = h.events.filter((e) => e.type === 'Warning' && e.target.metadata.uid === bad.metadata.uid).map((e) => e.message)
  return { outcome, errors: [outcome, ...events].join('\n') }
}

/** Nothing escaped: the good pod is mounted, nothing is mounted or changed outside the root. */
async function expectContained(w: World, before: string, hostPathDir = false): Promise<void> {
  expect(w.h.manager.getMountedVolumesForPod('good').size).toBe(2)
  expect(w.host.mountTargets().filter((t) => !t.startsWith(`${ROOT}/`))).toEqual([])
  for (const m of await w.host.mounts()) {
    if (m.target.startsWith(`${ROOT}/pods/`) && !m.target.startsWith(`${ROOT}/pods/good/`)) {
      // A bad pod's mounts (if any) never bind something from outside the root.
      expect(m.root.startsWith('/etc') || m.root.startsWith('/srv') || m.root === '/').toBe(false)
    }
  }
  expect(w.outside(hostPathDir)).toBe(before)
  for (const canary of CANARIES) expect(new TextDecoder().decode(await w.host.readFile(canary))).toBe('canary')
  expect(w.host.violations).toEqual([])
}

const mount = (name: unknown, extra: Record<string, unknown> = {}) => [{ name, mountPath: '/m', ...extra }]

const cases: { name: string; volumes: unknown; mounts?: Record<string, unknown>[]; env?: unknown[]; error: RegExp }[] = [
  { name: 'path traversal in a volume name', volumes: [{ name: '../../../../../../etc', emptyDir: {} }], error: /spec\.volumes\[0\]\.name: Invalid value: "\.\.\/\.\.\/.*RFC 1123 label/ },
  { name: 'a slash in a volume name', volumes: [{ name: 'a/b', emptyDir: {} }], error: /Invalid value: "a\/b"/ },
  { name: 'a NUL in a volume name', volumes: [{ name: 'a\u0000b', emptyDir: {} }], error: /Invalid value: "a\\u0000b"/ },
  { name: 'a newline in a volume name', volumes: [{ name: 'a\nb', emptyDir: {} }], error: /Invalid value: "a\\nb"/ },
  { name: 'unicode in a volume name', volumes: [{ name: 'données\u202e', emptyDir: {} }], error: /Invalid value: "données/ },
  { name: 'a huge volume name', volumes: [{ name: 'x'.repeat(100_000), emptyDir: {} }], error: /must be no more than 63 characters/ },
  { name: 'a missing volume name', volumes: [{ emptyDir: {} }], mounts: mount('v'), error: /spec\.volumes\[0\]\.name: Required value/ },
  { name: 'a number as volume name', volumes: [{ name: 42, emptyDir: {} }], error: /spec\.volumes\[0\]\.name: Required value/ },
  { name: 'two volumes of one name', volumes: [{ name: 'v', emptyDir: {} }, { name: 'v', emptyDir: {} }], error: /Duplicate value: "v"/ },
  { name: 'volumes that are not a list', volumes: 'nope', mounts: mount('v'), error: /spec\.volumes: Invalid value: must be a list/ },
  { name: 'a volume that is null', volumes: [null], mounts: mount('v'), error: /spec\.volumes\[0\]: Invalid value: must be an object/ },
  { name: 'a source of the wrong type', volumes: [{ name: 'v', emptyDir: 'yes' }], error: /spec\.volumes\[0\]\.emptyDir: Invalid value: must be an object/ },
  { name: 'no source', volumes: [{ name: 'v' }], error: /no volume plugin matched/ },
  { name: 'two sources', volumes: [{ name: 'v', emptyDir: {}, hostPath: { path: '/srv/dir' } }], error: /multiple volume plugins matched/ },
  { name: 'a sizeLimit that is not a quantity', volumes: [{ name: 'v', emptyDir: { medium: 'Memory', sizeLimit: 'lots' } }], error: /lots/ },
  { name: 'a setuid defaultMode', volumes: [{ name: 'v', configMap: { name: 'cfg', defaultMode: 0o4755 } }], error: /defaultMode: Invalid value: "2541": must be a number between 0 and 0777/ },
  { name: 'a huge item mode', volumes: [{ name: 'v', secret: { secretName: 'sec', items: [{ key: 'k', path: 'k', mode: 99_999_999 }] } }], error: /items\[0\]\.mode: Invalid value/ },
  { name: 'items that are not a list', volumes: [{ name: 'v', configMap: { name: 'cfg', items: 'k' } }], error: /configMap\.items: Invalid value: must be a list/ },
  { name: 'a traversing configMap item path', volumes: [{ name: 'v', configMap: { name: 'cfg', items: [{ key: 'k', path: '../../../../escape' }] } }], error: /must not contain '\.\.'/ },
  { name: 'an absolute configMap item path', volumes: [{ name: 'v', configMap: { name: 'cfg', items: [{ key: 'k', path: '/etc/canary' }] } }], error: /invalid path: must be relative path: \/etc\/canary/ },
  { name: 'a configMap item path under ..data', volumes: [{ name: 'v', configMap: { name: 'cfg', items: [{ key: 'k', path: '..data/x' }] } }], error: /must not start with '\.\.'/ },
  { name: 'traversing configMap keys', volumes: [{ name: 'v', configMap: { name: 'evil' } }], error: /must not contain '\.\.'|must not start with '\.\.'/ },
  { name: 'a missing configMap key', volumes: [{ name: 'v', configMap: { name: 'cfg', items: [{ key: 'nope', path: 'x' }] } }], error: /non-existent config key: nope/ },
  { name: 'a traversing secret item path', volumes: [{ name: 'v', secret: { secretName: 'sec', items: [{ key: 'k', path: 'a/../../b' }] } }], error: /must not contain '\.\.'/ },
  { name: 'a traversing projected item path', volumes: [{ name: 'v', projected: { sources: [{ configMap: { name: 'cfg', items: [{ key: 'k', path: '../x' }] } }] } }], error: /must not contain '\.\.'/ },
  { name: 'a traversing downwardAPI path', volumes: [{ name: 'v', downwardAPI: { items: [{ path: '../../x', fieldRef: { fieldPath: 'metadata.name' } }] } }], error: /must not contain '\.\.'/ },
  { name: 'a hostPath Directory that is a file', volumes: [{ name: 'v', hostPath: { path: '/srv/file', type: 'Directory' } }], error: /is not a directory/ },
  { name: 'a hostPath File that is a directory', volumes: [{ name: 'v', hostPath: { path: '/srv/dir', type: 'File' } }], error: /is not a file/ },
  { name: 'a hostPath Socket that is a directory', volumes: [{ name: 'v', hostPath: { path: '/srv/dir', type: 'Socket' } }], error: /is not a socket/ },
  { name: 'an unknown hostPath type', volumes: [{ name: 'v', hostPath: { path: '/srv/dir', type: 'Banana' } }], error: /Banana/ },
  { name: 'a relative hostPath', volumes: [{ name: 'v', hostPath: { path: 'srv/dir' } }], error: /srv\/dir/ },
  { name: 'a traversing hostPath', volumes: [{ name: 'v', hostPath: { path: '/srv/../etc' } }], error: /\.\./ },
  { name: 'a hostPath path of the wrong type', volumes: [{ name: 'v', hostPath: { path: 7 } }], error: /path/ },
  { name: 'a traversing subPath', volumes: [{ name: 'v', emptyDir: {} }], mounts: mount('v', { subPath: '../../../../etc' }), error: /must not contain '\.\.'/ },
  { name: 'an absolute subPath', volumes: [{ name: 'v', emptyDir: {} }], mounts: mount('v', { subPath: '/etc' }), error: /must be a relative path/ },
  { name: 'a control character in a subPath', volumes: [{ name: 'v', emptyDir: {} }], mounts: mount('v', { subPath: 'a\u0001b' }), error: /control characters/ },
  {
    name: 'a subPathExpr that expands to a traversal',
    volumes: [{ name: 'v', emptyDir: {} }],
    mounts: mount('v', { subPathExpr: '$(DIR)' }),
    env: [{ name: 'DIR', value: '../../../../etc' }],
    error: /must not contain '\.\.'/,
  },
  {
    name: 'a subPathExpr from a field with a traversal',
    volumes: [{ name: 'v', emptyDir: {} }],
    mounts: mount('v', { subPathExpr: '../$(POD)' }),
    env: [{ name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
    error: /must not contain '\.\.'/,
  },
]

describe('hostile manifests fail their own pod and nothing else', () => {
  it.each(cases)('$name', async ({ volumes, mounts, env, error }) => {
    const w = await world()
    const before = w.outside()
    const names = Array.isArray(volumes) ? volumes.map((v) => (v as { name?: unknown } | null)?.name).filter((n) => n !== undefined) : []
    const bad = rawPod('bad', volumes, mounts ?? names.slice(0, 1).map((n) => ({ name: n, mountPath: '/m' })), env)
    const { outcome, errors } = await run(w, bad)
    expect(outcome).toMatch(/^rejected: /)
    expect(errors).toMatch(error)
    await expectContained(w, before)
    await w.h.stop()
  })

  it('a symlink swapped in under a subPath between the check and the bind does not escape', async () => {
    const w = await world()
    const before = w.outside()
    const dir = `${ROOT}/pods/bad/volumes/kubernetes.io~empty-dir/v`
    let swapped = false
    w.host.intercept(async (call, next) => {
      const result = await next()
      // What a container of the pod could do: make the sub directory as soon as the volume exists…
      if (call.method === 'writeFile' && String(call.path).startsWith(`${ROOT}/pods/bad/`) && String(call.path).endsWith('/ready')) {
        await w.host.mkdir(`${dir}/logs`, { recursive: true }).catch(() => undefined)
      }
      return result
    })
    w.host.intercept(async (call, next) => {
      // …and swap it for a symlink to /etc after the manager has looked at it, before the bind.
      if (call.method === 'subPaths.bind' && !swapped) {
        swapped = true
        await w.host.removeAll(`${dir}/logs`)
        await w.host.symlink('/etc', `${dir}/logs`)
      }
      return next()
    })
    const bad = rawPod('bad', [{ name: 'v', emptyDir: {} }], mount('v', { subPath: 'logs' }))
    const { outcome, errors } = await run(w, bad)
    expect(swapped).toBe(true)
    expect(outcome).toMatch(/^rejected: /)
    expect(errors).toMatch(/not within volume path/)
    await expectContained(w, before)
    await w.h.stop()
  })
})

describe('generated manifests', () => {
  const seed = process.env.KUBEVOL_FC_SEED ? Number(process.env.KUBEVOL_FC_SEED) : (Date.now() ^ (Math.random() * 0x7fffffff)) | 0
  const numRuns = process.env.KUBEVOL_FC_RUNS ? Math.max(50, Math.floor(Number(process.env.KUBEVOL_FC_RUNS) / 10)) : 200
  // Strings a hostile manifest may hold: traversal pieces, separators, control and unicode characters.
  const piece = fc.oneof(
    fc.constantFrom('..', '.', '/', '//', '..data', '\u0000', '\n', '\u202e', 'é', 'etc', 'canary', '~', ' ', '-', 'a'),
    fc.string({ unit: 'grapheme', maxLength: 4 }),
  )
  const hostile = fc.array(piece, { minLength: 1, maxLength: 8 }).map((parts) => parts.join(''))
  const volumeArb = fc.oneof(
    hostile.map((name) => ({ volume: { name, emptyDir: {} }, mountAs: name })),
    hostile.map((path) => ({ volume: { name: 'v', configMap: { name: 'cfg', items: [{ key: 'k', path }] } }, mountAs: 'v' })),
    hostile.map((key) => ({ volume: { name: 'v', configMap: { name: 'cfg', items: [{ key, path: 'k' }] } }, mountAs: 'v' })),
    hostile.map((subPath) => ({ volume: { name: 'v', emptyDir: {} }, mountAs: 'v', subPath })),
    hostile.map((path) => ({ volume: { name: 'v', hostPath: { path: `/srv/dir/${path}`, type: 'DirectoryOrCreate' } }, mountAs: 'v' })),
    fc.anything().map((value) => ({ volume: { name: 'v', emptyDir: value }, mountAs: 'v' })),
  )

  it(`never escape the kubevol root (${numRuns} manifests)`, async () => {
    console.log(`hostile manifests: seed ${seed}; replay with KUBEVOL_FC_SEED=${seed} npx vitest run --project integration test/reliability/hostile-input.test.ts`)
    await fc.assert(
      fc.asyncProperty(volumeArb, async ({ volume, mountAs, subPath }: { volume: unknown; mountAs: string; subPath?: string }) => {
        const w = await world()
        const hostPathDir = (volume as { hostPath?: unknown }).hostPath !== undefined
        const before = w.outside(hostPathDir)
        const bad = rawPod('bad', [volume], mount(mountAs, subPath === undefined ? {} : { subPath }))
        const { outcome } = await run(w, bad)
        // Either it is mounted inside its own directory, or it fails; never anything else.
        expect(outcome === 'mounted' || outcome.startsWith('rejected: ')).toBe(true)
        await expectContained(w, before, hostPathDir)
        await w.h.stop()
      }),
      { seed, numRuns },
    )
  }, 600_000)
})
