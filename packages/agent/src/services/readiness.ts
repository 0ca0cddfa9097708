/**
 * The /readyz and /livez checks, in the order the endpoints list them: sources, the services'
 * own checks (node, api-watch), the reconciler, the host, the operations.
 */
import type { Clock, Host, PodSource } from '@kubevol/core'
import { errorMessage } from '@kubevol/core'
import type { HealthCheck } from '../http/status-server.js'
import { describeStuck } from '../status/stuck-operations.js'
import type { VolumeManagerService } from './volume-manager-service.js'

export interface ReadinessOptions {
  readonly manager: VolumeManagerService
  readonly pods: PodSource
  readonly host: Host
  readonly rootDir: string
  readonly clock: Clock
  /** The checks of the services that have one (`ServiceRunner.checks`). */
  readonly serviceChecks: () => readonly HealthCheck[]
}

/** The /readyz checks. The host's answer is reused for 2 s, and a stat that hangs fails after 2 s. */
export function createReadiness(o: ReadinessOptions): () => Promise<HealthCheck[]> {
  const hostResponsive = hostCheck(o.host, o.rootDir, o.clock)
  return async () => {
    const { manager, pods, clock } = o
    const snap = manager.manager.snapshot()
    const synced = pods.allReady() && snap.sourcesReady
    return [
      { name: 'sources-synced', ok: synced, ...(synced ? {} : { message: pods.allReady() ? 'the populator has not read every pod yet' : 'waiting for the first list of pods' }) },
      ...o.serviceChecks(),
      {
        name: 'reconciler',
        ok: !manager.runEnded && snap.statesSynced,
        message: manager.runEnded
          ? `the manager loop has stopped${manager.runError ? `: ${errorMessage(manager.runError)}` : ''}`
          : snap.statesSynced
            ? `last state change ${Math.round((clock.now() - manager.lastActivity) / 1000)}s ago`
            : 'states not synced yet (reconstruction)',
      },
      await hostResponsive(),
      stuckCheck(manager),
    ]
  }
}

/** The /livez check: the manager loop runs. */
export function liveness(manager: VolumeManagerService): HealthCheck[] {
  return [{ name: 'manager-loop', ok: !manager.runEnded, ...(manager.runEnded ? { message: 'the manager loop has stopped' } : {}) }]
}

function hostCheck(host: Host, rootDir: string, clock: Clock): () => Promise<HealthCheck> {
  let last: { at: number; check: Promise<HealthCheck> } | undefined
  return () => {
    const now = clock.now()
    if (last && now - last.at < 2_000) return last.check
    const check = Promise.race([
      host.stat(rootDir).then(
        () => ({ name: 'host-responsive', ok: true }),
        (err: unknown) => ({ name: 'host-responsive', ok: false, message: errorMessage(err) }),
      ),
      new Promise<HealthCheck>((resolve) => setTimeout(() => resolve({ name: 'host-responsive', ok: false, message: 'stat of the root directory hangs' }), 2_000).unref()),
    ])
    last = { at: now, check }
    return check
  }
}

// One hung host call holds one volume: the agent is still doing its job for every other volume, but
// not ready in the sense that something needs a person; the message names what is stuck.
function stuckCheck(manager: VolumeManagerService): HealthCheck {
  const list = manager.stuck.list()
  if (list.length === 0) return { name: 'operations', ok: true, message: `${manager.tracker.running().length} running, none stuck` }
  return { name: 'operations', ok: false, message: `stuck: ${list.map(describeStuck).join('; ')}` }
}
