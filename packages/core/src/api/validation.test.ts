import { describe, expect, it } from 'vitest'
import { createPaths, safePathComponent } from '../paths.js'
import { subPathTarget } from '../operations/subpath.js'
import { pathComponentError, podUIDError, validatePod, validatePodPathNames } from './validation.js'
import type { Pod } from './kubernetes.js'

const LABEL =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
const SUBDOMAIN =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"

// biome-ignore lint/suspicious/noExplicitAny: the cases edit a free-form object, wrong types included
type Loose = Record<string, any>
type Edit = (pod: Loose) => void

/** A valid pod, edited by `edit`. */
function pod(edit: Edit = () => {}): Loose {
  const p: Loose = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web', namespace: 'default', uid: '0f4b4e8c-6f1a-4a52-9d0e-2f8a7e6c1b3d' },
    spec: {
      volumes: [
        { name: 'data', emptyDir: {} },
        { name: 'disk', persistentVolumeClaim: { claimName: 'disk' } },
      ],
      initContainers: [{ name: 'init', volumeMounts: [{ name: 'data', mountPath: '/data', subPath: 'init' }] }],
      containers: [{ name: 'main', volumeMounts: [{ name: 'data', mountPath: '/data' }], volumeDevices: [{ name: 'disk', devicePath: '/dev/xvda' }] }],
    },
  }
  edit(p)
  return p
}

