/**
 * Hostile manifest files: malformed YAML and JSON, resource-exhaustion documents (an alias bomb,
 * deep nesting, a huge file), wrong types, control and unicode characters, prototype keys. Each
 * refuses its own file (or document) with a reason, never throws, and never stops the other files'
 * pods from being listed. Generated documents (fast-check; seed printed, `KUBEVOL_FC_SEED` replays,
 * `KUBEVOL_FC_RUNS` for more) hold the same properties.
 */
import { silentLogger } from '@kubevol/core'
import fc from 'fast-check'
import { stringify } from 'yaml'
import { afterEach, describe, expect, it } from 'vitest'
import { tempDir } from '../../test/helpers.js'
import { parseManifests } from './manifest-parser.js'
import { type ManifestSource, createManifestSource } from './manifest-source.js'

const GOOD = `apiVersion: v1
kind: Pod
metadata: { name: good }
spec:
  containers: [{ name: c, volumeMounts: [{ name: s, mountPath: /s }] }]
  volumes: [{ name: s, emptyDir: {} }]
`
const laughs = (levels: number): string => {
  let text = 'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
  for (let i = 1; i < levels; i++) text += `l${i}: &l${i} [${Array(9).fill(`*l${i - 1}`).join(',')}]\n`
  return `${text}kind: Pod\n`
}

const sources: ManifestSource[] = []
const dirs: { cleanup(): void }[] = []
afterEach(() => {
  for (const s of sources.splice(0)) s.stop()
  for (const d of dirs.splice(0)) d.cleanup()
})

const cases: { name: string; text: string | (() => string); reason: RegExp }[] = [
  { name: 'an alias bomb', text: laughs(10), reason: /^invalid YAML: .*alias/i },
  { name: 'deep nesting', text: () => `${'['.repeat(50_000)}${']'.repeat(50_000)}`, reason: /^invalid YAML: collections nested more than 100 levels deep$/ },
  { name: 'deep nesting in JSON', text: () => `{"a":${'{"a":'.repeat(5_000)}1${'}'.repeat(5_001)}`, reason: /^invalid YAML: collections nested more than 100 levels deep$/ },
  { name: 'deep block nesting', text: () => Array.from({ length: 2_000 }, (_, i) => `${' '.repeat(i)}a:`).join('\n'), reason: /^invalid YAML: Maximum call stack size exceeded|kind/ },
  { name: 'truncated JSON', text: '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"', reason: /^invalid YAML: / },
  { name: 'a NUL in a name', text: 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: "a\\0b" }\n', reason: /metadata\.name: must be a lowercase RFC 1123 subdomain/ },
  { name: 'a traversal in a name', text: 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: ../../etc }\n', reason: /metadata\.name: must be a lowercase RFC 1123 subdomain/ },
  { name: 'a right-to-left mark in a namespace', text: 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: a, namespace: "de\u202efault" }\n', reason: /metadata\.namespace: must be a lowercase RFC 1123 label/ },
  { name: 'a volume name with a slash', text: GOOD.replace('good', 'bad').replaceAll('name: s', 'name: a/b'), reason: /spec\.volumes\[0\]\.name: must be a lowercase RFC 1123 label/ },
  ...['../../../x', 'victim/../victim', 'a/b', '..', '.'].map((uid) => ({
    name: `the pod UID ${JSON.stringify(uid)}`,
    text: GOOD.replace('{ name: good }', `{ name: bad, uid: ${JSON.stringify(uid)} }`),
    reason: /^Pod bad: metadata\.uid: Invalid value: .*: a pod UID must not /,
  })),
  {
    name: 'a traversing container name with a subPath',
    text: GOOD.replace('good', 'bad').replace('{ name: c,', '{ name: ../../../../tmp/x/target,').replace('mountPath: /s', 'mountPath: /s, subPath: t'),
    reason: /^Pod bad: spec\.containers\[0\]\.name: Invalid value: "\.\.\/\.\.\/\.\.\/\.\.\/tmp\/x\/target": a lowercase RFC 1123 label/,
  },
  { name: 'containers that are a string', text: 'apiVersion: v1\nkind: Pod\nmetadata: { name: p }\nspec: { containers: nope }\n', reason: /spec\.containers: / },
  { name: 'a spec that is a number', text: 'apiVersion: v1\nkind: Pod\nmetadata: { name: p }\nspec: 5\n', reason: /Pod p: spec: / },
  { name: 'a document that is a list', text: '- a\n- b\n', reason: /expected an object/ },
  { name: 'a document that is a string', text: '"just text"\n', reason: /expected an object/ },
  { name: 'a YAML tag', text: '!!js/function "function () {}"\n', reason: /expected an object|invalid YAML/ },
  { name: 'binary garbage', text: '\u0000\u0001\u0002\ufffe\uffff', reason: /invalid YAML|expected an object/ },
  { name: 'a List whose items are not a list', text: 'apiVersion: v1\nkind: List\nitems: 3\n', reason: /a List needs items/ },
  { name: 'data values that are not strings', text: 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: c }\ndata: { k: [1, 2] }\n', reason: /ConfigMap c: data\.k: / },
]

