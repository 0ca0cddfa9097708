#!/usr/bin/env node
/**
 * `kubevol-csi-hostpath-driver`: runs the reference driver on the Linux host until SIGINT or SIGTERM.
 *
 *   kubevol-csi-hostpath-driver --endpoint /var/lib/kubevol/plugins/hostpath.csi.kubevol.io/csi.sock \
 *     --data-dir /var/lib/csi-hostpath --node-id "$(hostname)" [--registration-dir /var/lib/kubevol/plugins_registry]
 *
 * Volumes stay on disk (and mounted) when it stops: a restarted driver carries on with them.
 */
import { parseArgs } from 'node:util'
import { createLinuxHost } from '@kubevol/adapter-linux'
import { startHostpathCsiDriver } from './driver.js'
import { startRegistrar } from './registrar.js'

const USAGE = `usage: kubevol-csi-hostpath-driver --endpoint SOCKET --data-dir DIR [options]

  --endpoint SOCKET          the unix socket to serve CSI on (a path or unix:///path)
  --data-dir DIR             where volume directories and block images live
  --name NAME                the driver name (default hostpath.csi.kubevol.io)
  --node-id ID               NodeGetInfo node_id (default: the host name)
  --max-volumes N            NodeGetInfo max_volumes_per_node (default 0: no limit)
  --topology KEY=VALUE,...   NodeGetInfo accessible_topology segments
  --block-size BYTES         the size of a new raw block volume (default 67108864)
  --registration-dir DIR     also register with the node agent watching DIR (its plugins_registry)
`

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      endpoint: { type: 'string' },
      'data-dir': { type: 'string' },
      name: { type: 'string' },
      'node-id': { type: 'string' },
      'max-volumes': { type: 'string' },
      topology: { type: 'string' },
      'block-size': { type: 'string' },
      'registration-dir': { type: 'string' },
      help: { type: 'boolean' },
    },
  })
  if (values.help) {
    process.stdout.write(USAGE)
    return
  }
  if (!values.endpoint || !values['data-dir']) {
    process.stderr.write(USAGE)
    process.exitCode = 2
    return
  }
  const { hostname } = await import('node:os')
  const topology = values.topology
    ? Object.fromEntries(values.topology.split(',').map((pair) => pair.split('=', 2) as [string, string]))
    : undefined
  const host = createLinuxHost()
  await host.mkdir(values['data-dir'], { recursive: true, mode: 0o750 })
  const server = await startHostpathCsiDriver({
    host,
    endpoint: values.endpoint,
    dataDir: values['data-dir'],
    nodeId: values['node-id'] ?? hostname(),
    ...(values.name ? { name: values.name } : {}),
    ...(values['max-volumes'] ? { maxVolumesPerNode: Number(values['max-volumes']) } : {}),
    ...(topology ? { topology } : {}),
    ...(values['block-size'] ? { blockSizeBytes: Number(values['block-size']) } : {}),
  })
  const log = (message: string, fields: Record<string, unknown> = {}): void => {
    process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), msg: message, ...fields })}\n`)
  }
  log('CSI driver serving', { driver: server.name, address: server.address })
  const registrar = values['registration-dir']
    ? await startRegistrar({
        dir: values['registration-dir'],
        name: server.name,
        endpoint: values.endpoint,
        onStatus: (status) => log(status.pluginRegistered ? 'Registered with the node agent' : 'Registration refused', { ...status }),
      })
    : undefined
  if (registrar) log('Registration socket serving', { socket: registrar.socket })
  const stop = (): void => {
    registrar?.stop()
    void server.stop().then(() => {
      host.close()
      log('Stopped; volumes stay in place')
    })
  }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}

main().catch((err: unknown) => {
  process.stderr.write(`kubevol-csi-hostpath-driver: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exitCode = 1
})
