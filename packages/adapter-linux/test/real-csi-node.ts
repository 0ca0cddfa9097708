/**
 * A node with the real CSI hostpath driver for one test: `hostpathplugin` on
 * `<root>/plugins/hostpath.csi.k8s.io/csi.sock` (its `mount(8)` behind a wrapper that can hold a
 * publish), `csi-node-driver-registrar` registering it in `<root>/plugins_registry`, and kubevol as an
 * agent runs it (the plugin watcher and the volume manager on the Linux host), restartable; the
 * driver's Controller service makes the volumes, claims and PVs live in the in-memory object reader.
 * Everything started is stopped after the test, by pid.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { delimiter, join } from 'node:path'
import { createMemoryObjectReader, createMemoryPodSource, createVolumeManager, type Pod, type VolumeEvent } from '@kubevol/core'
import { createCsiDriverRegistry, createCsiPlugin } from '@kubevol/core/plugins'
import { buildClaim, sha256Hex } from '@kubevol/core/testing'
import { afterEach } from 'vitest'
import { startPluginWatcher } from '../src/csi/plugin-watcher.js'
import { parseMountInfo } from '../src/mountinfo.js'
import { useLinuxHost } from './harness.js'
import { type ControllerClient, createControllerClient, grpcCalls, type RealProcess, startHostpathPlugin, startRegistrar } from './real-csi.js'

export const DRIVER = 'hostpath.csi.k8s.io'
export const MiB = 1 << 20
export const CSI_DIR = 'kubernetes.io~csi'

/** The mount points below `prefix`, sorted. */
export const mountsUnder = (prefix: string): string[] =>
  parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'))
    .map((e) => e.target)
    .filter((t) => t.startsWith(`${prefix}/`))
    .sort()

/** Polls `check` until it holds; fails naming `what` after `ms`. */
export async function until(what: string, check: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not reached in ${ms} ms: ${what}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

/** The first `name` on PATH. */
function onPath(name: string): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) if (dir && existsSync(join(dir, name))) return join(dir, name)
  throw new Error(`${name} is not on PATH`)
}

/** One volume of the driver's state.json (Go field names). */
interface DriverVolume {
  VolID: string
  VolName: string
  VolSize: number
  VolPath: string
  Ephemeral: boolean
  Staged: string[] | null
  Published: string[] | null
}

