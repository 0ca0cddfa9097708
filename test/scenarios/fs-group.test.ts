import { createMemoryHost } from '@kubevol/adapter-mock'
import { type Clock, silentLogger, systemClock } from '@kubevol/core'
import { setVolumeOwnership } from '@kubevol/core/plugins'
import { describe, expect, it } from 'vitest'

async function volume() {
  const host = createMemoryHost()
  await host.mkdir('/vol/sub', { recursive: true, mode: 0o755 })
  await host.writeFile('/vol/sub/file', 'x', { mode: 0o600 })
  await host.symlink('/etc/passwd', '/vol/link')
  await host.writeFile('/vol/record', '')
  return host
}

const run = (host: ReturnType<typeof createMemoryHost>, extra: Partial<Parameters<typeof setVolumeOwnership>[0]> = {}) =>
  setVolumeOwnership({ host, clock: systemClock, logger: silentLogger, dir: '/vol', fsGroup: 3000, readOnly: false, ...extra })

describe('setVolumeOwnership (SPEC §7.2)', () => {
  it('gives every entry the group, group rw on files and setgid on directories, and never follows symlinks', async () => {
    const host = await volume()
    await host.mkdir('/etc', { recursive: true })
    await host.writeFile('/etc/passwd', 'root', { mode: 0o644 })
    const result = await run(host)
    expect(result).toMatchObject({ status: 'applied', entries: 5 })
    const file = await host.lstat('/vol/sub/file')
    expect(file?.gid).toBe(3000)
    expect((file?.mode ?? 0) & 0o7777).toBe(0o660)
    expect(((await host.lstat('/vol/sub'))?.mode ?? 0) & 0o7777).toBe(0o2775)
    expect((await host.lstat('/etc/passwd'))?.gid).toBe(0)
    expect(((await host.lstat('/etc/passwd'))?.mode ?? 0) & 0o777).toBe(0o644)
  })

  it('gives read-only volumes group read only', async () => {
    const host = await volume()
    await run(host, { readOnly: true })
    expect(((await host.lstat('/vol/sub/file'))?.mode ?? 0) & 0o777).toBe(0o640)
  })

  it.each([
    { name: 'no fsGroup', extra: { fsGroup: undefined }, status: 'skipped', reason: 'no-fsgroup' },
    { name: 'OnRootMismatch on a matching root', extra: { policy: 'OnRootMismatch' }, prepared: true, status: 'skipped', reason: 'root-matches' },
    { name: 'the same gid recorded before', extra: { recordPath: '/vol/record' }, prepared: true, status: 'skipped', reason: 'already-applied' },
    { name: 'Always walks again without a record', extra: {}, prepared: true, status: 'applied' },
  ])('$name', async ({ extra, prepared, status, reason }) => {
    const host = await volume()
    if (prepared) await run(host, { recordPath: '/vol/record' })
    const result = await run(host, extra)
    expect(result.status).toBe(status)
    if (reason) expect(result).toMatchObject({ reason })
  })

  it('reports progress after 30 s and then every 60 s', async () => {
    const host = await volume()
    for (let i = 0; i < 20; i++) await host.writeFile(`/vol/f${i}`, 'x')
    let now = 0
    // Every entry takes 10 s.
    const clock: Clock = { ...systemClock, now: () => (now += 10_000) }
    const progress: number[] = []
    await run(host, { clock, onProgress: () => progress.push(now) })
    expect(progress.length).toBeGreaterThanOrEqual(3)
    expect(progress[0]).toBeGreaterThanOrEqual(30_000)
    expect((progress[1] as number) - (progress[0] as number)).toBeGreaterThanOrEqual(60_000)
  })
})
