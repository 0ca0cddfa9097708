/**
 * Loads kubevol's own .proto files (proto/csi.proto, proto/pluginregistration.proto) once, with
 * camelCase fields, enums as names, 64-bit integers as numbers and defaults filled in.
 */
import { fileURLToPath } from 'node:url'
import type * as grpc from '@grpc/grpc-js'
import type * as protoLoaderTypes from '@grpc/proto-loader'
import { grpc as loadGrpc, protoLoader } from './grpc-module.js'

const LOAD_OPTIONS: protoLoaderTypes.Options = { keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true }

/** The directory of the .proto files (beside src/ and dist/). */
export const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url))

type ServiceCtor = grpc.ServiceClientConstructor

/** The csi.v1 services: client constructors, and `.service` definitions for a `grpc.Server`. */
export interface CsiProto {
  readonly Identity: ServiceCtor
  readonly Node: ServiceCtor
}

/** The kubelet's plugin-registration service (`pluginregistration.Registration`). */
export interface RegistrationProto {
  readonly Registration: ServiceCtor
}

let csi: CsiProto | undefined
let registration: RegistrationProto | undefined

/** The csi.v1 Identity and Node service constructors. */
export function csiProto(): CsiProto {
  if (!csi) {
    const loaded = loadGrpc().loadPackageDefinition(protoLoader().loadSync(`${PROTO_DIR}csi.proto`, LOAD_OPTIONS)) as unknown as {
      csi: { v1: CsiProto }
    }
    csi = loaded.csi.v1
  }
  return csi
}

/** The pluginregistration Registration service constructor. */
export function registrationProto(): RegistrationProto {
  if (!registration) {
    const loaded = loadGrpc().loadPackageDefinition(protoLoader().loadSync(`${PROTO_DIR}pluginregistration.proto`, LOAD_OPTIONS)) as unknown as {
      pluginregistration: RegistrationProto
    }
    registration = loaded.pluginregistration
  }
  return registration
}

/** `unix:///abs/path.sock` for a path; an address that already has a scheme is kept. */
export function unixAddress(endpoint: string): string {
  if (endpoint.startsWith('unix:')) return endpoint
  if (!endpoint.startsWith('/')) throw new Error(`CSI endpoint must be an absolute socket path or unix:// address, got "${endpoint}"`)
  return `unix://${endpoint}`
}

/** The socket path of a `unix:` address or a path. */
export function socketPath(endpoint: string): string {
  return endpoint.replace(/^unix:\/\//, '').replace(/^unix:/, '')
}
