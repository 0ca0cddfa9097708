import { describe, expect, it } from 'vitest'
import type { Container, Pod, VolumeMount } from '../api/kubernetes.js'
import type { UniqueVolumeName } from '../api/names.js'
import { ContainerMountsError } from '../errors.js'
import type { MountedVolumeInfo } from '../manager/pod-waiters.js'
import { containerMounts } from './container-mounts.js'
import { ociMounts, ociRootfsPropagation } from './oci-mounts.js'

const POD_DIR = '/var/lib/kubevol/pods/u1'

/** A mounted file system volume as the manager reports it. */
function fsVolume(name: string, plugin: string, attributes: { readOnly?: boolean; managed?: boolean; seLinuxRelabel?: boolean } = {}, extra: Partial<MountedVolumeInfo> = {}): MountedVolumeInfo {
  return {
    volumeName: `${plugin}/u1-${name}` as UniqueVolumeName,
    innerVolumeSpecName: name,
    pluginName: plugin,
    readOnly: false,
    volumeGidValue: '',
    seLinuxMountContext: '',
    filesystem: {
      path: `${POD_DIR}/volumes/${plugin.replace('/', '~')}/${name}`,
      attributes: { readOnly: false, managed: true, seLinuxRelabel: true, ...attributes },
      subPathsDir: `${POD_DIR}/volume-subpaths/${name}`,
    },
    ...extra,
  }
}

function blockVolume(name: string, readOnly = false): MountedVolumeInfo {
  return {
    volumeName: `kubevol.io/file-disk/${name}` as UniqueVolumeName,
    innerVolumeSpecName: `pv-${name}`,
    pluginName: 'kubevol.io/file-disk',
    readOnly,
    volumeGidValue: '',
    seLinuxMountContext: '',
    block: { devicePath: `${POD_DIR}/volumeDevices/kubevol.io~file-disk/pv-${name}` },
  }
}

const VOLUMES = new Map<string, MountedVolumeInfo>([
  ['cache', fsVolume('cache', 'kubernetes.io/empty-dir')],
  ['config', fsVolume('config', 'kubernetes.io/configmap', { readOnly: true })],
  ['host', fsVolume('host', 'kubernetes.io/host-path', { managed: false, seLinuxRelabel: false })],
  ['labelled', fsVolume('labelled', 'kubernetes.io/csi', {}, { seLinuxMountContext: 'system_u:object_r:container_file_t:s0:c1,c2' })],
  ['disk', blockVolume('disk')],
  ['ro-disk', blockVolume('ro-disk', true)],
])

function pod(container: Partial<Container>, list: 'containers' | 'initContainers' | 'ephemeralContainers' = 'containers'): Pod {
  const c: Container = { name: 'app', ...container }
  return {
    metadata: { namespace: 'default', name: 'web', uid: 'u1', labels: { tier: 'front' } },
    spec: {
      containers: list === 'containers' ? [c] : [{ name: 'main' }],
      ...(list === 'containers' ? {} : { [list]: [c] }),
    },
  }
}

const mountOf = (m: VolumeMount, container: Partial<Container> = {}, runtimeSupportsRecursiveReadOnly = false) =>
  containerMounts(pod({ volumeMounts: [m], ...container }), 'app', VOLUMES, { runtimeSupportsRecursiveReadOnly }).mounts[0]

