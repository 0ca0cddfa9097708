/**
 * Static registration from configuration: drivers whose sockets are known in advance, registered
 * without the plugin-registration handshake.
 */
import type { CsiDriverRegistry } from '@kubevol/core/plugins'
import { createGrpcCsiDriver } from './grpc-csi-driver.js'

export interface StaticCsiDriver {
  readonly name: string
  /** The driver's socket path or `unix://` address. */
  readonly endpoint: string
}

/** Registers each driver over gRPC (connections open on first use). */
export function registerStaticCsiDrivers(registry: CsiDriverRegistry, drivers: readonly StaticCsiDriver[]): void {
  for (const { name, endpoint } of drivers) registry.register({ name, driver: createGrpcCsiDriver({ endpoint }), endpoint })
}