describe('validatePod: what the API server refuses, in its words', () => {
  it('accepts a valid pod, UUID and static-pod hash UIDs, and no UID at all', () => {
    expect(validatePod(pod())).toEqual([])
    expect(validatePod(pod((p) => (p.metadata.uid = 'd41d8cd98f00b204e9800998ecf8427e')))).toEqual([])
    expect(validatePod(pod((p) => delete p.metadata.uid))).toEqual([])
    expect(validatePod(pod((p) => (p.metadata.name = 'web.example-1')))).toEqual([])
    const privilegedBidirectional = (p: Loose) => {
      p.spec.containers[0].securityContext = { privileged: true }
      p.spec.containers[0].volumeMounts.push({ name: 'data', mountPath: '/b', mountPropagation: 'Bidirectional' }, { name: 'data', mountPath: '/r', readOnly: true, recursiveReadOnly: 'IfPossible', mountPropagation: 'None' })
    }
    expect(validatePod(pod(privilegedBidirectional))).toEqual([])
  })

  it.each<{ name: string; edit: Edit; errors: string[] }>([
    { name: 'a traversing UID', edit: (p) => (p.metadata.uid = '../../../x'), errors: ['metadata.uid: Invalid value: "../../../x": a pod UID must not contain \'/\''] },
    { name: 'an aliasing UID', edit: (p) => (p.metadata.uid = 'victim/../victim'), errors: ['metadata.uid: Invalid value: "victim/../victim": a pod UID must not contain \'/\''] },
    { name: 'a UID that is ..', edit: (p) => (p.metadata.uid = '..'), errors: ['metadata.uid: Invalid value: "..": a pod UID must not be \'..\''] },
    { name: 'a UID that is .', edit: (p) => (p.metadata.uid = '.'), errors: ['metadata.uid: Invalid value: ".": a pod UID must not be \'.\''] },
    { name: 'a UID holding ..', edit: (p) => (p.metadata.uid = 'a..b'), errors: ['metadata.uid: Invalid value: "a..b": a pod UID must not contain \'..\''] },
    { name: 'an empty UID', edit: (p) => (p.metadata.uid = ''), errors: ['metadata.uid: Invalid value: "": a pod UID must not be empty'] },
    { name: 'a NUL in the UID', edit: (p) => (p.metadata.uid = 'a\u0000b'), errors: ['metadata.uid: Invalid value: "a\\u0000b": a pod UID must not contain control characters'] },
    { name: 'a newline in the UID', edit: (p) => (p.metadata.uid = 'a\nb'), errors: ['metadata.uid: Invalid value: "a\\nb": a pod UID must not contain control characters'] },
    { name: 'a lone surrogate in the UID', edit: (p) => (p.metadata.uid = 'a\uD800'), errors: ['metadata.uid: Invalid value: "a\\ud800": a pod UID must be valid unicode'] },
    { name: 'an overlong UID', edit: (p) => (p.metadata.uid = 'u'.repeat(129)), errors: [`metadata.uid: Invalid value: "${'u'.repeat(80)}…": a pod UID must be no more than 128 characters`] },
    { name: 'a UID that is a number', edit: (p) => (p.metadata.uid = 7), errors: ['metadata.uid: Invalid value: "7": must be a string'] },
    { name: 'a bad name', edit: (p) => (p.metadata.name = '../x'), errors: [`metadata.name: Invalid value: "../x": ${SUBDOMAIN}`] },
    { name: 'no name', edit: (p) => delete p.metadata.name, errors: ['metadata.name: Required value: name or generateName is required'] },
    { name: 'a bad namespace', edit: (p) => (p.metadata.namespace = 'a.b'), errors: [`metadata.namespace: Invalid value: "a.b": ${LABEL}`] },
    {
      name: 'a traversing container name',
      edit: (p) => (p.spec.containers[0].name = '../../../../tmp/x/target'),
      errors: [`spec.containers[0].name: Invalid value: "../../../../tmp/x/target": ${LABEL}`],
    },
    { name: 'a bad init container name', edit: (p) => (p.spec.initContainers[0].name = 'A'), errors: [`spec.initContainers[0].name: Invalid value: "A": ${LABEL}`] },
    {
      name: 'a bad ephemeral container name',
      edit: (p) => (p.spec.ephemeralContainers = [{ name: 'x/y' }]),
      errors: [`spec.ephemeralContainers[0].name: Invalid value: "x/y": ${LABEL}`],
    },
    { name: 'a container name used twice', edit: (p) => (p.spec.initContainers[0].name = 'main'), errors: ['spec.containers[0].name: Duplicate value: "main"'] },
    { name: 'a container without a name', edit: (p) => delete p.spec.containers[0].name, errors: ['spec.containers[0].name: Required value'] },
    { name: 'no containers', edit: (p) => (p.spec.containers = []), errors: ['spec.containers: Required value'] },
    {
      name: 'a bad volume name (its mounts then name no volume, as the API server says too)',
      edit: (p) => (p.spec.volumes[0].name = '..'),
      errors: [`spec.volumes[0].name: Invalid value: "..": ${LABEL}`, 'spec.initContainers[0].volumeMounts[0].name: Not found: "data"', 'spec.containers[0].volumeMounts[0].name: Not found: "data"'],
    },
    { name: 'a volume name used twice', edit: (p) => (p.spec.volumes[1] = { name: 'data', emptyDir: {} }), errors: ['spec.volumes[1].name: Duplicate value: "data"', 'spec.containers[0].volumeDevices[0].name: Not found: "disk"'] },
    { name: 'a mount of a missing volume', edit: (p) => (p.spec.containers[0].volumeMounts[0].name = 'nope'), errors: ['spec.containers[0].volumeMounts[0].name: Not found: "nope"'] },
    { name: 'a mount without a path', edit: (p) => delete p.spec.containers[0].volumeMounts[0].mountPath, errors: ['spec.containers[0].volumeMounts[0].mountPath: Required value'] },
    {
      name: 'a mount path used twice',
      edit: (p) => p.spec.containers[0].volumeMounts.push({ name: 'data', mountPath: '/data' }),
      errors: ['spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/data": must be unique'],
    },
    { name: 'an absolute subPath', edit: (p) => (p.spec.initContainers[0].volumeMounts[0].subPath = '/etc'), errors: ['spec.initContainers[0].volumeMounts[0].subPath: Invalid value: "/etc": must be a relative path'] },
    { name: 'a traversing subPath', edit: (p) => (p.spec.initContainers[0].volumeMounts[0].subPath = 'a/../../b'), errors: ['spec.initContainers[0].volumeMounts[0].subPath: Invalid value: "a/../../b": must not contain \'..\''] },
    {
      name: 'a traversing subPathExpr',
      edit: (p) => (p.spec.containers[0].volumeMounts[0].subPathExpr = '$(X)/..'),
      errors: ['spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: "$(X)/..": must not contain \'..\''],
    },
    {
      name: 'subPath and subPathExpr together',
      edit: (p) => (p.spec.initContainers[0].volumeMounts[0].subPathExpr = 'x'),
      errors: ['spec.initContainers[0].volumeMounts[0].subPathExpr: Invalid value: "x": subPathExpr and subPath are mutually exclusive'],
    },
    {
      name: 'a subPath in an ephemeral container',
      edit: (p) => (p.spec.ephemeralContainers = [{ name: 'debug', volumeMounts: [{ name: 'data', mountPath: '/d', subPath: 'x' }] }]),
      errors: ['spec.ephemeralContainers[0].volumeMounts[0].subPath: Forbidden: cannot be set for an Ephemeral Container'],
    },
    {
      name: 'a subPathExpr in an ephemeral container',
      edit: (p) => (p.spec.ephemeralContainers = [{ name: 'debug', volumeMounts: [{ name: 'data', mountPath: '/d', subPathExpr: 'x' }] }]),
      errors: ['spec.ephemeralContainers[0].volumeMounts[0].subPathExpr: Forbidden: cannot be set for an Ephemeral Container'],
    },
    {
      name: 'an unknown mountPropagation',
      edit: (p) => (p.spec.containers[0].volumeMounts[0].mountPropagation = 'Shared'),
      errors: ['spec.containers[0].volumeMounts[0].mountPropagation: Unsupported value: "Shared": supported values: "Bidirectional", "HostToContainer", "None"'],
    },
    {
      name: 'Bidirectional in an unprivileged container',
      edit: (p) => (p.spec.containers[0].volumeMounts[0].mountPropagation = 'Bidirectional'),
      errors: ['spec.containers[0].volumeMounts[0].mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers'],
    },
    {
      name: 'recursiveReadOnly without readOnly, with propagation',
      edit: (p) => Object.assign(p.spec.containers[0].volumeMounts[0], { recursiveReadOnly: 'Enabled', mountPropagation: 'HostToContainer' }),
      errors: [
        'spec.containers[0].volumeMounts[0].recursiveReadOnly: Forbidden: may only be specified when readOnly is true',
        'spec.containers[0].volumeMounts[0].recursiveReadOnly: Forbidden: may only be specified when mountPropagation is None or not specified',
      ],
    },
    {
      name: 'an unknown recursiveReadOnly',
      edit: (p) => Object.assign(p.spec.containers[0].volumeMounts[0], { recursiveReadOnly: 'Always', readOnly: true }),
      errors: ['spec.containers[0].volumeMounts[0].recursiveReadOnly: Unsupported value: "Always": supported values: "Disabled", "Enabled", "IfPossible"'],
    },
    { name: 'a device of a missing volume', edit: (p) => (p.spec.containers[0].volumeDevices[0].name = 'nope'), errors: ['spec.containers[0].volumeDevices[0].name: Not found: "nope"'] },
    {
      name: 'a device of an inline volume',
      edit: (p) => (p.spec.containers[0].volumeDevices[0].name = 'data'),
      errors: [
        'spec.containers[0].volumeDevices[0].name: Invalid value: "data": can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode',
        'spec.containers[0].volumeDevices[0].name: Invalid value: "data": must not already exist in volumeMounts',
      ],
    },
    {
      name: 'a traversing device path',
      edit: (p) => (p.spec.containers[0].volumeDevices[0].devicePath = '/dev/../etc/x'),
      errors: ['spec.containers[0].volumeDevices[0].devicePath: Invalid value: "/dev/../etc/x": can not contain backsteps (\'..\')'],
    },
    {
      name: 'a device path that is a mount path',
      edit: (p) => (p.spec.containers[0].volumeDevices[0].devicePath = '/data'),
      errors: ['spec.containers[0].volumeDevices[0].devicePath: Invalid value: "/data": must not already exist as a path in volumeMounts'],
    },
    { name: 'containers that are a string', edit: (p) => (p.spec.containers = 'nope'), errors: ['spec.containers: Required value', 'spec.containers: Invalid value: must be a list'] },
    { name: 'a mount that is a number', edit: (p) => (p.spec.containers[0].volumeMounts = [5]), errors: ['spec.containers[0].volumeMounts[0]: Invalid value: must be an object'] },
  ])('$name', ({ edit, errors }) => {
    expect(validatePod(pod(edit)).map((e) => e.message)).toEqual(errors)
  })

  it('gives the path of each error, for the line of a manifest', () => {
    expect(validatePod(pod((p) => (p.spec.containers[0].name = 'X')))[0]?.path).toEqual(['spec', 'containers', 0, 'name'])
  })

  it('never throws on what a manifest may hold', () => {
    for (const value of [null, 3, 'pod', [], { metadata: 5, spec: [] }, { metadata: {}, spec: { containers: [null, [], { name: 5, volumeMounts: 'x' }] } }]) {
      expect(() => validatePod(value)).not.toThrow()
      expect(validatePod(value).length).toBeGreaterThan(0)
    }
  })
})