/** Registers the hooks (a temp root and Linux host per test, everything stopped after it); the factory returned is valid inside tests. */
export function useRealCsiNode(assets: string) {
  const h = useLinuxHost()
  const stops: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const stop of stops.splice(0).reverse()) await stop()
  })

  /** `registered: false`: the registrar is not started (the test starts it with `startRegistrar`). */
  return async function node(o: { registered?: boolean } = {}) {
    const { host, p } = h()
    const root = p('kubevol')
    const socket = `${root}/plugins/${DRIVER}/csi.sock`
    const registrationDir = `${root}/plugins_registry`
    const stateDir = p('csi-data-dir')
    mkdirSync(`${root}/plugins/${DRIVER}`, { recursive: true })
    // `mount` as the driver runs it: a bind onto a pod's directory waits while the hold file exists,
    // so that a test can kill the driver in the middle of NodePublishVolume.
    const bin = p('bin')
    const hold = p('hold-publish')
    mkdirSync(bin)
    writeFileSync(
      `${bin}/mount`,
      [
        '#!/bin/sh',
        // hold: wait before mounting; hold-after: mount, then wait (the driver has not recorded it yet).
        `case "$*" in */pods/*) if [ -e '${hold}' ]; then : > '${hold}.reached'; while [ -e '${hold}' ]; do sleep 0.05; done; fi ;; esac`,
        `case "$*" in */pods/*) if [ -e '${hold}-after' ]; then '${onPath('mount')}' "$@" || exit; : > '${hold}-after.reached'; while [ -e '${hold}-after' ]; do sleep 0.05; done; exit 0; fi ;; esac`,
        `exec '${onPath('mount')}' "$@"`,
        '',
      ].join('\n'),
      { mode: 0o755 },
    )
    let driver: RealProcess | undefined
    let registrar: RealProcess | undefined
    const startDriver = async () => {
      driver = await startHostpathPlugin({ assets, socket, stateDir, driverName: DRIVER, nodeId: 'node-1', logFile: p('hostpathplugin.log'), pathPrefix: bin })
    }
    const startRegistrarProcess = async () => {
      registrar = await startRegistrar({ assets, driverSocket: socket, driverName: DRIVER, registrationDir, logFile: p('registrar.log') })
    }
    stops.push(async () => {
      await registrar?.stop()
      await driver?.stop()
    })
    await startDriver()
    const objects = createMemoryObjectReader()
    // The CSIDriver object csi-driver-host-path deploys (attachRequired: there is no attacher here).
    objects.put('CSIDriver', { metadata: { name: DRIVER }, spec: { attachRequired: false, podInfoOnMount: true, volumeLifecycleModes: ['Persistent', 'Ephemeral'], fsGroupPolicy: 'File' } })
    const pods = createMemoryPodSource()
    const events: VolumeEvent[] = []
    const failures: { name: string; error: string }[] = []

    /** kubevol as an agent runs it: the plugin watcher on plugins_registry and the volume manager. */
    const startKubevol = async () => {
      const registry = createCsiDriverRegistry()
      // The watcher makes plugins_registry (as the kubelet does at start); a registrar binds its socket there.
      const watcher = await startPluginWatcher({ rootDir: root, registry, host, rescanIntervalMs: 500 })
      const plugin = createCsiPlugin({ drivers: registry })
      const manager = createVolumeManager({
        host,
        plugins: [plugin],
        podSource: pods,
        objects,
        nodeName: 'node-1',
        rootDir: root,
        controllerAttachDetach: false,
        recorder: { event: (e) => events.push(e) },
        backoff: { initialMs: 200, maxMs: 2_000 },
        expansionCheckPeriodMs: 200,
      })
      manager.subscribe((e) => {
        if (e.type === 'operation' && e.operation.error) failures.push({ name: e.operation.name, error: e.operation.error })
      })
      const stop = new AbortController()
      const running = manager.run(stop.signal)
      let stopped = false
      const kill = async () => {
        if (stopped) return
        stopped = true
        stop.abort()
        await running
        watcher.stop()
        for (const d of registry.list()) registry.unregister(d.name)
      }
      stops.push(kill)
      return { registry, plugin, manager, kill }
    }
    let kubevol = await startKubevol()
    await kubevol.plugin.syncDriverObjects()
    if (o.registered !== false) {
      await startRegistrarProcess()
      await until('the driver registered through plugins_registry', () => kubevol.registry.get(DRIVER) !== undefined)
    }
    const controller: ControllerClient = createControllerClient(socket)
    stops.push(() => controller.close())

    /** A PV and bound claim for a volume the controller service created. */
    const claim = async (name: string, bytes: number, mode: 'Filesystem' | 'Block', accessModes?: readonly string[]) => {
      const volume = await controller.createVolume(`pvc-${name}`, bytes, mode === 'Block' ? 'block' : 'mount')
      const { pvc, pv } = buildClaim({
        claim: name,
        pv: `pv-${name}`,
        capacity: `${bytes / MiB}Mi`,
        volumeMode: mode,
        ...(accessModes ? { accessModes } : {}),
        pvSource: { csi: { driver: DRIVER, volumeHandle: volume.volumeId, volumeAttributes: volume.volumeContext } },
      })
      objects.put('PersistentVolumeClaim', pvc)
      objects.put('PersistentVolume', pv)
      return { volume, pvc, pv }
    }
    // The driver rewrites state.json in place: a read in the middle of a write is read again.
    let lastVolumes: DriverVolume[] = []
    const driverVolumes = (): DriverVolume[] => {
      for (let attempt = 0; attempt < 20; attempt++) {
        try {
          lastVolumes = (JSON.parse(readFileSync(`${stateDir}/state.json`, 'utf8')) as { Volumes: DriverVolume[] | null }).Volumes ?? []
          return lastVolumes
        } catch {}
      }
      return lastVolumes
    }
    const driverVolume = (id: string) => driverVolumes().find((v) => v.VolID === id)
    return {
      host,
      p,
      root,
      socket,
      registrationDir,
      stateDir,
      hold,
      get registry() {
        return kubevol.registry
      },
      get manager() {
        return kubevol.manager
      },
      /** Stops kubevol: its manager and plugin watcher (mounts stay). */
      stopKubevol: () => kubevol.kill(),
      /** Starts kubevol again on the same root (registration and reconstruction anew); `registered: false` does not wait for the driver to register. */
      async startKubevol(o: { registered?: boolean } = {}) {
        kubevol = await startKubevol()
        if (o.registered !== false) await until('the driver registered again', () => kubevol.registry.get(DRIVER) !== undefined)
        await kubevol.plugin.syncDriverObjects()
      },
      /** Stops kubevol (mounts stay) and starts it again on the same root, once the driver is registered again. */
      async restartKubevol() {
        await kubevol.kill()
        kubevol = await startKubevol()
        await until('the driver registered again', () => kubevol.registry.get(DRIVER) !== undefined)
        await kubevol.plugin.syncDriverObjects()
      },
      objects,
      pods,
      events,
      failures,
      controller,
      claim,
      driverVolume,
      driverVolumes,
      calls: () => grpcCalls(p('hostpathplugin.log')).map((c) => c.method),
      requests: (method: string) => grpcCalls(p('hostpathplugin.log')).filter((c) => c.method === method).map((c) => c.request),
      driver: () => driver as RealProcess,
      registrar: () => registrar as RealProcess,
      startDriver,
      startRegistrar: startRegistrarProcess,
      /**
       * What external-resizer does for a claim in namespace default: ControllerExpandVolume to
       * `bytes`, then the PV's capacity and the claim's request, allocated size and
       * `NodeResizePending` (RecoverVolumeExpansionFailure). Resolves with the driver's answer.
       */
      async expandClaim(name: string, bytes: number) {
        const pvc = await objects.getPersistentVolumeClaim('default', name)
        const pv = await objects.getPersistentVolume(pvc.spec?.volumeName ?? '')
        const grown = await controller.expandVolume(pv.spec?.csi?.volumeHandle ?? '', bytes, pv.spec?.volumeMode === 'Block' ? 'block' : 'mount')
        const storage = `${bytes / MiB}Mi`
        objects.put('PersistentVolume', { ...pv, spec: { ...pv.spec, capacity: { storage } } })
        objects.put('PersistentVolumeClaim', {
          ...pvc,
          spec: { ...pvc.spec, resources: { requests: { storage } } },
          status: { ...pvc.status, allocatedResources: { storage }, allocatedResourceStatuses: { storage: 'NodeResizePending' } },
        })
        return grown
      },
      /**
       * Deletes the pod and resolves once its volumes are unmounted, nothing is mounted under the
       * root and the driver has each of `volumeIds` unstaged and unpublished.
       */
      async removePod(pod: Pod, ...volumeIds: string[]) {
        pods.deletePod(pod.metadata.uid ?? '')
        await kubevol.manager.waitForUnmount(pod, { timeoutMs: 30_000 })
        await until('torn down and unstaged', () =>
          mountsUnder(root).length === 0 && volumeIds.every((id) => driverVolume(id)?.Staged?.length === 0 && (driverVolume(id)?.Published ?? []).length === 0),
        )
      },
      staging: (volumeHandle: string) => `${root}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex(volumeHandle)}/globalmount`,
      target: (uid: string, volume: string) => `${root}/pods/${uid}/volumes/${CSI_DIR}/${volume}/mount`,
    }
  }

}
