import { describe, expect, it } from 'vitest'
import { parseManifests } from './manifest-parser.js'

const FILE = '/m/pods.yaml'

describe('parseManifests', () => {
  it('reads several documents, a List, and JSON, with the line of each object', () => {
    const text = [
      'apiVersion: v1',
      'kind: ConfigMap',
      'metadata: { name: a }',
      '---',
      'apiVersion: v1',
      'kind: List',
      'items:',
      '  - apiVersion: v1',
      '    kind: Secret',
      '    metadata: { name: s }',
      '    data: { k: dmFsdWU= }',
      '---',
      '{"apiVersion":"storage.k8s.io/v1","kind":"CSIDriver","metadata":{"name":"d.example.com"}}',
    ].join('\n')
    const { objects, errors } = parseManifests(text, FILE)
    expect(errors).toEqual([])
    expect(objects.map((o) => [o.kind, o.line])).toEqual([
      ['ConfigMap', 1],
      ['Secret', 8],
      ['CSIDriver', 13],
    ])
  })

  it.each([
    ['invalid YAML', 'kind: Pod\nmetadata: {name: a\n', 3, /^invalid YAML: /],
    ['an unknown kind', 'apiVersion: v1\nkind: Service\nmetadata: { name: a }\n', 2, /kind "Service" is not supported here; allowed: Pod, /],
    ['a pod without containers', 'apiVersion: v1\nkind: Pod\nmetadata: { name: a }\nspec:\n  volumes: []\n', 4, /^Pod a: spec\.containers: /],
    ['a bad name', 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_OK\n', 4, /^ConfigMap Not_OK: metadata\.name: must be a lowercase RFC 1123 subdomain$/],
    ['secret data that is not base64', 'apiVersion: v1\nkind: Secret\nmetadata: { name: s }\ndata:\n  k: "%%%"\n', 5, /^Secret s: data\.k: must be base64$/],
    ['a namespaced PV', 'apiVersion: v1\nkind: PersistentVolume\nmetadata: { name: p, namespace: x }\nspec: {}\n', 3, /metadata\.namespace: a cluster-scoped object has no namespace/],
    ['a duplicate key', 'apiVersion: v1\nkind: ConfigMap\nkind: Secret\nmetadata: { name: a }\n', 3, /^invalid YAML: /],
  ])('refuses %s with the file, the line of the field and the reason', (_name, text, line, reason) => {
    const { objects, errors } = parseManifests(text, FILE)
    expect(objects).toEqual([])
    expect(errors).toEqual([{ file: FILE, line, reason: expect.stringMatching(reason) }])
  })

  it('keeps the valid documents of a file with a broken one', () => {
    const text = 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: a }\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: { name: B }\n'
    const { objects, errors } = parseManifests(text, FILE)
    expect(objects.map((o) => (o.object.metadata as { name: string }).name)).toEqual(['a'])
    expect(errors).toEqual([{ file: FILE, line: 7, reason: expect.stringContaining('metadata.name') }])
  })

  it('ignores empty documents and comments', () => {
    expect(parseManifests('# nothing\n---\n---\n', FILE)).toEqual({ objects: [], errors: [] })
  })
})