describe('hostile manifest files', () => {
  it.each(cases)('$name is refused with a reason and does not stop the other files', async ({ text, reason }) => {
    const body = typeof text === 'function' ? text() : text
    expect(() => parseManifests(body, '/m/bad.yaml')).not.toThrow()
    const parsed = parseManifests(body, '/m/bad.yaml')
    expect(parsed.objects).toEqual([])
    expect(parsed.errors[0]?.reason).toMatch(reason)

    const d = tempDir()
    dirs.push(d)
    d.write('bad.yaml', body)
    d.write('good.yaml', GOOD)
    const source = createManifestSource({ dir: d.dir, nodeName: 'n1', rescanMs: 60_000, debounceMs: 5, logger: silentLogger })
    sources.push(source)
    await source.start()
    expect(source.pods.getPods().map((p) => p.metadata.name)).toEqual(['good'])
    expect(source.errors().map((e) => e.reason)).toEqual([expect.stringMatching(reason)])
  })

  it('prototype keys stay plain data', () => {
    const { objects } = parseManifests('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"__proto__":{"polluted":1},"data":{"__proto__":"x"}}', '/m/p.json')
    expect(objects).toHaveLength(1)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })

  it('refuses a huge file without reading it and keeps the others', async () => {
    const d = tempDir()
    dirs.push(d)
    d.write('huge.yaml', `# ${'x'.repeat(5 * 1024 * 1024)}\n`)
    d.write('good.yaml', GOOD)
    const source = createManifestSource({ dir: d.dir, nodeName: 'n1', rescanMs: 60_000, debounceMs: 5, logger: silentLogger })
    sources.push(source)
    await source.start()
    expect(source.pods.getPods().map((p) => p.metadata.name)).toEqual(['good'])
    expect(source.errors()).toEqual([{ file: expect.stringMatching(/huge\.yaml$/), line: 1, reason: expect.stringMatching(/more than the 4194304 a manifest file may have/) }])
  })

  it('never throws on generated documents, and keeps only valid objects', () => {
    const seed = process.env.KUBEVOL_FC_SEED ? Number(process.env.KUBEVOL_FC_SEED) : (Date.now() ^ (Math.random() * 0x7fffffff)) | 0
    const numRuns = process.env.KUBEVOL_FC_RUNS ? Math.max(500, Number(process.env.KUBEVOL_FC_RUNS)) : 2_000
    console.log(`manifest fuzz: seed ${seed}, ${numRuns} documents; replay with KUBEVOL_FC_SEED=${seed} npx vitest run --project agent src/sources/manifest-hostile.test.ts`)
    const name = fc.oneof(fc.constantFrom('a', 'good', '../x', 'A', 'a\u0000', ''), fc.string({ maxLength: 12 }))
    const podLike = fc.record({
      apiVersion: fc.oneof(fc.constant('v1'), fc.anything()),
      kind: fc.oneof(fc.constantFrom('Pod', 'ConfigMap', 'Secret', 'List', 'PersistentVolume'), fc.anything()),
      metadata: fc.oneof(fc.record({ name }), fc.anything()),
      spec: fc.oneof(
        fc.record({ containers: fc.array(fc.record({ name, volumeMounts: fc.array(fc.record({ name, mountPath: fc.string() }), { maxLength: 2 }) }), { maxLength: 2 }), volumes: fc.array(fc.record({ name, emptyDir: fc.anything() }), { maxLength: 2 }) }),
        fc.anything(),
      ),
      data: fc.oneof(fc.dictionary(fc.string(), fc.string()), fc.anything()),
    })
    const text = fc.oneof(
      podLike.map((o) => JSON.stringify(o) ?? ''),
      podLike.map((o) => {
        try {
          return stringify(o)
        } catch {
          return ''
        }
      }),
      fc.string({ unit: 'binary', maxLength: 400 }),
      fc.array(fc.constantFrom('---\n', 'kind: Pod\n', 'a: &x [1]\n', 'b: *x\n', '{', '[', '"', 'metadata: {name: a}\n', '\t', '? ', ': ', '!!binary ', '%YAML 1.2\n'), { maxLength: 30 }).map((p) => p.join('')),
    )
    fc.assert(
      fc.property(text, (body) => {
        const { objects, errors } = parseManifests(body, '/m/f.yaml')
        for (const o of objects) {
          const meta = o.object.metadata as { name?: unknown }
          expect(typeof meta.name === 'string' && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(meta.name)).toBe(true)
        }
        for (const e of errors) expect(e.line).toBeGreaterThanOrEqual(1)
      }),
      { seed, numRuns },
    )
  })
})
