/**
 * subPath and subPathExpr (what the kubelet prepares before starting a container): each container
 * mount of a volume with a sub path gets its own bind at
 * `pods/<uid>/volume-subpaths/<volume>/<container>/<index>`, made by the Host's safe subPath bind so
 * a symlink a container swaps in can never point it outside the volume.
 */
import type { Container, Pod } from '../api/kubernetes.js'
import { joinPath, safePathComponent } from '../paths.js'

/** One container mount of a volume that needs a sub path bind. */
export interface SubPathMount {
  readonly container: string
  /** Index of the mount in the container's `volumeMounts` (names the bind directory). */
  readonly index: number
  readonly subPath: string
  readonly readOnly: boolean
}

/** Null when `subPath` is acceptable, else the reason (kubelet `ValidateSubPath` texts). */
function validateSubPath(subPath: string): string | null {
  if (subPath.startsWith('/')) return `subPath "${subPath}" must be a relative path`
  if (subPath.split('/').includes('..')) return `subPath "${subPath}" must not contain '..'`
  // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
  if (/[\u0000-\u001f]/.test(subPath)) return `subPath "${JSON.stringify(subPath)}" must not contain control characters`
  return null
}

/** The value of a downward API field for env expansion, or undefined when the pod has none. */
function fieldValue(pod: Pod, path: string): string | undefined {
  const meta = pod.metadata
  const match = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path)
  if (match) return (match[1] === 'labels' ? meta.labels : meta.annotations)?.[match[2] as string]
  switch (path) {
    case 'metadata.name':
      return meta.name
    case 'metadata.namespace':
      return meta.namespace
    case 'metadata.uid':
      return meta.uid
    case 'spec.nodeName':
      return pod.spec?.nodeName
    case 'spec.serviceAccountName':
      return pod.spec?.serviceAccountName
    default: {
      const status = pod.status as Record<string, unknown> | undefined
      if (path === 'status.podIP' || path === 'status.hostIP') return status?.[path.slice(7)] as string | undefined
      return undefined
    }
  }
}

/** The container's environment as far as it is known without the runtime: values and fieldRefs. */
function containerEnv(pod: Pod, container: Container): Map<string, string> {
  const env = new Map<string, string>()
  for (const e of container.env ?? []) {
    if (e.value !== undefined) env.set(e.name, expand(e.value, env))
    else {
      const ref = (e.valueFrom as { fieldRef?: { fieldPath?: string } } | undefined)?.fieldRef?.fieldPath
      const value = ref ? fieldValue(pod, ref) : undefined
      if (value !== undefined) env.set(e.name, value)
    }
  }
  return env
}

/** `$(VAR)` expansion as Kubernetes does it: `$$` escapes, unknown variables stay as written. */
function expand(input: string, env: ReadonlyMap<string, string>): string {
  return input.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (all, name: string | undefined) => {
    if (all === '$$') return '$'
    return name !== undefined && env.has(name) ? (env.get(name) as string) : all
  })
}

/**
 * A `subPathExpr` expanded from the container's environment as the kubelet does it
 * (`ExpandContainerVolumeMounts`): every `$(VAR)` is replaced, `$$` is a `$`, and a variable that is
 * not set or is empty is missing (the kubelet then refuses to start the container with `missing
 * value for A, B`). The environment is what is known without the runtime: values and the pod's
 * fieldRefs.
 */
export function expandSubPathExpr(pod: Pod, container: Container, expr: string): { readonly subPath: string } | { readonly missing: readonly string[] } {
  const env = containerEnv(pod, container)
  const missing = new Set<string>()
  const subPath = expr.replace(/\$\$|\$\(([^)]*)\)/g, (all, name: string | undefined) => {
    if (all === '$$') return '$'
    const value = env.get(name as string)
    if (!value) missing.add(name as string)
    return value ?? ''
  })
  return missing.size > 0 ? { missing: [...missing].sort() } : { subPath }
}

/** The sub path mounts of the pod volumes named `outerNames`. Throws with the reason on a bad sub path. */
export function subPathMounts(pod: Pod, outerNames: readonly string[]): SubPathMount[] {
  const names = new Set(outerNames)
  const result: SubPathMount[] = []
  const containers = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]
  for (const container of containers) {
    ;(container.volumeMounts ?? []).forEach((mount, index) => {
      if (!names.has(mount.name) || (!mount.subPath && !mount.subPathExpr)) return
      let subPath = mount.subPath ?? ''
      if (mount.subPathExpr) {
        const expanded = expandSubPathExpr(pod, container, mount.subPathExpr)
        // A variable without a value: nothing to bind; the container's mounts report it
        // (`containerMounts`), as the kubelet does when it starts the container.
        if (!('subPath' in expanded)) return
        subPath = expanded.subPath
      }
      const invalid = validateSubPath(subPath)
      if (invalid) throw new Error(`failed to prepare subPath for volumeMount "${mount.name}" of container "${container.name}": ${invalid}`)
      if (subPath === '') return
      result.push({ container: container.name, index, subPath, readOnly: mount.readOnly ?? false })
    })
  }
  return result
}

/** Where the bind of one sub path mount lives. Throws when the container name is not one path component. */
export function subPathTarget(subPathsDir: string, mount: SubPathMount): string {
  return joinPath(subPathsDir, safePathComponent('container name', mount.container), String(mount.index))
}