describe('validatePodPathNames: the minimum for a pod from any source', () => {
  it.each(['../../../x', 'victim/../victim', 'a/b', '..', '.', '', 'a\u0000'])('refuses the UID %j', (uid) => {
    const errors = validatePodPathNames(pod((p) => (p.metadata.uid = uid)) as unknown as Pod)
    expect(errors.map((e) => e.path.join('.'))).toEqual(['metadata.uid'])
  })

  it('refuses container and volume names that are not one path component, and a missing UID', () => {
    const bad = pod((p) => {
      delete p.metadata.uid
      p.spec.volumes[0].name = 'a/b'
      p.spec.containers[0].name = '../../../../tmp/x/target'
    }) as unknown as Pod
    expect(validatePodPathNames(bad).map((e) => e.message)).toEqual([
      'metadata.uid: Invalid value: "undefined": must be a string',
      'spec.volumes[0].name: Invalid value: "a/b": must not contain \'/\'',
      'spec.containers[0].name: Invalid value: "../../../../tmp/x/target": must not contain \'/\'',
    ])
  })

  it('accepts odd but safe names (what an API server may send)', () => {
    expect(validatePodPathNames(pod((p) => (p.metadata.uid = 'Pod_1:x')) as unknown as Pod)).toEqual([])
  })
})

