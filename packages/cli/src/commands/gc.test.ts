import { createMemoryHost } from '@kubevol/adapter-mock'
import { describe, expect, it } from 'vitest'
import { cli } from '../../test/helpers.js'

const ROOT = '/var/lib/kubevol'

/** Two orphans: one with only empty volume dirs (removable), one with a volume still mounted. */
async function preparedTree() {
  const host = createMemoryHost()
  await host.mkdir(`${ROOT}/pods/orphan-empty/volumes/kubernetes.io~empty-dir/scratch`, { recursive: true })
  const busy = `${ROOT}/pods/orphan-mounted/volumes/kubernetes.io~empty-dir/cache`
  await host.mkdir(busy, { recursive: true })
  await host.mount({ source: 'tmpfs', target: busy, fstype: 'tmpfs' })
  return host
}

describe('kubevol gc', () => {
  it('--dry-run reports what it would remove and what it refuses, removing nothing', async () => {
    const host = await preparedTree()
    const before = JSON.stringify(host.tree('/'))
    const r = await cli(['gc', '--dry-run', '-o', 'json'], { host })
    expect(JSON.stringify(host.tree('/'))).toBe(before)
    const report = JSON.parse(r.stdout) as { removed: string[]; wouldRemove: string[]; refused: { pod: string; reason: string }[] }
    expect(report.removed).toEqual([])
    expect(report.wouldRemove).toEqual(['orphan-empty'])
    expect(report.refused.map((x) => x.pod)).toEqual(['orphan-mounted'])
    expect(report.refused[0]?.reason).toMatch(/mount/)
    expect(r.code).toBe(1)
  })

  it('removes the safe orphan and keeps the mounted one, saying why', async () => {
    const host = await preparedTree()
    const r = await cli(['gc'], { host })
    expect(r.code).toBe(1)
    expect(r.stdout).toMatch(/^orphan-empty\s+removed/m)
    expect(r.stdout).toMatch(/^orphan-mounted\s+refused\s+.*mount/m)
    expect(r.stderr).toContain('1 orphaned pod directories were kept')
    expect(host.exists(`${ROOT}/pods/orphan-empty`)).toBe(false)
    expect(host.exists(`${ROOT}/pods/orphan-mounted/volumes/kubernetes.io~empty-dir/cache`)).toBe(true)
    expect(host.mountTargets()).toContain(`${ROOT}/pods/orphan-mounted/volumes/kubernetes.io~empty-dir/cache`)
  })

  it('exits 0 when there is nothing to clean', async () => {
    const r = await cli(['gc'], { host: createMemoryHost() })
    expect(r).toEqual({ code: 0, stdout: 'no orphaned pod directories\n', stderr: '' })
  })
})
