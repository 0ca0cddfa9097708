// Every example on the site is one of these modules: the page shows the file, and this test runs it
// and checks what it claims.
import { describe, expect, it } from 'vitest'
import * as backoff from '../examples/backoff.js'
import * as csi from '../examples/csi-volume.js'
import * as desired from '../examples/desired-vs-actual.js'
import * as embed from '../examples/embed-the-core.js'
import * as firstPod from '../examples/first-pod.js'
import * as greeting from '../examples/greeting-plugin.js'
import * as matching from '../examples/plugin-matching.js'
import * as order from '../examples/reconcile-order.js'
import * as reconstruction from '../examples/reconstruction.js'
import * as uncertain from '../examples/uncertain.js'

describe('the examples', () => {
  it('first-pod mounts an emptyDir and a configMap', async () => {
    const r = await firstPod.run()
    expect(r.volumes).toEqual(['cache', 'config', 'tls'])
    expect(r.config).toBe('worker_processes 2;\n')
    expect(r.mounts).toEqual([expect.stringMatching(/^tmpfs on .*kubernetes.io~secret\/tls$/)])
  })

  it('desired-vs-actual shows the populator, the pass and the outcomes one step at a time', async () => {
    const r = await desired.run()
    expect(r.lines).toEqual([
      'pod db added:        desired []  attached []  mounted []',
      'populateOnce():      desired [data, logs]  attached []  mounted []',
      '  pass 1 started [verify_controller_attached_volume, verify_controller_attached_volume] → desired [data, logs]  attached [data, logs]  mounted []',
      '  pass 2 started [volume_mount, volume_mount] → desired [data, logs]  attached [data, logs]  mounted [data, logs]',
      'pod deleted, populateOnce(): desired []  attached [data, logs]  mounted [data, logs]',
      '  pass 1 started [volume_unmount, volume_unmount] → desired []  attached [data, logs]  mounted []',
      'anything of db possibly mounted: false',
    ])
    expect(r.stillMounted).toBe(false)
  })

  it('reconcile-order unmounts before it mounts, and detaches last', async () => {
    const r = await order.run()
    expect(r.passes).toEqual([
      ['volume_unmount(pod-a, disk-1)', 'volume_unmount(pod-a, disk-2)'],
      ['volume_mount(pod-b, disk-1)', 'unmount_device(node, disk-2)'],
      ['volume_detach(node, disk-2)'],
    ])
    expect(r.attached).toEqual(['disk-1'])
  })

  it("backoff retries after the kubelet's doubling delays", async () => {
    const r = await backoff.run()
    expect(r.delays).toHaveLength(4)
    const [first, second, third, fourth] = r.delays as [number, number, number, number]
    expect(first).toBeGreaterThanOrEqual(500)
    expect(first).toBeLessThan(1_000)
    expect(second).toBeGreaterThanOrEqual(1_000)
    expect(third).toBeGreaterThanOrEqual(2_000)
    expect(fourth).toBeGreaterThanOrEqual(4_000)
    expect(fourth).toBeLessThan(4_500)
    expect(r.lines.at(-1)).toContain('mounted')
  })

  it('uncertain mounts are mounted again, or torn down when no pod wants them', async () => {
    const r = await uncertain.run()
    expect(r.lines[0]).toContain('uncertain')
    expect(r.lines[1]).toContain('mounted')
    expect(r.tornDown).toBe(true)
  })

  it('reconstruction keeps what a pod uses and tears down the rest', async () => {
    const r = await reconstruction.run()
    expect(r.lines.some((l) => l.includes('reconstructed'))).toBe(true)
    expect(r.unmounts.some((p) => p.endsWith('uid-gone'))).toBe(true)
    expect(r.unmounts.some((p) => p.endsWith('uid-keep'))).toBe(false)
    expect(r.mountsLeft.every((t) => t.includes('uid-keep'))).toBe(true)
    expect(r.mountsLeft.length).toBeGreaterThan(0)
  })

  it('greeting-plugin sets up and tears down a volume type of its own', async () => {
    const r = await greeting.run()
    expect(r.message).toBe('hello from a plugin')
    expect(r.mountsLeft).toBe(0)
  })

  it('plugin-matching finds one plugin per spec and its capabilities', async () => {
    const r = await matching.run()
    const by = Object.fromEntries(r.rows.map((row) => [row.volume, row]))
    expect(by['cache']?.plugin).toBe('kubernetes.io/empty-dir')
    expect(by['token']?.plugin).toBe('kubernetes.io/projected')
    expect(by['token']?.can).toContain('remount on sync')
    expect(by['scratch']?.plugin).toBe('kubernetes.io/csi')
    expect(by['scratch']?.can).toEqual([])
    expect(by['pv-db']).toMatchObject({ plugin: 'kubernetes.io/csi', volumeName: 'disk.csi.example.com^vol-7' })
    expect(by['pv-db']?.can).toEqual(expect.arrayContaining(['attach', 'device mount']))
    expect(by['pv-local']?.plugin).toBe('kubernetes.io/local-volume')
  })

  it('csi-volume stages, publishes, unpublishes and unstages through the driver', async () => {
    const r = await csi.run()
    const order = ['NodeStageVolume', 'NodePublishVolume', 'NodeUnpublishVolume', 'NodeUnstageVolume'].map((m) => r.calls.indexOf(m))
    expect(order.every((i) => i >= 0)).toBe(true)
    expect([...order].sort((a, b) => a - b)).toEqual(order)
  })

  it('embed-the-core reports errors, events and metrics through its ports', async () => {
    const r = await embed.run()
    expect(r.error).toContain('unmounted volumes=[data]')
    expect(r.error).toContain('persistentvolumeclaims "missing" not found')
    expect(r.events[0]).toMatch(/^Warning FailedMount: .*secret "missing" not found/)
    expect(Object.keys(r.counters).length).toBeGreaterThan(0)
  })
})
