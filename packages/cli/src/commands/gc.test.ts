import { createMemoryHost } from '@kubevol/adapter-mock'
import { silentLogger } from '@kubevol/core'
import { type JournalRecord, VolumeJournal } from '@kubevol/core/engine'
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

  it('refuses while another process holds the root lock, removing nothing', async () => {
    const host = await preparedTree()
    const lock = await host.lockRoot(ROOT)
    if (!lock.locked) throw new Error('the lock should be free')
    const before = JSON.stringify(host.tree('/'))
    for (const flags of [[], ['--force'], ['--dry-run']]) {
      const r = await cli(['gc', ...flags], { host })
      expect(r.code).toBe(1)
      expect(r.stderr).toContain(`the root ${ROOT} is in use by kubevol (pid 1000); stop the agent first`)
    }
    expect(JSON.stringify(host.tree('/'))).toBe(before)
    await lock.release()
    expect((await cli(['gc'], { host })).stdout).toMatch(/^orphan-empty\s+removed/m)
  })

  it('keeps a pod the journal records as set up unless --force', async () => {
    const host = await preparedTree()
    const journal = await VolumeJournal.open({ host, path: `${ROOT}/journal/volumes.log`, logger: silentLogger })
    await journal.record({ kind: 'setup', volume: 'kubernetes.io/empty-dir/scratch', pod: 'orphan-empty', podUID: 'orphan-empty', outerName: 'scratch', spec: { name: 'scratch', volume: { name: 'scratch', emptyDir: {} }, readOnly: false }, gid: '' } as JournalRecord)
    await journal.flush()
    const kept = await cli(['gc'], { host })
    expect(kept.stdout).toMatch(/^orphan-empty\s+refused\s+the journal records volumes "scratch" of this pod as set up; pass --force to remove it anyway/m)
    expect(host.exists(`${ROOT}/pods/orphan-empty`)).toBe(true)
    const forced = await cli(['gc', '--force'], { host })
    expect(forced.stdout).toMatch(/^orphan-empty\s+removed/m)
    expect(host.exists(`${ROOT}/pods/orphan-empty`)).toBe(false)
  })

  it('exits 0 when there is nothing to clean', async () => {
    const r = await cli(['gc'], { host: createMemoryHost() })
    expect(r).toEqual({ code: 0, stdout: 'no orphaned pod directories\n', stderr: '' })
  })
})
