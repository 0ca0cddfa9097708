/**
 * Registration as node-driver-registrar does it with the kubelet: a Registration server on a socket
 * in <root>/plugins_registry; kubevol calls GetInfo, NodeGetInfo on the driver's endpoint, then
 * NotifyRegistrationStatus. No mounts: runs without root.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as grpc from '@grpc/grpc-js'
import { createCsiDriverRegistry } from '@kubevol/core/plugins'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createLinuxHost } from '../create-linux-host.js'
import { registerStaticCsiDrivers } from './static-drivers.js'
// The reference driver (examples/csi-hostpath-driver): a workspace package, not a declared dependency, since it depends on this one.
import { type HostpathCsiDriverServer, startHostpathCsiDriver } from '@kubevol/example-csi-hostpath-driver'
import { type PluginWatcher, startPluginWatcher } from './plugin-watcher.js'
import { registrationProto } from './proto.js'

interface Registrar {
  readonly statuses: { pluginRegistered: boolean; error: string }[]
  stop(): void
}

/** A node-driver-registrar stand-in: serves Registration on `socket`. */
async function startRegistrar(socket: string, info: Record<string, unknown>): Promise<Registrar> {
  const server = new grpc.Server()
  const statuses: Registrar['statuses'] = []
  server.addService(registrationProto().Registration.service, {
    GetInfo: (_call: unknown, callback: grpc.sendUnaryData<object>) => callback(null, info),
    NotifyRegistrationStatus: (call: grpc.ServerUnaryCall<{ pluginRegistered: boolean; error: string }, object>, callback: grpc.sendUnaryData<object>) => {
      statuses.push(call.request)
      callback(null, {})
    },
  })
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())))
  return { statuses, stop: () => server.forceShutdown() }
}

async function until(check: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not reached in time')
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe('kubelet plugin registration', () => {
  let root: string
  let driver: HostpathCsiDriverServer
  let watcher: PluginWatcher | undefined
  const registrars: Registrar[] = []
  beforeEach(async () => {
    root = mkdtempSync(join(tmpdir(), 'kubevol-reg-'))
    driver = await startHostpathCsiDriver({ host: createLinuxHost(), endpoint: join(root, 'csi.sock'), dataDir: join(root, 'data'), nodeId: 'node-9' })
  })
  afterEach(async () => {
    watcher?.stop()
    watcher = undefined
    for (const r of registrars.splice(0)) r.stop()
    await driver.stop()
    rmSync(root, { recursive: true, force: true })
  })

  it('registers a driver whose registrar socket appears, and unregisters it when the socket goes', async () => {
    const registry = createCsiDriverRegistry()
    watcher = await startPluginWatcher({ rootDir: root, registry })
    const socket = join(watcher.dir, 'hostpath.csi.kubevol.io-reg.sock')
    const registrar = await startRegistrar(socket, { type: 'CSIPlugin', name: 'hostpath.csi.kubevol.io', endpoint: join(root, 'csi.sock'), supportedVersions: ['1.0.0'] })
    registrars.push(registrar)
    await until(() => registrar.statuses.length > 0)
    expect(registrar.statuses).toEqual([{ pluginRegistered: true, error: '' }])
    const entry = registry.get('hostpath.csi.kubevol.io')
    expect(entry?.endpoint).toBe(join(root, 'csi.sock'))
    expect(await entry?.driver.nodeGetInfo({ timeoutMs: 5_000 })).toEqual({ nodeId: 'node-9', maxVolumesPerNode: 0 })

    // The registrar going away removes its socket (grpc-js unlinks it on shutdown).
    registrar.stop()
    rmSync(socket, { force: true })
    await until(() => registry.get('hostpath.csi.kubevol.io') === undefined)
  })

  it.each([
    { name: 'a device plugin', info: { type: 'DevicePlugin', name: 'gpu', endpoint: '', supportedVersions: ['v1beta1'] }, error: 'plugin type "DevicePlugin" is not supported' },
    { name: 'only CSI 0.x', info: { type: 'CSIPlugin', name: 'old', endpoint: '', supportedVersions: ['0.3.0'] }, error: 'none of the versions [0.3.0] is supported (need 1.x)' },
  ])('refuses $name and says so through NotifyRegistrationStatus', async ({ info, error }) => {
    const registry = createCsiDriverRegistry()
    watcher = await startPluginWatcher({ rootDir: root, registry })
    const registrar = await startRegistrar(join(watcher.dir, 'x-reg.sock'), info)
    registrars.push(registrar)
    await until(() => registrar.statuses.length > 0)
    expect(registrar.statuses).toEqual([{ pluginRegistered: false, error }])
    expect(registry.list()).toEqual([])
  })

  it('registers statically configured drivers without a handshake', async () => {
    const registry = createCsiDriverRegistry()
    registerStaticCsiDrivers(registry, [{ name: 'hostpath.csi.kubevol.io', endpoint: join(root, 'csi.sock') }])
    const entry = registry.get('hostpath.csi.kubevol.io')
    expect(await entry?.driver.getPluginInfo({ timeoutMs: 5_000 })).toEqual({ name: 'hostpath.csi.kubevol.io', vendorVersion: '0.1.0' })
    entry?.driver.close?.()
  })
})
