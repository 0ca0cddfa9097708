#!/usr/bin/env node
// Prints the part of this machine's npm configuration that reaches its registry, self-contained, for
// deploy/Dockerfile's build secret (deploy/README.md, "Behind a registry mirror"):
//
//   node deploy/npmrc-secret.mjs > "$tmp/npmrc"
//   docker build --secret id=npmrc,src="$tmp/npmrc" -f deploy/Dockerfile -t kubevol/agent:0.1.0 .
//
// It reads the files npm reads (global, user, then the project's .npmrc; a later one wins) and keeps
// the registry settings only: registry and scoped registries, credentials (`//host/:_authToken` and
// the like), proxies, strict-ssl, and the CA. A setting naming a file on this machine (cafile,
// certfile, keyfile) is replaced by the file's content (ca, cert, key), since the build cannot see
// this machine's files; from a cafile only the certificates Node does not carry already (a private
// CA: the mirror's, a proxy's), since npm hands its settings to install scripts in the environment
// and a whole system bundle (about 200 KB) is more than one variable may hold (spawn E2BIG). `${VAR}`
// is expanded here, as npm would, since the build has no such variable. Everything else (nodedir,
// cache, prefix...) is left out: it describes this machine.
// The output holds credentials: give it to the build as a secret only, never COPY it.
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { rootCertificates } from 'node:tls'

const npm = (...args) => execFileSync('npm', args, { encoding: 'utf8' }).trim()

/** `key=value` lines of an npmrc, comments and blank lines dropped. */
function settings(file) {
  const found = []
  for (const raw of readFileSync(file, 'utf8').split(/\r?\n/)) {
    const line = raw.trim()
    if (!line || line.startsWith(';') || line.startsWith('#') || line.startsWith('[')) continue
    const eq = line.indexOf('=')
    if (eq < 0) continue
    const key = line.slice(0, eq).trim()
    let value = line.slice(eq + 1).trim()
    if (value.startsWith('"') && value.endsWith('"')) value = JSON.parse(value)
    else if (value.startsWith("'") && value.endsWith("'")) value = value.slice(1, -1)
    found.push([key, value.replace(/(\\*)\$\{([^${}]+)\}/g, (all, slashes, name) => (slashes.length % 2 ? all.slice(1) : slashes + (process.env[name] ?? '')))])
  }
  return found
}

// The settings that decide how the registry is reached; `//host/path/:name` are per-registry ones.
const REACH = new Set(['registry', '_auth', '_authToken', 'username', '_password', 'email', 'always-auth', 'ca', 'cafile', 'cert', 'certfile', 'key', 'keyfile', 'strict-ssl', 'proxy', 'https-proxy', 'http-proxy', 'noproxy', 'no-proxy'])
const FILE_SETTINGS = { cafile: 'ca', certfile: 'cert', keyfile: 'key' }

const pemBody = (pem) => pem.replace(/-----[^-]+-----|\s/g, '')
const bundled = new Set(rootCertificates.map(pemBody))
/** A CA file's certificates that Node does not carry already, as one PEM string. */
const privateCas = (file) =>
  (readFileSync(file, 'utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [])
    .filter((pem) => !bundled.has(pemBody(pem)))
    .join('\n')

const files = [npm('config', 'get', 'globalconfig'), npm('config', 'get', 'userconfig'), join(npm('prefix'), '.npmrc')]
const merged = new Map()
for (const file of files.filter((f, i) => existsSync(f) && files.indexOf(f) === i)) {
  for (const [key, value] of settings(file)) {
    const name = key.startsWith('//') ? key.slice(key.lastIndexOf(':') + 1) : key
    if (!REACH.has(name) && !/^@[^:]+:registry$/.test(key)) continue
    const asContent = FILE_SETTINGS[name]
    if (!asContent) merged.set(key, value)
    else {
      const content = asContent === 'ca' ? privateCas(value) : readFileSync(value, 'utf8')
      if (content) merged.set(key.slice(0, key.length - name.length) + asContent, content)
    }
  }
}
for (const [key, value] of merged) process.stdout.write(`${key}=${/[\n"'\\;#]/.test(value) || value !== value.trim() ? JSON.stringify(value) : value}\n`)