describe('containerMounts: each volumeMount as the CRI Mount the kubelet makes', () => {
  it.each([
    {
      name: 'an emptyDir, writable, private, relabelled',
      mount: { name: 'cache', mountPath: '/cache' },
      want: { hostPath: `${POD_DIR}/volumes/kubernetes.io~empty-dir/cache`, readonly: false, selinuxRelabel: true, propagation: 'PROPAGATION_PRIVATE', recursiveReadOnly: false },
    },
    {
      name: 'a configMap: read-only because its plugin says so',
      mount: { name: 'config', mountPath: '/etc/config' },
      want: { readonly: true },
    },
    { name: 'readOnly from the volumeMount', mount: { name: 'cache', mountPath: '/cache', readOnly: true }, want: { readonly: true } },
    { name: 'a hostPath: not managed, so never relabelled', mount: { name: 'host', mountPath: '/host' }, want: { selinuxRelabel: false } },
    { name: 'mounted with an SELinux context: not relabelled again', mount: { name: 'labelled', mountPath: '/l' }, want: { selinuxRelabel: false } },
    { name: 'None is private', mount: { name: 'host', mountPath: '/h', mountPropagation: 'None' }, want: { propagation: 'PROPAGATION_PRIVATE' } },
    { name: 'HostToContainer', mount: { name: 'host', mountPath: '/h', mountPropagation: 'HostToContainer' }, want: { propagation: 'PROPAGATION_HOST_TO_CONTAINER' } },
    { name: 'a relative mountPath made absolute', mount: { name: 'cache', mountPath: 'cache' }, want: { containerPath: '/cache' } },
    { name: 'a subPath: the bind the manager made, named by container and index', mount: { name: 'cache', mountPath: '/c', subPath: 'a/b' }, want: { hostPath: `${POD_DIR}/volume-subpaths/cache/app/0` } },
    {
      name: 'recursiveReadOnly IfPossible on a runtime that cannot: plain read-only',
      mount: { name: 'cache', mountPath: '/c', readOnly: true, recursiveReadOnly: 'IfPossible' },
      want: { readonly: true, recursiveReadOnly: false },
    },
  ] as const)('$name', ({ mount, want }) => {
    expect(mountOf(mount)).toMatchObject(want)
  })

  it('gives every mount in the order of volumeMounts, with the volume name', () => {
    const { mounts, devices } = containerMounts(
      pod({
        volumeMounts: [
          { name: 'config', mountPath: '/etc/config' },
          { name: 'cache', mountPath: '/cache' },
        ],
      }),
      'app',
      VOLUMES,
    )
    expect(mounts.map((m) => [m.name, m.containerPath])).toEqual([
      ['config', '/etc/config'],
      ['cache', '/cache'],
    ])
    expect(devices).toEqual([])
  })

  it('recursiveReadOnly IfPossible and Enabled on a runtime that can: recursive', () => {
    for (const mode of ['IfPossible', 'Enabled'] as const) {
      expect(mountOf({ name: 'cache', mountPath: '/c', readOnly: true, recursiveReadOnly: mode }, {}, true)).toMatchObject({ readonly: true, recursiveReadOnly: true })
    }
  })

  it('Bidirectional in a privileged container', () => {
    expect(mountOf({ name: 'host', mountPath: '/h', mountPropagation: 'Bidirectional' }, { securityContext: { privileged: true } })).toMatchObject({ propagation: 'PROPAGATION_BIDIRECTIONAL' })
  })

  it('the subPath bind of the second mount of an init container is its own', () => {
    const p = pod(
      {
        volumeMounts: [
          { name: 'cache', mountPath: '/a' },
          { name: 'cache', mountPath: '/b', subPath: 'x' },
        ],
      },
      'initContainers',
    )
    expect(containerMounts(p, 'app', VOLUMES).mounts.map((m) => m.hostPath)).toEqual([`${POD_DIR}/volumes/kubernetes.io~empty-dir/cache`, `${POD_DIR}/volume-subpaths/cache/app/1`])
  })

  it('expands subPathExpr from the container env (values and fieldRefs)', () => {
    const container = {
      env: [
        { name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
        { name: 'DIR', value: '$(POD)-logs' },
      ],
    }
    expect(mountOf({ name: 'cache', mountPath: '/c', subPathExpr: '$(DIR)' }, container)?.hostPath).toBe(`${POD_DIR}/volume-subpaths/cache/app/0`)
  })
})

describe('containerMounts: devices', () => {
  it('a claim in volumeDevices is the pod link of the mapped device, mrw, or r when read-only', () => {
    const { devices } = containerMounts(
      pod({
        volumeDevices: [
          { name: 'disk', devicePath: '/dev/xvda' },
          { name: 'ro-disk', devicePath: '/dev/xvdb' },
        ],
      }),
      'app',
      VOLUMES,
    )
    expect(devices).toEqual([
      { containerPath: '/dev/xvda', hostPath: `${POD_DIR}/volumeDevices/kubevol.io~file-disk/pv-disk`, permissions: 'mrw' },
      { containerPath: '/dev/xvdb', hostPath: `${POD_DIR}/volumeDevices/kubevol.io~file-disk/pv-ro-disk`, permissions: 'r' },
    ])
  })
})

describe('containerMounts: refused, in the kubelet words', () => {
  it.each([
    { name: 'a volume not mounted yet', container: { volumeMounts: [{ name: 'later', mountPath: '/l' }] }, error: 'cannot find volume "later" to mount into container "app"' },
    { name: 'a block volume in volumeMounts', container: { volumeMounts: [{ name: 'disk', mountPath: '/d' }] }, error: 'cannot find volume "disk" to mount into container "app"' },
    { name: 'a device not mapped yet', container: { volumeDevices: [{ name: 'later', devicePath: '/dev/x' }] }, error: 'cannot find volume "later" to pass into container "app"' },
    { name: 'a file system volume in volumeDevices', container: { volumeDevices: [{ name: 'cache', devicePath: '/dev/x' }] }, error: 'cannot find volume "cache" to pass into container "app"' },
    { name: 'a relative devicePath', container: { volumeDevices: [{ name: 'disk', devicePath: 'dev/x' }] }, error: 'error DevicePath `dev/x` must be an absolute path' },
    { name: 'an absolute subPath', container: { volumeMounts: [{ name: 'cache', mountPath: '/c', subPath: '/etc' }] }, error: 'error SubPath `/etc` must not be an absolute path' },
    { name: 'a subPath with ..', container: { volumeMounts: [{ name: 'cache', mountPath: '/c', subPath: 'a/../../b' }] }, error: "unable to provision SubPath `a/../../b`: must not contain '..'" },
    {
      name: 'a subPathExpr that expands to ..',
      container: { env: [{ name: 'D', value: '..' }], volumeMounts: [{ name: 'cache', mountPath: '/c', subPathExpr: '$(D)/x' }] },
      error: "unable to provision SubPath `../x`: must not contain '..'",
    },
    {
      name: 'a subPathExpr with variables that have no value',
      container: { env: [{ name: 'EMPTY', value: '' }], volumeMounts: [{ name: 'cache', mountPath: '/c', subPathExpr: '$(NOPE)/$(EMPTY)' }] },
      error: 'missing value for EMPTY, NOPE',
    },
    { name: 'an unknown propagation', container: { volumeMounts: [{ name: 'host', mountPath: '/h', mountPropagation: 'Shared' }] }, error: 'invalid MountPropagation mode: "Shared"' },
    {
      name: 'Bidirectional in an unprivileged container',
      container: { volumeMounts: [{ name: 'host', mountPath: '/h', mountPropagation: 'Bidirectional' }] },
      error: 'spec.containers[0].volumeMounts[0].mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers',
    },
    {
      name: 'recursiveReadOnly without readOnly',
      container: { volumeMounts: [{ name: 'cache', mountPath: '/c', recursiveReadOnly: 'Enabled' }] },
      error: 'failed to resolve recursive read-only mode: volume "cache" requested recursive read-only mode, but it is not read-only',
    },
    {
      name: 'recursiveReadOnly with propagation',
      container: { volumeMounts: [{ name: 'host', mountPath: '/h', readOnly: true, recursiveReadOnly: 'IfPossible', mountPropagation: 'HostToContainer' }] },
      error: 'failed to resolve recursive read-only mode: volume "host" requested recursive read-only mode, but it is not compatible with propagation "HostToContainer"',
    },
    {
      name: 'recursiveReadOnly Enabled on a runtime that cannot',
      container: { volumeMounts: [{ name: 'cache', mountPath: '/c', readOnly: true, recursiveReadOnly: 'Enabled' }] },
      error: 'failed to resolve recursive read-only mode: volume "cache" requested recursive read-only mode, but it is not supported by the runtime',
    },
    {
      name: 'an unknown recursiveReadOnly mode',
      container: { volumeMounts: [{ name: 'cache', mountPath: '/c', readOnly: true, recursiveReadOnly: 'Always' }] },
      error: 'failed to resolve recursive read-only mode: unknown recursive read-only mode "Always"',
    },
  ] as const)('$name', ({ container, error }) => {
    const call = () => containerMounts(pod(container as Partial<Container>), 'app', VOLUMES)
    expect(call).toThrow(ContainerMountsError)
    expect(call).toThrow(error)
  })

  it('a container not in the pod', () => {
    expect(() => containerMounts(pod({}), 'nope', VOLUMES)).toThrow('container nope not found in pod default/web')
  })

  it('a subPath in an ephemeral container', () => {
    const p = pod({ volumeMounts: [{ name: 'cache', mountPath: '/c', subPath: 'x' }] }, 'ephemeralContainers')
    expect(() => containerMounts(p, 'app', VOLUMES)).toThrow('spec.ephemeralContainers[0].volumeMounts[0].subPath: Forbidden: cannot be set for an Ephemeral Container')
  })

  it('an ephemeral container without subPath gets its mounts', () => {
    const p = pod({ volumeMounts: [{ name: 'cache', mountPath: '/c' }] }, 'ephemeralContainers')
    expect(containerMounts(p, 'app', VOLUMES).mounts[0]?.hostPath).toBe(`${POD_DIR}/volumes/kubernetes.io~empty-dir/cache`)
  })
})

describe('ociMounts', () => {
  it('writes bind mounts as containerd does for runc and crun', () => {
    const { mounts } = containerMounts(
      pod({
        securityContext: { privileged: true },
        volumeMounts: [
          { name: 'cache', mountPath: '/cache' },
          { name: 'config', mountPath: '/etc/config' },
          { name: 'host', mountPath: '/h', mountPropagation: 'HostToContainer' },
          { name: 'labelled', mountPath: '/b', mountPropagation: 'Bidirectional' },
          { name: 'cache', mountPath: '/rro', readOnly: true, recursiveReadOnly: 'Enabled' },
        ],
      }),
      'app',
      VOLUMES,
      { runtimeSupportsRecursiveReadOnly: true },
    )
    expect(ociMounts(mounts).map((m) => [m.destination, m.type, m.options.join(',')])).toEqual([
      ['/cache', 'bind', 'rbind,rprivate,rw'],
      ['/etc/config', 'bind', 'rbind,rprivate,ro'],
      ['/h', 'bind', 'rbind,rslave,rw'],
      ['/b', 'bind', 'rbind,rshared,rw'],
      ['/rro', 'bind', 'rbind,rprivate,ro,rro'],
    ])
    expect(ociMounts(mounts)[0]?.source).toBe(`${POD_DIR}/volumes/kubernetes.io~empty-dir/cache`)
    expect(ociRootfsPropagation(mounts)).toBe('rshared')
    expect(ociRootfsPropagation(mounts.slice(0, 3))).toBe('rslave')
    expect(ociRootfsPropagation(mounts.slice(0, 2))).toBeUndefined()
  })
})
