/**
 * `kubevol` in a fresh clone: npm links a package's bins at install time, before any build, so the
 * bin must be a committed, executable file (not dist/main.js, which does not exist yet); it runs
 * the built CLI, or says how to build it.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import lock from '../../../package-lock.json' with { type: 'json' }
import pkg from '../package.json' with { type: 'json' }

const PACKAGE = fileURLToPath(new URL('..', import.meta.url))
const BIN = join(PACKAGE, pkg.bin.kubevol)

describe('the kubevol bin', () => {
  it('is a committed, executable file outside dist/, shipped in the package', () => {
    expect(pkg.bin.kubevol.startsWith('./dist/')).toBe(false)
    expect(pkg.files).toContain(pkg.bin.kubevol.replace(/^\.\//, '').split('/')[0])
    // Tracked with mode 100755, so that a clone has it executable before npm touches it.
    const [mode] = execFileSync('git', ['ls-files', '-s', '--', pkg.bin.kubevol], { cwd: PACKAGE, encoding: 'utf8' }).split(' ')
    expect(mode).toBe('100755')
    expect(statSync(BIN).mode & 0o111).not.toBe(0)
  })

  it('is the bin the lockfile records, which is what npm ci links', () => {
    const entry = (lock.packages as Record<string, { bin?: Record<string, string> }>)['packages/cli']
    expect(entry?.bin?.kubevol).toBe(pkg.bin.kubevol.replace(/^\.\//, ''))
  })

  it.skipIf(!existsSync(join(PACKAGE, 'dist', 'main.js')))('runs the built CLI', () => {
    const r = spawnSync(BIN, ['--help'], { encoding: 'utf8', timeout: 30_000 })
    expect(r.status).toBe(0)
    expect(r.stdout).toMatch(/^Usage: kubevol COMMAND/m)
  })

  it('says in one line how to build when dist/ is missing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kubevol-bin-'))
    try {
      mkdirSync(join(dir, 'bin'))
      copyFileSync(BIN, join(dir, 'bin', 'kubevol.js'))
      const r = spawnSync(process.execPath, [join(dir, 'bin', 'kubevol.js'), '--help'], { encoding: 'utf8', timeout: 30_000 })
      expect(r.status).toBe(1)
      expect(r.stderr).toBe('error: the kubevol CLI is not built (packages/cli/dist/main.js is missing): run `npm run build` in the repository first\n')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
