/**
 * The labels a node may set on its own Node: the rule the kubelet applies to `--node-labels` at
 * start-up and the NodeRestriction admission plugin applies to a node's create and update
 * (k8s.io/kubelet/pkg/apis `IsKubeletLabel`, plugin/pkg/admission/noderestriction
 * `getForbiddenLabels`). A label in the `kubernetes.io` or `k8s.io` namespaces is allowed only when
 * it is one of the kubelet's own or under `kubelet.kubernetes.io/` or `node.kubernetes.io/`; a
 * `node-restriction.kubernetes.io/` label never (it is how administrators mark nodes in a way the
 * node itself cannot forge).
 */

/** The well-known labels the kubelet sets or may set. */
const KUBELET_LABELS = new Set([
  'kubernetes.io/hostname',
  'topology.kubernetes.io/zone',
  'topology.kubernetes.io/region',
  'failure-domain.beta.kubernetes.io/zone',
  'failure-domain.beta.kubernetes.io/region',
  'beta.kubernetes.io/instance-type',
  'node.kubernetes.io/instance-type',
  'beta.kubernetes.io/os',
  'beta.kubernetes.io/arch',
  'kubernetes.io/os',
  'kubernetes.io/arch',
])

const KUBELET_NAMESPACES = ['kubelet.kubernetes.io', 'node.kubernetes.io']

/** The prefix of a label key (`example.com` of `example.com/x`), '' when it has none. */
function namespaceOf(key: string): string {
  const slash = key.indexOf('/')
  return slash < 0 ? '' : key.slice(0, slash)
}

const inNamespace = (ns: string, domain: string): boolean => ns === domain || ns.endsWith(`.${domain}`)

/** A label in the `kubernetes.io` or `k8s.io` namespaces. */
export function isKubernetesLabel(key: string): boolean {
  const ns = namespaceOf(key)
  return inNamespace(ns, 'kubernetes.io') || inNamespace(ns, 'k8s.io')
}

/** One of the labels a kubelet may set on its own Node. */
export function isKubeletLabel(key: string): boolean {
  return KUBELET_LABELS.has(key) || KUBELET_NAMESPACES.some((ns) => inNamespace(namespaceOf(key), ns))
}

/** The labels NodeRestriction refuses a node to set, sorted (empty: all allowed). */
export function forbiddenNodeLabels(keys: Iterable<string>): string[] {
  const forbidden = new Set<string>()
  for (const key of keys) {
    if (inNamespace(namespaceOf(key), 'node-restriction.kubernetes.io')) forbidden.add(key)
    if (isKubernetesLabel(key) && !isKubeletLabel(key)) forbidden.add(key)
  }
  return [...forbidden].sort()
}
