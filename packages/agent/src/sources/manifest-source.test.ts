import { mkdirSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { NotFoundError, type Pod, type Volume, silentLogger } from '@kubevol/core'
import { resolveVolumeSpec } from '@kubevol/core/engine'
import { afterEach, describe, expect, it } from 'vitest'
import { tempDir, until } from '../../test/helpers.js'
import { type ManifestSource, createManifestSource, staticPodUID } from './manifest-source.js'

const pod = (name: string, extra = '') => `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
spec:
  containers: [{ name: c, volumeMounts: [{ name: s, mountPath: /s }] }]
  volumes: [{ name: s, emptyDir: {} }]
${extra}`

const sources: ManifestSource[] = []
const dirs: { cleanup(): void }[] = []
afterEach(() => {
  for (const s of sources.splice(0)) s.stop()
  for (const d of dirs.splice(0)) d.cleanup()
})

function create(dir: string, rescanMs = 60_000): ManifestSource {
  const source = createManifestSource({ dir, nodeName: 'n1', rescanMs, debounceMs: 5, logger: silentLogger })
  sources.push(source)
  return source
}

const names = (s: ManifestSource) => s.pods.getPods().map((p) => p.metadata.name).sort()

describe('the manifest directory source', () => {
  it('is ready after the first read and follows added, changed and removed files through the watch', async () => {
    const d = tempDir()
    dirs.push(d)
    d.write('a.yaml', pod('a'))
    const source = create(d.dir)
    expect(source.pods.allReady()).toBe(false)
    await source.start()
    expect(source.pods.allReady()).toBe(true)
    expect(names(source)).toEqual(['a'])
    const a = source.pods.getPods()[0]
    expect(a?.spec?.nodeName).toBe('n1')
    expect(a?.metadata).toMatchObject({ namespace: 'default', uid: expect.stringMatching(/^[0-9a-f]{32}$/), annotations: { 'kubernetes.io/config.source': 'file' } })
    expect(staticPodUID({ a: 1 }, 'n1', '/f')).not.toBe(staticPodUID({ a: 1 }, 'n2', '/f'))

    // Written elsewhere and renamed in, as editors and ConfigMap mounts do.
    writeFileSync(join(d.dir, '.b.tmp'), pod('b'))
    renameSync(join(d.dir, '.b.tmp'), join(d.dir, 'b.yml'))
    await until('b seen', () => names(source).includes('b'))

    const before = a?.metadata.uid
    d.write('a.yaml', pod('a', 'status: { phase: Pending }\n'))
    await until('a replaced', () => source.pods.getPods().find((p) => p.metadata.name === 'a')?.metadata.uid !== before)

    unlinkSync(join(d.dir, 'a.yaml'))
    await until('a gone', () => !names(source).includes('a'))
    expect(source.pods.shouldPodRuntimeBeRemoved(before as string)).toBe(true)
  })

  it('serves the objects of the directory and announces their changes', async () => {
    const d = tempDir()
    dirs.push(d)
    d.write('cm.yaml', 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: c, namespace: team }\ndata: { k: v }\n')
    const source = create(d.dir)
    await source.start()
    let changes = 0
    source.objects.subscribe(() => changes++)
    expect((await source.objects.getConfigMap?.('team', 'c'))?.data).toEqual({ k: 'v' })
    await expect(source.objects.getConfigMap?.('default', 'c')).rejects.toBeInstanceOf(NotFoundError)
    d.write('cm.yaml', 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: c, namespace: team }\ndata: { k: w }\n')
    await until('the change announced', () => changes > 0)
    expect((await source.objects.getConfigMap?.('team', 'c'))?.data).toEqual({ k: 'w' })
  })

  it('ignores pods of other nodes and reports a duplicate with both places', async () => {
    const d = tempDir()
    dirs.push(d)
    d.write('a.yaml', pod('a'))
    d.write('b.yaml', pod('a'))
    d.write('c.yaml', pod('c', '').replace('spec:\n', 'spec:\n  nodeName: n2\n'))
    const source = create(d.dir)
    await source.start()
    expect(names(source)).toEqual(['a'])
    expect(source.errors()).toEqual([{ file: join(d.dir, 'b.yaml'), line: 1, reason: `Pod default/a is already defined in ${join(d.dir, 'a.yaml')}:1; this one is ignored` }])
  })

  it('finds a directory created after the start on the periodic read', async () => {
    const d = tempDir()
    dirs.push(d)
    const dir = join(d.dir, 'later')
    const source = create(dir, 20)
    await source.start()
    expect(source.pods.allReady()).toBe(true)
    expect(names(source)).toEqual([])
    mkdirSync(dir)
    writeFileSync(join(dir, 'a.json'), JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'a' }, spec: { containers: [{ name: 'c' }] } }))
    await until('a seen', () => names(source).includes('a'))
    rmSync(dir, { recursive: true })
    await until('a gone', () => names(source).length === 0)
  })
})

describe('claims in static mode', () => {
  const CLAIMS = `apiVersion: v1
kind: PersistentVolume
metadata: { name: pv-owned }
spec: { capacity: { storage: 1Gi }, accessModes: [ReadWriteOnce], hostPath: { path: /srv/owned }, claimRef: { name: owner } }
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: { name: owner }
spec: { volumeName: pv-owned }
status: { phase: Bound }
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: { name: thief }
spec: { volumeName: pv-owned }
status: { phase: Bound }
`
  it('a claim naming a PV bound to another claim is refused with the kubelet-style error; the owner gets it', async () => {
    const d = tempDir()
    dirs.push(d)
    d.write('claims.yaml', CLAIMS)
    d.write('pods.yaml', `${pod('taker').replace('emptyDir: {}', 'persistentVolumeClaim: { claimName: thief }')}---\n${pod('keeper').replace('emptyDir: {}', 'persistentVolumeClaim: { claimName: owner }')}`)
    const source = create(d.dir)
    await source.start()
    const byName = (name: string) => source.pods.getPods().find((p) => p.metadata.name === name) as Pod
    const use = (p: Pod) => resolveVolumeSpec(source.objects, p, p.spec?.volumes?.[0] as Volume, { mount: true, device: false })
    await expect(use(byName('taker'))).rejects.toThrow(
      'error processing PVC default/thief: found PV object pv-owned but its pv.Spec.ClaimRef default/owner does not point to claim default/thief',
    )
    expect((await use(byName('keeper'))).spec.name).toBe('pv-owned')
  })
})
