/**
 * deploy/daemonset.yaml's agent container as `podman run` flags, the way the kubelet would run it on
 * a node: privileged, host network, each hostPath volume bound at its mountPath with its propagation
 * (Bidirectional: rshared), the env (`fieldRef: spec.nodeName` from the node's name) and the args
 * with `$(VAR)` expanded from it; an optional configMap the node does not have is an empty directory,
 * as the kubelet makes it. The node here is a folder: its hostPaths live under it (`/dev`
 * excepted, which is the machine's), so the machine's own /var/lib/kubevol is never touched.
 */
import { mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseAllDocuments } from 'yaml'
import { repoRoot } from './build-image.js'

interface HttpGetProbe {
  readonly httpGet: { readonly host: string; readonly port: number; readonly path: string }
}
interface Container {
  readonly image: string
  readonly args: readonly string[]
  readonly env?: readonly { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[]
  readonly securityContext?: { readonly privileged?: boolean }
  readonly volumeMounts: readonly { name: string; mountPath: string; mountPropagation?: string; readOnly?: boolean }[]
  readonly startupProbe: HttpGetProbe
  readonly livenessProbe: HttpGetProbe
  readonly readinessProbe: HttpGetProbe
  readonly resources: { readonly requests: { readonly cpu: string; readonly memory: string } }
}
interface PodSpec {
  readonly hostNetwork?: boolean
  readonly terminationGracePeriodSeconds: number
  readonly containers: readonly Container[]
  readonly volumes: readonly { name: string; hostPath?: { path: string; type?: string }; configMap?: { name: string; optional?: boolean } }[]
}

export function readDaemonSet(): { spec: PodSpec; container: Container } {
  const [ds] = parseAllDocuments(readFileSync(join(repoRoot, 'deploy/daemonset.yaml'), 'utf8')).map((d) => d.toJS())
  const spec = ds.spec.template.spec as PodSpec
  const container = spec.containers[0]
  if (!container) throw new Error('deploy/daemonset.yaml has no container')
  return { spec, container }
}

const PROPAGATION: Record<string, string> = { Bidirectional: 'rshared', HostToContainer: 'rslave', None: 'rprivate' }

export interface PodmanRun {
  /** `podman run` flags before the image. */
  readonly flags: string[]
  readonly image: string
  readonly args: string[]
  /** The node's folder for each hostPath of the DaemonSet (`/dev` is the machine's). */
  readonly hostPaths: Map<string, string>
}

/**
 * `extraMounts` are what this node adds to the DaemonSet for static mode: the manifest directory and
 * the folder of the pods' own host paths (a fileDisk image), bound as the README tells operators.
 */
export function podmanRunOf(node: string, nodeName: string, extraMounts: readonly string[], argsFor: (args: string[]) => string[]): PodmanRun {
  const { spec, container } = readDaemonSet()
  const flags: string[] = []
  if (container.securityContext?.privileged) flags.push('--privileged')
  if (spec.hostNetwork) flags.push('--network=host')
  const env = new Map<string, string>()
  for (const e of container.env ?? []) {
    const field = e.valueFrom?.fieldRef?.fieldPath
    if (field !== undefined && field !== 'spec.nodeName') throw new Error(`env ${e.name}: fieldRef ${field} is not known to this test`)
    env.set(e.name, field ? nodeName : (e.value ?? ''))
  }
  for (const [name, value] of env) flags.push('--env', `${name}=${value}`)
  const hostPaths = new Map<string, string>()
  for (const mount of container.volumeMounts) {
    const volume = spec.volumes.find((v) => v.name === mount.name)
    if (volume?.configMap?.optional) {
      // An optional configMap this node does not have (static mode has no API server): the kubelet
      // mounts an empty directory.
      const empty = join(node, 'configmaps', volume.configMap.name)
      mkdirSync(empty, { recursive: true })
      flags.push('--volume', `${empty}:${mount.mountPath}:ro`)
      continue
    }
    if (!volume?.hostPath) throw new Error(`volume ${mount.name} is neither a hostPath nor an optional configMap: this test knows only those`)
    const source = volume.hostPath.path === '/dev' ? '/dev' : join(node, volume.hostPath.path)
    if (volume.hostPath.type === 'DirectoryOrCreate') mkdirSync(source, { recursive: true })
    hostPaths.set(volume.hostPath.path, source)
    const options = [mount.readOnly ? 'ro' : 'rw', PROPAGATION[mount.mountPropagation ?? 'None'] ?? 'rprivate']
    flags.push('--volume', `${source}:${mount.mountPath}:${options.join(',')}`)
  }
  for (const mount of extraMounts) flags.push('--volume', mount)
  // The kubelet expands $(VAR) in args from the container's environment.
  const args = container.args.map((arg) => arg.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (all, name: string) => env.get(name) ?? all))
  return { flags, image: container.image, args: argsFor(args), hostPaths }
}
