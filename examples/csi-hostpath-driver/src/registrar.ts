/**
 * What node-driver-registrar does beside a CSI driver: serves the kubelet's plugin-registration
 * protocol on `<registration dir>/<driver>-reg.sock`, so a node agent watching that directory
 * (kubevol's `<root>/plugins_registry/`, the kubelet's `/var/lib/kubelet/plugins_registry/`) finds
 * the driver, calls GetInfo, connects to the driver's endpoint and reports the outcome through
 * NotifyRegistrationStatus.
 */
import { existsSync, mkdirSync, unlinkSync } from 'node:fs'
import * as grpc from '@grpc/grpc-js'
import { registrationProto, socketPath } from '@kubevol/adapter-linux'

export interface RegistrarOptions {
  /** The node agent's registration directory, e.g. `/var/lib/kubevol/plugins_registry`. */
  readonly dir: string
  /** The driver's name. */
  readonly name: string
  /** The driver's CSI socket, as the node agent should dial it. */
  readonly endpoint: string
  /** Called with each NotifyRegistrationStatus. */
  readonly onStatus?: (status: { readonly pluginRegistered: boolean; readonly error: string }) => void
}

export interface Registrar {
  /** The registration socket. */
  readonly socket: string
  /** Stops serving and removes the socket: the node agent unregisters the driver. */
  stop(): void
}

/** Serves Registration; resolves once the socket listens. */
export async function startRegistrar(options: RegistrarOptions): Promise<Registrar> {
  mkdirSync(options.dir, { recursive: true, mode: 0o750 })
  const socket = `${options.dir}/${options.name}-reg.sock`
  if (existsSync(socket)) unlinkSync(socket)
  const server = new grpc.Server()
  server.addService(registrationProto().Registration.service, {
    GetInfo: (_call: unknown, callback: grpc.sendUnaryData<object>) =>
      callback(null, { type: 'CSIPlugin', name: options.name, endpoint: socketPath(options.endpoint), supportedVersions: ['1.0.0'] }),
    NotifyRegistrationStatus: (call: grpc.ServerUnaryCall<{ pluginRegistered: boolean; error: string }, object>, callback: grpc.sendUnaryData<object>) => {
      options.onStatus?.(call.request)
      callback(null, {})
    },
  })
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())))
  return {
    socket,
    stop() {
      server.forceShutdown()
      if (existsSync(socket)) unlinkSync(socket)
    },
  }
}
