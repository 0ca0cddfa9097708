/**
 * CSI on the node: the driver registry and the CSI plugin that serves from it, the drivers the
 * configuration names (`csiDrivers`, registered at once, no handshake), the kubelet's
 * plugin-registration watcher on `pluginRegistrationDir` (`pluginRegistration`), and in API
 * mode this node's CSINode object and node ID annotation kept in step with the registry.
 */
import { type Host, type Logger, errorMessage } from '@kubevol/core'
import { type CsiDriverRegistry, type CsiVolumePlugin, createCsiDriverRegistry, createCsiPlugin } from '@kubevol/core/plugins'
import type { ResolvedAgentConfig } from './config/options.js'
import type { CsiNodeUpdater, createCsiNodeUpdater, syncCsiNodeWithRegistry } from './kube/csi-node.js'
import type { KubeClients } from './kube/kube-client.js'

/** What the agent uses of @kubevol/adapter-linux for CSI (loaded only when needed). */
export interface CsiAdapter {
  registerStaticCsiDrivers(registry: CsiDriverRegistry, drivers: readonly { readonly name: string; readonly endpoint: string }[]): void
  startPluginWatcher(options: { rootDir: string; dir?: string; registry: CsiDriverRegistry; logger?: Logger; host?: Pick<Host, 'mkdir' | 'readdir' | 'lstat'> }): Promise<{ readonly dir: string; stop(): void }>
}

/** CSI as the agent runs it. */
export interface AgentCsi {
  readonly registry: CsiDriverRegistry
  readonly plugin: CsiVolumePlugin
  /** API mode: this node's CSINode updater. */
  readonly csiNode?: CsiNodeUpdater
  /** Stops watching and following; registered drivers' connections are closed, API objects are left as they are. */
  stop(): void
}

export interface StartCsiOptions {
  readonly config: Pick<ResolvedAgentConfig, 'nodeName' | 'rootDir' | 'csiDrivers' | 'pluginRegistration' | 'pluginRegistrationDir' | 'watchRetryMs'>
  readonly logger: Logger
  /** API mode's clients: the CSINode is kept only with them (and `csiNode`). */
  readonly clients?: KubeClients
  /**
   * API mode: the CSINode functions of `./kube/csi-node.js`, passed in by the caller that loaded the
   * Kubernetes client (this module does not import it, so static mode never loads it).
   */
  readonly csiNode?: { readonly createCsiNodeUpdater: typeof createCsiNodeUpdater; readonly syncCsiNodeWithRegistry: typeof syncCsiNodeWithRegistry }
  /** @default a dynamic import of @kubevol/adapter-linux */
  readonly loadAdapter?: () => Promise<CsiAdapter>
  /** The agent's host: the registration directory is made and read through it (its root rule applies). @default node:fs */
  readonly host?: Pick<Host, 'mkdir' | 'readdir' | 'lstat'>
}

/** Loads @kubevol/adapter-linux only when asked, so the agent runs where it is not installed. */
async function importAdapter(): Promise<CsiAdapter> {
  const specifier = '@kubevol/adapter-linux'
  let mod: Partial<CsiAdapter>
  try {
    mod = (await import(specifier)) as Partial<CsiAdapter>
  } catch (err) {
    throw new Error(`CSI drivers need @kubevol/adapter-linux (the gRPC client), which cannot be loaded: ${errorMessage(err)}`, { cause: err })
  }
  if (typeof mod.registerStaticCsiDrivers !== 'function' || typeof mod.startPluginWatcher !== 'function') throw new Error('@kubevol/adapter-linux has no CSI support')
  return mod as CsiAdapter
}

/**
 * Makes the registry and the plugin, follows the registry into the CSINode (API mode), registers
 * the configured drivers and starts the registration watcher. Throws when a configured driver or
 * the watcher needs @kubevol/adapter-linux and it cannot be loaded.
 */
export async function startCsi(options: StartCsiOptions): Promise<AgentCsi> {
  const { config, logger, clients } = options
  const registry = createCsiDriverRegistry()
  const plugin = createCsiPlugin({ drivers: registry })
  const stops: (() => void)[] = []
  const stop = (): void => {
    for (const s of stops.splice(0).reverse()) s()
    // Close the connections without unregistering: leaving is not deregistering (a restart registers again).
    for (const entry of registry.list()) entry.driver.close?.()
  }
  try {
    let csiNode: CsiNodeUpdater | undefined
    if (clients && options.csiNode) {
      const { createCsiNodeUpdater, syncCsiNodeWithRegistry } = options.csiNode
      const updater = createCsiNodeUpdater({ clients, nodeName: config.nodeName, logger, retryMs: config.watchRetryMs })
      csiNode = updater
      // Registered first, so the following stops before the updater does.
      stops.push(() => updater.stop())
      stops.push(syncCsiNodeWithRegistry({ registry, updater, logger, retryMs: config.watchRetryMs }))
    }
    if (config.csiDrivers.length > 0 || config.pluginRegistration) {
      const adapter = await (options.loadAdapter ?? importAdapter)()
      if (config.csiDrivers.length > 0) {
        adapter.registerStaticCsiDrivers(registry, config.csiDrivers)
        logger.info('Registered CSI drivers from the configuration', { drivers: config.csiDrivers.map((d) => d.name) })
      }
      if (config.pluginRegistration) {
        // Through the agent's host: beneath the root, the registration directory is never reached through a symlink.
        const watcher = await adapter.startPluginWatcher({ rootDir: config.rootDir, dir: config.pluginRegistrationDir, registry, logger, ...(options.host ? { host: options.host } : {}) })
        stops.push(() => watcher.stop())
        logger.info('Watching for CSI driver registrations', { dir: watcher.dir })
      }
    }
    return { registry, plugin, ...(csiNode ? { csiNode } : {}), stop }
  } catch (err) {
    stop()
    throw err
  }
}
