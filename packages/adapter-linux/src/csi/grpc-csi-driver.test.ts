/**
 * The gRPC CsiDriver against the hostpath reference driver over a real unix socket, with real bind
 * mounts and loop devices (root, private mount namespace): every call for file system and raw block
 * volumes, the gRPC codes as core's CsiError, deadlines.
 */
import { readFileSync, statSync, writeFileSync } from 'node:fs'
import { CsiError, type CsiVolumeCapability, isFinalCsiError } from '@kubevol/core/plugins'
import { afterEach, expect, it } from 'vitest'
import { describeAsRoot } from '../../test/as-root.js'
import { useLinuxHost } from '../../test/harness.js'
import { parseMountInfo } from '../mountinfo.js'
import { createGrpcCsiDriver, type GrpcCsiDriver } from './grpc-csi-driver.js'
// The reference driver (examples/csi-hostpath-driver): a workspace package, not a declared dependency, since it depends on this one.
import { type HostpathCsiDriverOptions, type HostpathCsiDriverServer, startHostpathCsiDriver } from '@kubevol/example-csi-hostpath-driver'

const o = { timeoutMs: 10_000 }
const capability: CsiVolumeCapability = { mount: { fsType: '', mountFlags: [] }, accessMode: 'SINGLE_NODE_WRITER' }
const kernelMounts = (prefix: string) =>
  parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'))
    .map((e) => e.target)
    .filter((t) => t.startsWith(prefix))

