/**
 * Builders for the objects tests need, with every field a test does not care about filled in.
 */
import type { Container, PersistentVolume, PersistentVolumeClaim, Pod, Volume } from '../api/kubernetes.js'

export interface PodBuilderOptions {
  readonly name?: string
  readonly namespace?: string
  readonly uid?: string
  /** Pod volumes; each is mounted by the one container unless listed in `unused` or `devices`. */
  readonly volumes?: readonly Volume[]
  /** Volume names used as `volumeDevices` instead of mounts. */
  readonly devices?: readonly string[]
  /** Volume names no container uses. */
  readonly unused?: readonly string[]
  readonly fsGroup?: number
  readonly supplementalGroups?: readonly number[]
  readonly nodeName?: string
}

let podCounter = 0

/** A pod with one container mounting each volume at `/mnt/<name>`. */
export function buildPod(options: PodBuilderOptions = {}): Pod {
  const n = ++podCounter
  const name = options.name ?? `pod-${n}`
  const volumes = options.volumes ?? []
  const devices = new Set(options.devices ?? [])
  const unused = new Set(options.unused ?? [])
  const container: Container = {
    name: 'main',
    image: 'busybox',
    volumeMounts: volumes.filter((v) => !devices.has(v.name) && !unused.has(v.name)).map((v) => ({ name: v.name, mountPath: `/mnt/${v.name}` })),
    volumeDevices: volumes.filter((v) => devices.has(v.name)).map((v) => ({ name: v.name, devicePath: `/dev/${v.name}` })),
  }
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: options.namespace ?? 'default', uid: options.uid ?? `uid-${name}` },
    spec: {
      nodeName: options.nodeName ?? 'node-1',
      volumes,
      containers: [container],
      securityContext: {
        ...(options.fsGroup === undefined ? {} : { fsGroup: options.fsGroup }),
        ...(options.supplementalGroups ? { supplementalGroups: options.supplementalGroups } : {}),
      },
    },
  }
}

/** An inline volume of a fake plugin (`kubevol.io/fake` unless `plugin` names another). */
export function fakeVolume(name: string, device = name, plugin?: string): Volume {
  return { name, fake: { name: device, ...(plugin ? { plugin } : {}) } }
}

/** A bound PVC and its PV of the fake plugin. */
export function buildClaim(options: {
  readonly claim: string
  readonly pv?: string
  readonly namespace?: string
  readonly capacity?: string
  readonly accessModes?: readonly string[]
  readonly volumeMode?: 'Filesystem' | 'Block'
  readonly gid?: string
  readonly pvSource?: Record<string, unknown>
}): { pvc: PersistentVolumeClaim; pv: PersistentVolume } {
  const namespace = options.namespace ?? 'default'
  const pvName = options.pv ?? `pv-${options.claim}`
  const claimUid = `uid-pvc-${options.claim}`
  const capacity = { storage: options.capacity ?? '1Gi' }
  const pvc: PersistentVolumeClaim = {
    metadata: { name: options.claim, namespace, uid: claimUid },
    spec: { volumeName: pvName, accessModes: options.accessModes ?? ['ReadWriteOnce'], volumeMode: options.volumeMode ?? 'Filesystem' },
    status: { phase: 'Bound', capacity },
  }
  const pv: PersistentVolume = {
    metadata: { name: pvName, ...(options.gid ? { annotations: { 'pv.beta.kubernetes.io/gid': options.gid } } : {}) },
    spec: {
      capacity,
      accessModes: options.accessModes ?? ['ReadWriteOnce'],
      volumeMode: options.volumeMode ?? 'Filesystem',
      claimRef: { name: options.claim, namespace, uid: claimUid },
      ...(options.pvSource ?? { fake: { name: pvName } }),
    },
  }
  return { pvc, pv }
}
