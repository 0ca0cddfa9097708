/**
 * What the envtest agent tests share: the agent in API mode on the memory host against a
 * {@link ControlPlane}, with short periods; pods and objects as the administrator creates them; a
 * pod's files read as a container would; and the audit log's answers to one user.
 */
import type { KubeConfig } from '@kubernetes/client-node'
import type { MemoryHost } from '@kubevol/adapter-mock'
import { type Agent, type AgentConfigInput, startAgent } from '@kubevol/agent'
import type { AuditEvent, ControlPlane } from './control-plane.js'

/** The agent in API mode on `host` with `kubeConfig`: periods of tens of milliseconds, silent. */
export async function startApiAgent(host: MemoryHost, kubeConfig: KubeConfig, config: Partial<AgentConfigInput> & { nodeName: string }): Promise<Agent> {
  return startAgent(
    {
      mode: 'api',
      port: 0,
      nodeStatusPeriodMs: 100,
      watchRetryMs: 50,
      podSyncRetryMs: 100,
      objectCacheTtlMs: 0,
      statsPeriodMs: 0,
      shutdownGraceMs: 1_000,
      ...config,
    },
    {
      host,
      kubeConfig,
      log: { silent: process.env.KUBEVOL_ENVTEST_VERBOSE !== '1' },
      manager: { backoff: { initialMs: 50, maxMs: 500 }, resyncPeriodMs: 500, housekeepingPeriodMs: 0 } as object,
    },
  )
}

/** A pod bound to `node` whose one container mounts each volume at /mnt/<name>. */
export function podObject(name: string, node: string, volumes: readonly Record<string, unknown>[], extra: { namespace?: string; serviceAccountName?: string; automount?: boolean } = {}) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: extra.namespace ?? 'default' },
    spec: {
      nodeName: node,
      ...(extra.serviceAccountName ? { serviceAccountName: extra.serviceAccountName } : {}),
      ...(extra.automount === false ? { automountServiceAccountToken: false } : {}),
      terminationGracePeriodSeconds: 30,
      containers: [{ name: 'main', image: 'busybox', volumeMounts: volumes.map((v) => ({ name: v.name, mountPath: `/mnt/${String(v.name)}` })) }],
      volumes,
    },
  }
}

/** Creates a pod as the administrator; resolves with its UID. */
export async function createPod(cp: ControlPlane, pod: ReturnType<typeof podObject>): Promise<string> {
  const created = await cp.must<{ metadata: { uid: string } }>('POST', `/api/v1/namespaces/${pod.metadata.namespace}/pods`, pod)
  return created.metadata.uid
}

/** A file of a pod's volume as a container reads it: through the `..data` link of an atomic writer, else directly. */
export async function podFile(host: MemoryHost, uid: string, plugin: string, volume: string, file: string, root = '/var/lib/kubevol'): Promise<string | undefined> {
  const dir = `${root}/pods/${uid}/volumes/${plugin}/${volume}`
  try {
    const version = await host.readlink(`${dir}/..data`).catch(() => undefined)
    return Buffer.from(await host.readFile(version ? `${dir}/${version}/${file}` : `${dir}/${file}`)).toString('utf8')
  } catch {
    return undefined
  }
}

/** The audit log's answers to `user` with `code` (e.g. 403), as `VERB URI: message` lines. */
export function answers(cp: ControlPlane, user: string, code: number): string[] {
  return cp
    .auditEvents()
    .filter((e: AuditEvent) => e.user.username === user && e.responseStatus?.code === code)
    .map((e) => `${e.verb} ${e.requestURI}: ${e.responseStatus?.message ?? ''}`)
}