describeAsRoot('gRPC CSI client and the hostpath reference driver', () => {
  const h = useLinuxHost()
  let server: HostpathCsiDriverServer | undefined
  let client: GrpcCsiDriver | undefined
  afterEach(async () => {
    client?.close?.()
    await server?.stop()
    server = undefined
    client = undefined
  })
  async function start(options: Partial<HostpathCsiDriverOptions> = {}) {
    const { host, p } = h()
    await host.mkdir(p('data'))
    server = await startHostpathCsiDriver({ host, endpoint: p('csi.sock'), dataDir: p('data'), ...options })
    client = createGrpcCsiDriver({ endpoint: p('csi.sock') })
    return { ...h(), client }
  }

  it('answers Identity and node info calls', async () => {
    const { client } = await start({ nodeId: 'n7' })
    expect(await client.getPluginInfo(o)).toEqual({ name: 'hostpath.csi.kubevol.io', vendorVersion: '0.1.0' })
    expect(await client.nodeGetInfo(o)).toEqual({ nodeId: 'n7', maxVolumesPerNode: 0 })
    expect(await client.nodeGetCapabilities(o)).toEqual(['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'EXPAND_VOLUME', 'VOLUME_CONDITION'])
  })

  it('stages, publishes, reports stats, expands, unpublishes and unstages with real mounts; every call is idempotent', async () => {
    const { client, host, p, root } = await start()
    const staging = p('staging')
    const target = p('pod/mount')
    await host.mkdir(staging)
    const stage = { volumeId: 'v1', publishContext: {}, stagingTargetPath: staging, volumeCapability: capability, secrets: {}, volumeContext: {} }
    await client.nodeStageVolume(stage, o)
    await client.nodeStageVolume(stage, o)
    const publish = { ...stage, targetPath: target, readonly: false }
    await client.nodePublishVolume(publish, o)
    await client.nodePublishVolume(publish, o)
    expect(kernelMounts(root).sort()).toEqual([staging, target].sort())
    writeFileSync(`${target}/file`, 'through the bind')
    expect(readFileSync(p('data/v1/file'), 'utf8')).toBe('through the bind')
    const stats = await client.nodeGetVolumeStats({ volumeId: 'v1', volumePath: target, stagingTargetPath: staging }, o)
    expect(stats.capacityBytes).toBeGreaterThan(0)
    expect(stats.inodes).toBeGreaterThan(0)
    expect(stats.volumeCondition).toEqual({ abnormal: false, message: 'volume is healthy' })
    expect(
      await client.nodeExpandVolume({ volumeId: 'v1', volumePath: target, requiredBytes: 2 ** 33, stagingTargetPath: staging, volumeCapability: capability, secrets: {} }, o),
    ).toBe(2 ** 33)
    await client.nodeUnpublishVolume({ volumeId: 'v1', targetPath: target }, o)
    await client.nodeUnpublishVolume({ volumeId: 'v1', targetPath: target }, o)
    await client.nodeUnstageVolume({ volumeId: 'v1', stagingTargetPath: staging }, o)
    await client.nodeUnstageVolume({ volumeId: 'v1', stagingTargetPath: staging }, o)
    expect(kernelMounts(root)).toEqual([])
    expect(await host.lstat(target)).toBeNull()
  })

  it('raw block: stage attaches a loop device, publish binds it onto a file, expand grows it, unstage detaches; every call is idempotent', async () => {
    const { client, host, p, root } = await start()
    const staging = p('staging')
    const target = p('publish/pod-1')
    await host.mkdir(staging)
    const block: CsiVolumeCapability = { block: {}, accessMode: 'SINGLE_NODE_WRITER' }
    const stage = { volumeId: 'b1', publishContext: {}, stagingTargetPath: staging, volumeCapability: block, secrets: {}, volumeContext: { size: String(4 << 20) } }
    const publish = { ...stage, targetPath: target, readonly: false }
    // Publishing first is refused: the device does not exist yet.
    expect(((await client.nodePublishVolume(publish, o).catch((e: unknown) => e)) as CsiError).grpcCode).toBe(9)
    await client.nodeStageVolume(stage, o)
    await client.nodeStageVolume(stage, o)
    const loops = async () => (await host.loopDevices?.find(p('data/b1.img'))) ?? []
    expect(await loops()).toHaveLength(1)
    await client.nodePublishVolume(publish, o)
    await client.nodePublishVolume(publish, o)
    expect(kernelMounts(root)).toEqual([target])
    expect(statSync(target).isBlockDevice()).toBe(true)
    const stats = await client.nodeGetVolumeStats({ volumeId: 'b1', volumePath: target, stagingTargetPath: staging }, o)
    expect(stats.capacityBytes).toBe(4 << 20)
    expect(await client.nodeExpandVolume({ volumeId: 'b1', volumePath: target, requiredBytes: 8 << 20, stagingTargetPath: staging, volumeCapability: block, secrets: {} }, o)).toBe(8 << 20)
    expect(await host.blockDevices?.size((await loops())[0] as string)).toBe(8 << 20)
    await client.nodeUnpublishVolume({ volumeId: 'b1', targetPath: target }, o)
    await client.nodeUnpublishVolume({ volumeId: 'b1', targetPath: target }, o)
    expect(await host.lstat(target)).toBeNull()
    await client.nodeUnstageVolume({ volumeId: 'b1', stagingTargetPath: staging }, o)
    await client.nodeUnstageVolume({ volumeId: 'b1', stagingTargetPath: staging }, o)
    expect(await loops()).toEqual([])
    expect(kernelMounts(root)).toEqual([])
    expect(statSync(p('data/b1.img')).size).toBe(8 << 20)
  })

  it.each([
    { name: 'publish before stage', code: 9, final: true, call: 'publish' },
    { name: 'stats of an unpublished volume', code: 5, final: true, call: 'stats' },
    { name: 'a missing volume id', code: 3, final: true, call: 'stage' },
  ])('reports $name as gRPC code $code (final: $final)', async ({ code, final, call }) => {
    const { client, p, host } = await start()
    await host.mkdir(p('staging'))
    const request = { volumeId: call === 'stage' ? '' : 'v1', publishContext: {}, stagingTargetPath: p('staging'), volumeCapability: capability, secrets: {}, volumeContext: {} }
    const run = () => {
      if (call === 'publish') return client.nodePublishVolume({ ...request, targetPath: p('t'), readonly: false }, o)
      if (call === 'stats') return client.nodeGetVolumeStats({ volumeId: 'v1', volumePath: p('t'), stagingTargetPath: '' }, o)
      return client.nodeStageVolume(request, o)
    }
    const err = await run().catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CsiError)
    expect((err as CsiError).grpcCode).toBe(code)
    expect(isFinalCsiError(err)).toBe(final)
  })

  it('reaches a restarted driver on the first call once it is back: no reconnect backoff carried over from the outage', async () => {
    const { client, host, p, root } = await start()
    const options = { host, endpoint: p('csi.sock'), dataDir: p('data') }
    await host.mkdir(p('staging'))
    await client.nodeStageVolume({ volumeId: 'v1', publishContext: {}, stagingTargetPath: p('staging'), volumeCapability: capability, secrets: {}, volumeContext: {} }, o)
    // The driver dies; calls made meanwhile fail as Unavailable (uncertain), each one a failed
    // connection attempt that a long-lived channel answers with a longer reconnect backoff.
    await server?.stop()
    for (let i = 0; i < 3; i++) {
      const down = await client.nodeGetCapabilities({ timeoutMs: 2_000 }).catch((e: unknown) => e)
      expect((down as CsiError).grpcCode).toBe(14)
      expect(isFinalCsiError(down)).toBe(false)
    }
    server = await startHostpathCsiDriver(options)
    // The next mount, on its first attempt: stage and publish of a new volume.
    await host.mkdir(p('staging2'))
    const stage = { volumeId: 'v2', publishContext: {}, stagingTargetPath: p('staging2'), volumeCapability: capability, secrets: {}, volumeContext: {} }
    await client.nodeStageVolume(stage, o)
    await client.nodePublishVolume({ ...stage, targetPath: p('pod/mount'), readonly: false }, o)
    expect(kernelMounts(root).sort()).toEqual([p('staging'), p('staging2'), p('pod/mount')].sort())
  })

  it('a call past its deadline fails as DeadlineExceeded (uncertain), and an absent socket as Unavailable (uncertain)', async () => {
    const { client, p } = await start({ intercept: (method) => (method === 'NodeUnstageVolume' ? new Promise((r) => setTimeout(r, 2_000)) : undefined) })
    const err = await client.nodeUnstageVolume({ volumeId: 'v1', stagingTargetPath: p('x') }, { timeoutMs: 200 }).catch((e: unknown) => e)
    expect((err as CsiError).grpcCode).toBe(4)
    expect(isFinalCsiError(err)).toBe(false)
    const nowhere = createGrpcCsiDriver({ endpoint: p('nowhere.sock') })
    const down = await nowhere.nodeGetCapabilities({ timeoutMs: 500 }).catch((e: unknown) => e)
    nowhere.close?.()
    expect([4, 14]).toContain((down as CsiError).grpcCode)
    expect(isFinalCsiError(down)).toBe(false)
  })
})
