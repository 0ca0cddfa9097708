import { execFileSync, spawnSync } from 'node:child_process'
import { createMemoryHost } from '@kubevol/adapter-mock'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { get, tempDir, until } from '../../test/helpers.js'
import { type Agent, startAgent } from '../agent.js'
import { AgentMetrics } from './agent-metrics.js'

const IMAGE = '/var/lib/images/disk.img'
const MANIFESTS = `apiVersion: v1
kind: PersistentVolume
metadata: { name: pv-disk }
spec:
  capacity: { storage: 32Mi }
  csi: { driver: filedisk.kubevol.io, volumeHandle: ${IMAGE} }
  claimRef: { name: disk, namespace: default }
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: { name: disk }
spec: { volumeName: pv-disk }
status: { phase: Bound }
---
apiVersion: v1
kind: Pod
metadata: { name: web }
spec:
  containers: [{ name: c, volumeMounts: [{ name: data, mountPath: /d }, { name: s, mountPath: /s }] }]
  volumes: [{ name: data, persistentVolumeClaim: { claimName: disk } }, { name: s, emptyDir: {} }]
`

/** promtool, installed from Debian's prometheus package when missing and allowed; else why not. */
function findPromtool(): { path: string } | { skip: string } {
  const which = () => spawnSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' }).stdout.trim()
  if (which()) return { path: which() }
  const root = process.getuid?.() === 0
  if (root && spawnSync('sh', ['-c', 'command -v apt-get'], { encoding: 'utf8' }).stdout.trim()) {
    execFileSync('sh', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null'], { stdio: 'inherit', timeout: 280_000 })
    if (which()) return { path: which() }
  }
  return { skip: root ? 'promtool is missing and apt-get could not install the prometheus package' : 'promtool is missing and installing Debian\'s prometheus package needs root' }
}

describe('metrics', () => {
  let agent: Agent
  const manifests = tempDir()
  beforeAll(async () => {
    const host = createMemoryHost()
    host.allocateFile(IMAGE, 32 << 20)
    manifests.write('all.yaml', MANIFESTS)
    agent = await startAgent(
      { nodeName: 'n1', port: 0, manifestDir: manifests.dir, statsPeriodMs: 20 },
      { host, log: { silent: true }, manager: { housekeepingPeriodMs: 0 } as object },
    )
    const uid = () => agent.pods.getPods()[0]?.metadata.uid ?? ''
    await until('web mounted', () => agent.manager.getMountedVolumesForPod(uid()).size === 2)
    await until('stats collected', async () => (await get(`${agent.url}/metrics`)).text.includes('kubelet_volume_stats_capacity_bytes{'))
  })
  afterAll(async () => {
    await agent.stop()
    manifests.cleanup()
  })

  it("exposes the kubelet's names, labels and buckets, and kubevol's own", async () => {
    const res = await get(`${agent.url}/metrics`)
    expect(res.status).toBe(200)
    const text = res.text
    expect(text).toContain('volume_manager_total_volumes{plugin_name="kubernetes.io/empty-dir",state="desired_state_of_world"} 1')
    expect(text).toContain('volume_manager_total_volumes{plugin_name="kubevol.io/file-disk",state="actual_state_of_world"} 1')
    expect(text).toMatch(/storage_operation_duration_seconds_bucket\{le="600",volume_plugin="kubevol.io\/file-disk",operation_name="volume_attach",status="success",migrated="false"\} 1/)
    expect(text).toMatch(/volume_operation_total_seconds_count\{plugin_name="kubernetes.io\/empty-dir",operation_name="overall_volume_mount"\} 1/)
    expect(text).toMatch(/kubelet_volume_stats_capacity_bytes\{namespace="default",persistentvolumeclaim="disk"\} \d+/)
    expect(text).toMatch(/kubevol_volume_mount_latency_seconds_count\{plugin_name="kubevol.io\/file-disk"\} 1/)
    expect(text).toContain('kubevol_pods{phase="mounted"} 1')
    expect(text).toContain('kubevol_sources_ready 1')
    expect(text).toContain('kubevol_build_info{version="0.1.0"} 1')
    // No node certificate of its own here (no TLS bootstrapping): +Inf, as the kubelet's gauge when unused.
    expect(text).toContain('kubelet_certificate_manager_client_ttl_seconds +Inf')
    expect(text).not.toContain('nodejs_')
  })

  it('passes promtool check metrics', async (ctx) => {
    const promtool = findPromtool()
    if ('skip' in promtool) {
      if (process.env.CI === 'true') throw new Error(`cannot lint the metrics in CI: ${promtool.skip}`)
      console.warn(`[agent] skipping the promtool lint: ${promtool.skip}`)
      ctx.skip()
      return
    }
    const { text } = await get(`${agent.url}/metrics`)
    const result = spawnSync(promtool.path, ['check', 'metrics'], { input: text, encoding: 'utf8' })
    expect(`${result.stdout}${result.stderr}`.trim()).toBe('')
    expect(result.status).toBe(0)
  }, 300_000)
})

describe('the core Metrics port', () => {
  it('maps core names onto the kubelet exposition and tolerates a bad sample once', async () => {
    const errors: string[] = []
    const metrics = new AgentMetrics({ onError: (m) => errors.push(m) })
    metrics.inc('reconstruct_volume_operations_total')
    metrics.set('orphan_pod_cleaned_volumes', {}, 2)
    metrics.observe('storage_operation_duration_seconds', { volume_plugin: 'p', operation_name: 'volume_mount', status: 'success', migrated: 'false' }, 0.2)
    metrics.observe('storage_operation_duration_seconds', { nope: 'x' }, 1)
    metrics.observe('storage_operation_duration_seconds', { nope: 'x' }, 1)
    const text = await metrics.expose()
    expect(text).toContain('reconstruct_volume_operations_total 1')
    expect(text).toContain('kubelet_orphan_pod_cleaned_volumes 2')
    expect(text).toContain('storage_operation_duration_seconds_bucket{le="0.25",volume_plugin="p",operation_name="volume_mount",status="success",migrated="false"} 1')
    expect(errors).toHaveLength(1)
  })
})

describe('operations waiting for a slot', () => {
  it('are a gauge of their own beside the running ones', async () => {
    const host = createMemoryHost()
    const hang = host.faults.hangOn({ method: 'mount' })
    const manifests = tempDir()
    manifests.write(
      'pod.yaml',
      `apiVersion: v1
kind: Pod
metadata: { name: tmp }
spec:
  containers: [{ name: c, image: busybox, volumeMounts: [{ name: a, mountPath: /a }, { name: b, mountPath: /b }, { name: c, mountPath: /c }] }]
  volumes: [{ name: a, emptyDir: { medium: Memory } }, { name: b, emptyDir: { medium: Memory } }, { name: c, emptyDir: { medium: Memory } }]
`,
    )
    const agent = await startAgent(
      { nodeName: 'n1', port: 0, manifestDir: manifests.dir },
      { host, log: { silent: true }, manager: { housekeepingPeriodMs: 0, maxRunningOperations: 1, slowOperationMs: 600_000 } as object },
    )
    try {
      await until('one mount held', () => hang.held.length === 1)
      const text = (await get(`${agent.url}/metrics`)).text
      expect(text).toContain('kubevol_operations_running 1')
      expect(text).toContain('kubevol_operations_queued 2')
      hang.release()
      await until('all three mounted', () => agent.manager.getMountedVolumesForPod(agent.pods.getPods()[0]?.metadata.uid ?? '').size === 3)
      await until('the queue drained', async () => (await get(`${agent.url}/metrics`)).text.includes('kubevol_operations_queued 0'))
    } finally {
      await agent.stop()
      manifests.cleanup()
    }
  })
})