describe('paths refuse what is not one path component (the last line of defence)', () => {
  const paths = createPaths('/var/lib/kubevol')
  it.each(['..', '.', '', 'a/b', '../../x', 'a\u0000b', 'x'.repeat(256)])('%j', (bad) => {
    expect(() => paths.podDir(bad)).toThrow(/^refusing pod UID .* as a path component: it must /)
    expect(() => paths.podVolumeDir('u1', 'kubernetes.io/empty-dir', bad)).toThrow(/^refusing volume name .* as a path component/)
    expect(() => paths.podSubPathsDir('u1', bad)).toThrow(/^refusing volume name/)
    expect(() => subPathTarget('/r/pods/u1/volume-subpaths/v', { container: bad, index: 0, subPath: 's', readOnly: false })).toThrow(/^refusing container name/)
  })

  it('joins safe components as before', () => {
    expect(paths.podVolumeDir('u1', 'kubernetes.io/empty-dir', 'pv.1')).toBe('/var/lib/kubevol/pods/u1/volumes/kubernetes.io~empty-dir/pv.1')
    expect(safePathComponent('pod UID', 'a..b')).toBe('a..b')
    expect(pathComponentError('é'.repeat(127))).toBeNull()
    expect(pathComponentError('é'.repeat(128))).toBe('must be no more than 255 bytes')
    expect(podUIDError('0f4b4e8c-6f1a-4a52-9d0e-2f8a7e6c1b3d')).toBeNull()
  })
})
