/**
 * `run --once`, `reconstruct` and `plan` on the real Linux host, as root, each command line in a
 * private mount namespace (`unshare -m`) so nothing reaches the machine's mounts. The loop device the
 * fileDisk volume attaches is detached afterwards.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { EXAMPLES, manifestDir } from '../../test/helpers.js'

const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url))
const LINUX_DIST = fileURLToPath(new URL('../../../adapter-linux/dist/index.js', import.meta.url))
const isRoot = process.getuid?.() === 0
const ready = isRoot && existsSync(MAIN) && existsSync(LINUX_DIST)
if (!ready && process.env.CI !== 'true') console.log(`skipping the Linux host tests: ${isRoot ? 'build first (npm run build)' : 'not root'}`)

const m = manifestDir(false)
afterAll(() => {
  if (ready) {
    const loops = execFileSync('losetup', ['-j', join(m.dir, 'data.img')], { encoding: 'utf8' })
    for (const line of loops.split('\n').filter(Boolean)) execFileSync('losetup', ['-d', line.slice(0, line.indexOf(':'))])
  }
  m.cleanup()
})

describe.skipIf(!ready && process.env.CI !== 'true')('kubevol on the Linux host (root)', () => {
  it('run --once mounts every example volume; reconstruct sees them; plan changes nothing', () => {
    // The examples, with their machine paths moved under a temporary directory.
    const at = (p: string) => join(m.dir, p)
    writeFileSync(at('objects.yaml'), readFileSync(join(EXAMPLES, 'objects.yaml'), 'utf8').replace('/var/lib/kubevol-images/data.img', at('data.img')).replace('/mnt/kubevol-local/vol1', at('local')))
    writeFileSync(at('web.yaml'), readFileSync(join(EXAMPLES, 'web.yaml')))
    writeFileSync(at('db.yaml'), readFileSync(join(EXAMPLES, 'db.yaml'), 'utf8').replace('/var/log/kubevol-example/db', at('logs')))
    execFileSync('truncate', ['-s', '64M', at('data.img')])
    mkdirSync(at('local'))
    const root = at('root')
    const k = (args: string) => `${process.execPath} ${MAIN} ${args}; echo "exit=$?"`
    const script = [
      k(`run --once --host linux --root-dir ${root} --pod-manifest-path ${m.dir} -o json`),
      'findmnt -rn -o TARGET | grep -c kubevol-cli- || true',
      k(`reconstruct --host linux --root-dir ${root} -o json`),
      k(`plan --host linux --root-dir ${root} --pod-manifest-path ${m.dir} -o json`),
      'findmnt -rn -o TARGET | grep -c kubevol-cli- || true',
    ].join('\necho ---\n')
    const out = execFileSync('unshare', ['-m', '--propagation', 'private', 'sh', '-c', script], { encoding: 'utf8', timeout: 120_000 })
    const [run, mountsAfterRun, reconstruct, plan, mountsAfterPlan] = out.split('---\n') as [string, string, string, string, string]
    expect(run).toContain('exit=0')
    const report = JSON.parse(run.slice(0, run.lastIndexOf('exit='))) as { converged: boolean; volumes: { phase: string }[] }
    expect(report.converged).toBe(true)
    expect(report.volumes).toHaveLength(9)
    expect(Number(mountsAfterRun)).toBeGreaterThanOrEqual(7)
    const rec = JSON.parse(reconstruct.slice(0, reconstruct.lastIndexOf('exit='))) as { volumes: { volume: string; mounted: boolean }[] }
    expect(rec.volumes.find((v) => v.volume === 'pv-disk')?.mounted).toBe(true)
    expect(plan).toContain('exit=0')
    expect(mountsAfterPlan).toBe(mountsAfterRun)
  })
})
