/**
 * csi-sanity (csi-test v5.3.1) against the reference hostpath driver, for mount and block volumes:
 * it checks the driver and this harness; and its Identity specs against kubevol's example driver
 * (which serves no Controller service, on which every other spec begins). The binaries come from
 * `KUBEVOL_ENVTEST_ASSETS` (test/real-csi.ts).
 */
import { mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, expect, it } from 'vitest'
import { useLinuxHost } from '../../test/harness.js'
import { describeWithRealCsi, startHostpathPlugin, startProcess } from '../../test/real-csi.js'
import { DRIVER, MiB, until } from '../../test/real-csi-node.js'
// The reference driver of examples/csi-hostpath-driver: a workspace package, not a declared dependency, since it depends on this one.
import { startHostpathCsiDriver } from '@kubevol/example-csi-hostpath-driver'

describeWithRealCsi('csi-sanity', (assets) => {
  const h = useLinuxHost()
  const stops: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const stop of stops.splice(0).reverse()) await stop()
  })

  /** csi-sanity against `socket`; its summary line and output. */
  async function sanity(socket: string, extra: readonly string[] = []): Promise<{ summary: string; output: string; ok: boolean }> {
    const { p } = h()
    const logFile = p('csi-sanity.log')
    const proc = startProcess(
      'csi-sanity',
      join(assets, 'csi-sanity'),
      [
        `--csi.endpoint=${socket}`,
        `--csi.mountdir=${p('sanity-mount')}`,
        `--csi.stagingdir=${p('sanity-staging')}`,
        // Small volumes: hostpathplugin fallocates block volumes (the default is 10 GiB, copied again by each snapshot spec).
        `--csi.testvolumesize=${16 * MiB}`,
        `--csi.testvolumeexpandsize=${32 * MiB}`,
        '--ginkgo.no-color',
        ...extra,
      ],
      { logFile },
    )
    stops.push(() => proc.stop('SIGKILL'))
    await until('csi-sanity finished', () => !proc.running(), 170_000)
    const output = readFileSync(logFile, 'utf8')
    const summary = output.match(/^(SUCCESS|FAIL)! -- .*$/m)?.[0] ?? `no summary; output:\n${output.slice(-4000)}`
    return { summary, output, ok: summary.startsWith('SUCCESS!') }
  }

  it.each([
    { access: 'mount', extra: [] },
    // This ListVolumes spec creates a volume with no capacity; hostpathplugin v1.16.1 then runs
    // `fallocate -l 0M` for a block volume, which fails (a limit of the driver, not of the harness).
    { access: 'block', extra: ['--csi.testvolumeaccesstype=block', '--ginkgo.skip=check the presence of new volumes and absence of deleted ones in the volume list'] },
  ])('passes against the reference hostpath driver ($access volumes)', async ({ extra }) => {
    const { p } = h()
    const socket = p('csi.sock')
    const driver = await startHostpathPlugin({ assets, socket, stateDir: p('csi-data-dir'), driverName: DRIVER, nodeId: 'node-1', logFile: p('hostpathplugin.log') })
    stops.push(() => driver.stop())
    const { summary, ok } = await sanity(socket, extra)
    expect(summary).toMatch(/^SUCCESS! -- \d+ Passed \| 0 Failed/)
    expect(ok).toBe(true)
    expect(Number(summary.match(/(\d+) Passed/)?.[1])).toBeGreaterThanOrEqual(60)
  }, 180_000)

  // The example driver serves Identity and Node only; csi-sanity's Node specs create their volumes
  // through the Controller service first, so only the Identity specs apply to it.
  it('the Identity specs pass against kubevol\'s example driver', async () => {
    const { host, p } = h()
    mkdirSync(p('data'))
    const server = await startHostpathCsiDriver({ host, endpoint: p('csi.sock'), dataDir: p('data'), nodeId: 'node-1' })
    stops.push(() => server.stop())
    const { summary, output } = await sanity(p('csi.sock'), ['--ginkgo.focus=Identity Service'])
    expect(summary, output.slice(-4000)).toMatch(/^SUCCESS! -- [1-9]\d* Passed \| 0 Failed/)
  }, 180_000)
})
