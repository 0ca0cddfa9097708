import { describe, expect, it } from 'vitest'
import { parseManifests } from './manifest-parser.js'

const FILE = '/m/pods.yaml'
const POD_HEAD = 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n'
const POD_SPEC = 'spec:\n  containers: [{ name: c, volumeMounts: [{ name: s, mountPath: /s, subPath: sub }] }]\n  volumes: [{ name: s, emptyDir: {} }]\n'

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
    ['a pod UID that leaves the root', `${POD_HEAD}  uid: ../../../x\n${POD_SPEC}`, 5, /^Pod a: metadata\.uid: Invalid value: "\.\.\/\.\.\/\.\.\/x": a pod UID must not contain '\/'$/],
    ['a pod UID that aliases another pod', `${POD_HEAD}  uid: victim/../victim\n${POD_SPEC}`, 5, /^Pod a: metadata\.uid: Invalid value: "victim\/\.\.\/victim"/],
    ['a pod UID of ..', `${POD_HEAD}  uid: ".."\n${POD_SPEC}`, 5, /^Pod a: metadata\.uid: Invalid value: "\.\.": a pod UID must not be '\.\.'$/],
    [
      'a container name that leaves the root',
      `${POD_HEAD}${POD_SPEC.replace('name: c', 'name: ../../../../tmp/x/target')}`,
      6,
      /^Pod a: spec\.containers\[0\]\.name: Invalid value: "\.\.\/\.\.\/\.\.\/\.\.\/tmp\/x\/target": a lowercase RFC 1123 label must consist of /,
    ],
    ['a mount of a volume the pod lacks', `${POD_HEAD}${POD_SPEC.replace('{ name: s, mountPath', '{ name: t, mountPath')}`, 6, /^Pod a: spec\.containers\[0\]\.volumeMounts\[0\]\.name: Not found: "t"$/],
    ['a traversing subPath', `${POD_HEAD}${POD_SPEC.replace('subPath: sub', 'subPath: ../up')}`, 6, /^Pod a: spec\.containers\[0\]\.volumeMounts\[0\]\.subPath: Invalid value: "\.\.\/up": must not contain '\.\.'$/],
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

  it('accepts a valid pod, and quotes a few of many field errors', () => {
    expect(parseManifests(`${POD_HEAD}${POD_SPEC}`, FILE).errors).toEqual([])
    const many = `${POD_HEAD}spec:\n  containers: [${Array.from({ length: 8 }, () => '{ name: X }').join(', ')}]\n`
    const [error] = parseManifests(many, FILE).errors
    expect(error?.reason.split('; ')).toHaveLength(6)
    expect(error?.reason).toMatch(/; and 3 more$/)
  })

  it('ignores empty documents and comments', () => {
    expect(parseManifests('# nothing\n---\n---\n', FILE)).toEqual({ objects: [], errors: [] })
  })
})
