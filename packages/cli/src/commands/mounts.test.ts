import { createMemoryHost } from '@kubevol/adapter-mock'
import { type Agent, startAgent } from '@kubevol/agent'
import { parse } from 'yaml'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cli, manifestDir } from '../../test/helpers.js'

const ROOT = '/var/lib/kubevol'
let agent: Agent
let server: string
const m = manifestDir(false)

const POD = `apiVersion: v1
kind: Pod
metadata: { name: web, namespace: shop, uid: web-uid }
spec:
  containers:
    - name: app
      volumeMounts:
        - { name: cache, mountPath: /cache }
        - { name: config, mountPath: /etc/app.conf, subPath: app.conf }
        - { name: config, mountPath: /etc/config, readOnly: true, recursiveReadOnly: IfPossible }
    - name: sidecar
      volumeMounts:
        - { name: cache, mountPath: /shared, readOnly: true, mountPropagation: HostToContainer }
  volumes:
    - { name: cache, emptyDir: {} }
    - { name: config, configMap: { name: settings } }
---
apiVersion: v1
kind: ConfigMap
metadata: { name: settings, namespace: shop }
data: { app.conf: fast }
---
apiVersion: v1
kind: Pod
metadata: { name: stuck, namespace: shop, uid: stuck-uid }
spec:
  containers: [{ name: c, volumeMounts: [{ name: cfg, mountPath: /c }] }]
  volumes: [{ name: cfg, configMap: { name: missing } }]
`

beforeAll(async () => {
  m.write('pods.yaml', POD)
  agent = await startAgent({ nodeName: 'n1', mode: 'static', manifestDir: m.dir, port: 0, statsPeriodMs: 0, podSyncRetryMs: 50 }, { host: createMemoryHost(), log: { silent: true }, manager: { backoff: { initialMs: 20, maxMs: 200 } } })
  server = agent.url
  const deadline = Date.now() + 10_000
  while (Date.now() < deadline && agent.manager.getMountedVolumesForPod('web-uid').size < 2) await new Promise((r) => setTimeout(r, 10))
})
afterAll(async () => {
  await agent.stop()
  m.cleanup()
})

describe('kubevol mounts', () => {
  it('prints every container of a pod named namespace/name as a table', async () => {
    const r = await cli(['mounts', 'shop/web', '--server', server])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    const lines = r.stdout.trimEnd().split('\n')
    expect(lines[0]).toMatch(/^CONTAINER\s+VOLUME\s+CONTAINER PATH\s+MODE\s+PROPAGATION\s+HOST PATH$/)
    expect(lines.slice(1).map((l) => l.split(/\s+/))).toEqual([
      ['app', 'cache', '/cache', 'rw', 'private', `${ROOT}/pods/web-uid/volumes/kubernetes.io~empty-dir/cache`],
      ['app', 'config', '/etc/app.conf', 'ro', 'private', `${ROOT}/pods/web-uid/volume-subpaths/config/app/1`],
      ['app', 'config', '/etc/config', 'ro', 'private', `${ROOT}/pods/web-uid/volumes/kubernetes.io~configmap/config`],
      ['sidecar', 'cache', '/shared', 'ro', 'host-to-container', `${ROOT}/pods/web-uid/volumes/kubernetes.io~empty-dir/cache`],
    ])
  })

  it('-o oci: one container as OCI runtime spec mounts, recursive read-only when the runtime can', async () => {
    const r = await cli(['mounts', 'web-uid', 'app', '-o', 'oci', '--recursive-read-only', '--server', server])
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout)).toEqual([
      { destination: '/cache', type: 'bind', source: `${ROOT}/pods/web-uid/volumes/kubernetes.io~empty-dir/cache`, options: ['rbind', 'rprivate', 'rw'] },
      { destination: '/etc/app.conf', type: 'bind', source: `${ROOT}/pods/web-uid/volume-subpaths/config/app/1`, options: ['rbind', 'rprivate', 'ro'] },
      { destination: '/etc/config', type: 'bind', source: `${ROOT}/pods/web-uid/volumes/kubernetes.io~configmap/config`, options: ['rbind', 'rprivate', 'ro', 'rro'] },
    ])
  })

  it.each(['json', 'yaml'])('-o %s: the CRI mounts and devices', async (format) => {
    const r = await cli(['mounts', 'shop/web', 'sidecar', '-o', format, '--server', server])
    expect(r.code).toBe(0)
    expect(format === 'json' ? JSON.parse(r.stdout) : parse(r.stdout)).toEqual({
      pod: { namespace: 'shop', name: 'web', uid: 'web-uid' },
      container: 'sidecar',
      mounts: [
        {
          name: 'cache',
          containerPath: '/shared',
          hostPath: `${ROOT}/pods/web-uid/volumes/kubernetes.io~empty-dir/cache`,
          readonly: true,
          selinuxRelabel: true,
          propagation: 'PROPAGATION_HOST_TO_CONTAINER',
          recursiveReadOnly: false,
        },
      ],
      devices: [],
    })
  })

  it('-o oci needs one container when the pod has several', async () => {
    const r = await cli(['mounts', 'shop/web', '-o', 'oci', '--server', server])
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('pod shop/web has containers app, sidecar: name one for -o oci')
  })

  it("fails with the kubelet's text while a volume is not mounted, and after --wait", async () => {
    const now = await cli(['mounts', 'shop/stuck', 'c', '--server', server])
    expect(now.code).toBe(1)
    expect(now.stderr).toContain('cannot find volume "cfg" to mount into container "c"')
    const waited = await cli(['mounts', 'shop/stuck', 'c', '--wait', '200ms', '--server', server])
    expect(waited.code).toBe(1)
    expect(waited.stderr).toMatch(/Unable to attach or mount volumes: unmounted volumes=\[cfg\], unattached volumes=\[\], failed to process volumes=\[\]: .*context deadline exceeded/)
    const table = await cli(['mounts', 'shop/stuck', '--server', server])
    expect(table.code).toBe(1)
    expect(table.stdout).toMatch(/^c\s+not ready: cannot find volume "cfg" to mount into container "c"$/m)
  })

  it('says which pod or container it does not know', async () => {
    expect((await cli(['mounts', 'shop/nope', '--server', server])).stderr).toContain('pod shop/nope is not known to the agent')
    expect((await cli(['mounts', 'shop/web', 'nope', '--server', server])).stderr).toContain('container nope not found in pod shop/web')
  })
})
