import { describe, expect, it } from 'vitest'
import type { Pod, Volume } from '../api/kubernetes.js'
import { buildPod } from '../testing/builders.js'
import { podVolumesRead } from './object-references.js'
import type { ObjectReference } from './sources.js'

const pod = (volumes: Volume[], namespace = 'default'): Pod => {
  const p = buildPod({ uid: 'a', volumes })
  return { ...p, metadata: { ...p.metadata, namespace } }
}
const cm = (name: string, namespace = 'default'): ObjectReference => ({ kind: 'ConfigMap', namespace, name })
const secret = (name: string, namespace = 'default'): ObjectReference => ({ kind: 'Secret', namespace, name })

describe('podVolumesRead', () => {
  it.each([
    { name: 'a configMap volume of that name', volumes: [{ name: 'v', configMap: { name: 'app' } }], ref: cm('app'), reads: true },
    { name: 'a configMap volume of another name', volumes: [{ name: 'v', configMap: { name: 'other' } }], ref: cm('app'), reads: false },
    { name: 'a Secret of the ConfigMap name', volumes: [{ name: 'v', secret: { secretName: 'app' } }], ref: cm('app'), reads: false },
    { name: 'a secret volume', volumes: [{ name: 'v', secret: { secretName: 'db' } }], ref: secret('db'), reads: true },
    { name: 'a projected configMap source', volumes: [{ name: 'v', projected: { sources: [{ downwardAPI: {} }, { configMap: { name: 'app' } }] } }], ref: cm('app'), reads: true },
    { name: 'a projected secret source', volumes: [{ name: 'v', projected: { sources: [{ secret: { name: 'db' } }] } }], ref: secret('db'), reads: true },
    { name: 'the same name in another namespace', volumes: [{ name: 'v', configMap: { name: 'app' } }], ref: cm('app', 'team'), reads: false },
    { name: 'a kind volumes do not read by name', volumes: [{ name: 'v', configMap: { name: 'app' } }], ref: { kind: 'PersistentVolume', name: 'app' }, reads: false },
    { name: 'a pod without volumes', volumes: [], ref: cm('app'), reads: false },
  ] satisfies { name: string; volumes: Volume[]; ref: ObjectReference; reads: boolean }[])('$name → $reads', ({ volumes, ref, reads }) => {
    expect(podVolumesRead(pod(volumes), ref)).toBe(reads)
  })

  it('matches a pod of another namespace to objects of that namespace', () => {
    expect(podVolumesRead(pod([{ name: 'v', configMap: { name: 'app' } }], 'team'), cm('app', 'team'))).toBe(true)
    expect(podVolumesRead(pod([{ name: 'v', configMap: { name: 'app' } }], 'team'), cm('app'))).toBe(false)
  })
})
