/**
 * The agent's options: one table that gives each key its flag, environment variable, schema, default
 * and the words used when a value is refused. The loader, the validator and the help text all read it.
 */
import * as z from 'zod/mini'
import { withEnglishMessages } from '../zod-messages.js'
import { isKubeletLabel, isKubernetesLabel } from '../kube/kubelet-labels.js'
import { formatDuration, parseDuration } from './duration.js'

export { formatDuration, parseDuration } from './duration.js'

/**
 * How a flag or environment value (always a string) is turned into the option's type. A `duration`
 * is written as the kubelet writes one (`10s`, `500ms`, `2m`, `1h30m`) and held in milliseconds.
 */
export type OptionKind = 'string' | 'integer' | 'boolean' | 'enum' | 'duration'

/** An older spelling of a flag, still accepted (help does not list it). */
export interface OptionAlias {
  /** `--manifest-dir` */
  readonly flag: string
  /** `ms`: a bare integer given to this alias is milliseconds (the old `--*-ms` flags). */
  readonly unit?: 'ms'
}

/** One option of the agent. */
export interface AgentOption {
  readonly key: keyof AgentConfig
  readonly kind: OptionKind
  /** `--node-name`: the kubelet's name where the kubelet has the option. */
  readonly flag: string
  /** `v` for `-v`. */
  readonly short?: string
  /** Deprecated spellings, still accepted. */
  readonly aliases: readonly OptionAlias[]
  /** `KUBEVOL_NODE_NAME` */
  readonly env: string
  /** The value's placeholder in help: `DIR`, `DURATION`. */
  readonly value: string
  readonly description: string
  /** What is allowed, in words, for error messages: `"static" or "api"`. */
  readonly allowed: string
  /** The default, in words, for help text. */
  readonly defaultText: string
}

/** A duration in milliseconds; a string (a flag, a variable, a config file) is read with {@link parseDuration}. */
const millis = (min: number) => z.pipe(
  z.transform((v: unknown) => (typeof v === 'string' ? (parseDuration(v) ?? v) : v)),
  z.number().check(z.int(), z.minimum(min)),
)
const mode = z.enum(['static', 'api'])
const hostKind = z.enum(['mock', 'linux'])
const logFormat = z.enum(['auto', 'json', 'text'])
const changeDetection = z.enum(['Watch', 'Cache', 'Get'])

/** `name=endpoint,name=endpoint` (a flag or variable) as the list a config file gives. */
function parseCsiDrivers(value: unknown): unknown {
  if (typeof value !== 'string') return value
  return value
    .split(',')
    .map((pair) => pair.trim())
    .filter((pair) => pair !== '')
    .map((pair) => {
      const eq = pair.indexOf('=')
      return eq < 0 ? { name: pair, endpoint: '' } : { name: pair.slice(0, eq), endpoint: pair.slice(eq + 1) }
    })
}
const csiDrivers = z.pipe(
  z.transform(parseCsiDrivers),
  z.array(z.strictObject({ name: z.string().check(z.minLength(1)), endpoint: z.string().check(z.regex(/^(unix:\/\/)?\//)) })),
)

/** `key=value,key=value` (a flag or variable) as the map a config file gives. */
function parseNodeLabels(value: unknown): unknown {
  if (typeof value !== 'string') return value
  const labels: Record<string, string> = {}
  for (const pair of value.split(',').map((p) => p.trim())) {
    if (pair === '') continue
    const eq = pair.indexOf('=')
    // A pair without '=' is kept under an impossible key so that validation names it.
    if (eq < 0) labels[`${pair}=`] = ''
    else labels[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim()
  }
  return labels
}
const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/
/** A qualified label key (`[prefix/]name`) that a kubelet may set on its own Node. */
function validNodeLabelKey(key: string): boolean {
  const slash = key.indexOf('/')
  const prefix = slash < 0 ? undefined : key.slice(0, slash)
  const name = slash < 0 ? key : key.slice(slash + 1)
  if (!LABEL_NAME.test(name) || (prefix !== undefined && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix)))) return false
  // The kubelet refuses unknown kubernetes.io and k8s.io labels at start-up, as NodeRestriction would.
  return !isKubernetesLabel(key) || isKubeletLabel(key)
}
const nodeLabels = z.pipe(
  z.transform(parseNodeLabels),
  z.record(z.string(), z.string()).check(z.refine((labels) => Object.entries(labels).every(([k, v]) => validNodeLabelKey(k) && (v === '' || LABEL_NAME.test(v))))),
)

/**
 * The schema of a complete configuration. Every key has its default here, so parsing `{}` gives the
 * agent's defaults (mode-dependent ones, marked "per mode", are resolved in {@link resolveModeDefaults}).
 */
export const agentConfigSchema = withEnglishMessages(
  z.strictObject({
    nodeName: z.string().check(z.minLength(1), z.maxLength(253)),
    mode: z._default(mode, 'static'),
    host: z._default(hostKind, 'mock'),
    rootDir: z._default(z.string().check(z.startsWith('/')), '/var/lib/kubevol'),
    manifestDir: z._default(z.string().check(z.startsWith('/')), '/etc/kubevol/manifests'),
    manifestRescanMs: z._default(millis(10), 20_000),
    controllerAttachDetach: z.optional(z.boolean()),
    registerNode: z.optional(z.boolean()),
    nodeLabels: z._default(nodeLabels, {}),
    kubeconfig: z.optional(z.string().check(z.minLength(1))),
    bootstrapKubeconfig: z.optional(z.string().check(z.minLength(1))),
    certDir: z.optional(z.string().check(z.startsWith('/'))),
    rotateCertificates: z.optional(z.boolean()),
    objectCacheTtlMs: z._default(millis(0), 5_000),
    configMapAndSecretChangeDetectionStrategy: z._default(changeDetection, 'Watch'),
    nodeStatusPeriodMs: z._default(millis(10), 10_000),
    watchRetryMs: z._default(millis(1), 1_000),
    address: z._default(z.string().check(z.minLength(1)), '127.0.0.1'),
    port: z._default(z.number().check(z.int(), z.minimum(0), z.maximum(65_535)), 10_280),
    authTokenFile: z.optional(z.string().check(z.minLength(1))),
    unauthenticatedProbes: z._default(z.boolean(), false),
    stuckOperationMs: z._default(millis(10), 120_000),
    logFormat: z._default(logFormat, 'auto'),
    verbosity: z._default(z.number().check(z.int(), z.minimum(0), z.maximum(10)), 2),
    eventsKept: z._default(z.number().check(z.int(), z.minimum(1)), 1_000),
    postEvents: z.optional(z.boolean()),
    finalizePodDeletion: z.optional(z.boolean()),
    statsPeriodMs: z._default(millis(0), 60_000),
    podSyncRetryMs: z._default(millis(1), 10_000),
    podSyncTimeoutMs: z._default(millis(1), 123_000),
    shutdownGraceMs: z._default(millis(0), 10_000),
    csiDrivers: z._default(csiDrivers, []),
    pluginRegistration: z.optional(z.boolean()),
    pluginRegistrationDir: z.optional(z.string().check(z.startsWith('/'))),
    config: z.optional(z.string().check(z.minLength(1))),
  }),
)

/** The agent's configuration as `startAgent` takes it (defaults filled in). */
export type AgentConfig = z.output<typeof agentConfigSchema>
/** The agent's configuration as given: only `nodeName` is required. */
export type AgentConfigInput = z.input<typeof agentConfigSchema>

/** The configuration with the mode-dependent defaults resolved. */
export type ResolvedAgentConfig = AgentConfig & {
  readonly controllerAttachDetach: boolean
  readonly registerNode: boolean
  readonly postEvents: boolean
  readonly finalizePodDeletion: boolean
  readonly pluginRegistration: boolean
  readonly pluginRegistrationDir: string
  readonly certDir: string
  readonly rotateCertificates: boolean
}

/**
 * Static mode has no attach/detach controller, so kubevol attaches itself; API mode follows the
 * kubelet (the controller attaches). Events are posted and pods finalized only where there is an API.
 * CSI drivers register through `pluginRegistrationDir` (default `<rootDir>/plugins_registry`) on the
 * Linux host (where real drivers run).
 */
export function resolveModeDefaults(config: AgentConfig): ResolvedAgentConfig {
  const api = config.mode === 'api'
  const root = config.rootDir.replace(/\/+$/, '')
  // TLS bootstrapping writes the node's kubeconfig: where the operator says, else under the root.
  const kubeconfig = config.kubeconfig ?? (config.bootstrapKubeconfig !== undefined ? `${root}/kubeconfig` : undefined)
  return {
    ...config,
    ...(kubeconfig !== undefined ? { kubeconfig } : {}),
    certDir: config.certDir ?? `${root}/pki`,
    rotateCertificates: config.rotateCertificates ?? config.bootstrapKubeconfig !== undefined,
    controllerAttachDetach: config.controllerAttachDetach ?? api,
    registerNode: config.registerNode ?? api,
    postEvents: config.postEvents ?? api,
    finalizePodDeletion: config.finalizePodDeletion ?? api,
    pluginRegistration: config.pluginRegistration ?? config.host === 'linux',
    pluginRegistrationDir: config.pluginRegistrationDir ?? `${config.rootDir.replace(/\/+$/, '')}/plugins_registry`,
  }
}

interface OptionExtra {
  /** The flag, when not the key in kebab case (the kubelet's name). */
  readonly flag?: string
  readonly short?: string
  /** Deprecated spellings (`--x-ms` ones take bare milliseconds). */
  readonly aliases?: readonly (string | OptionAlias)[]
  readonly value?: string
}

const PLACEHOLDER: Readonly<Record<OptionKind, string>> = { string: 'VALUE', integer: 'N', boolean: '', enum: 'VALUE', duration: 'DURATION' }

function option(key: keyof AgentConfig, kind: OptionKind, description: string, allowed: string, defaultText: string, extra: OptionExtra = {}): AgentOption {
  const kebab = key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)
  const snake = key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()
  const aliases = (extra.aliases ?? []).map((a) => (typeof a === 'string' ? { flag: a } : a))
  return {
    key,
    kind,
    flag: extra.flag ?? `--${kebab}`,
    ...(extra.short ? { short: extra.short } : {}),
    aliases,
    env: `KUBEVOL_${snake}`,
    value: extra.value ?? PLACEHOLDER[kind],
    description,
    allowed,
    defaultText,
  }
}

const duration = (min: number) => `a duration such as 10s, 500ms or 2m${min > 0 ? `, at least ${formatDuration(min)}` : ', 0 or more'}`
const ms = (flag: string): OptionAlias => ({ flag, unit: 'ms' })

/** Every option, in the order help text lists them. Flags are the kubelet's where the kubelet has the option. */
export const AGENT_OPTIONS: readonly AgentOption[] = [
  option('nodeName', 'string', "This node's name (pods of other nodes are ignored).", 'a non-empty name of at most 253 characters', 'the host name', { value: 'NAME' }),
  option('mode', 'enum', 'Where pods come from: a manifest directory, or the Kubernetes API.', '"static" or "api"', 'static', { value: 'MODE' }),
  option('host', 'enum', 'The host adapter: in memory (touches nothing), or the real Linux host (root).', '"mock" or "linux"', 'mock', { value: 'KIND' }),
  option('rootDir', 'string', "The root directory of pod volumes (the kubelet's is /var/lib/kubelet).", 'an absolute path', '/var/lib/kubevol', { flag: '--root-dir', aliases: ['--root'], value: 'DIR' }),
  option(
    'manifestDir',
    'string',
    "Static mode: a directory of Pod, PVC, PV, ConfigMap, Secret and CSIDriver manifests, or one such file, as the kubelet's --pod-manifest-path.",
    'an absolute path',
    '/etc/kubevol/manifests',
    { flag: '--pod-manifest-path', aliases: ['--manifest-dir', '--manifests'], value: 'PATH' },
  ),
  option('manifestRescanMs', 'duration', 'Static mode: how often the manifests are read again besides watching them.', duration(10), '20s', {
    flag: '--file-check-frequency',
    aliases: [ms('--manifest-rescan-ms')],
  }),
  option('controllerAttachDetach', 'boolean', 'An attach/detach controller attaches volumes (kubevol waits); false: kubevol attaches itself.', 'true or false', 'false in static mode, true in API mode', {
    flag: '--enable-controller-attach-detach',
    aliases: ['--controller-attach-detach'],
  }),
  option(
    'registerNode',
    'boolean',
    "API mode: create this node's Node object when it does not exist, as the kubelet registers its node (labels kubernetes.io/hostname, os, arch and --node-labels).",
    'true or false',
    'true in API mode',
  ),
  option(
    'nodeLabels',
    'string',
    "API mode: labels of a Node kubevol registers, as the kubelet's --node-labels (a config file may give a map).",
    'KEY=VALUE pairs separated by commas; a kubernetes.io or k8s.io key only if a kubelet may set it (kubernetes.io/hostname, ..., or under node.kubernetes.io/ or kubelet.kubernetes.io/)',
    'none',
    { value: 'KEY=VALUE,...' },
  ),
  option(
    'kubeconfig',
    'string',
    "The kubeconfig file: pods come from the Kubernetes API (implies --mode=api). With --bootstrap-kubeconfig, the node's own kubeconfig, as the kubelet's: used while its client certificate is valid, else written anew to name the certificate in --cert-dir.",
    'a file path',
    'in-cluster config, else $KUBECONFIG or ~/.kube/config; with --bootstrap-kubeconfig <root-dir>/kubeconfig',
    { value: 'FILE' },
  ),
  option(
    'bootstrapKubeconfig',
    'string',
    "API mode, TLS bootstrapping as the kubelet's flag: a kubeconfig whose credentials (a bootstrap token, or a ServiceAccount allowed only to create and read CertificateSigningRequests) request this node's client certificate (system:node:<node-name> in system:nodes, signer kubernetes.io/kube-apiserver-client-kubelet), used while no valid one is stored. The agent then runs as that node identity.",
    'a file path',
    'none (the identity of --kubeconfig)',
    { value: 'FILE' },
  ),
  option('certDir', 'string', "Where the node's client certificate and key are kept (kubelet-client-current.pem, mode 0600), as the kubelet's --cert-dir.", 'an absolute path', '<root-dir>/pki', { value: 'DIR' }),
  option(
    'rotateCertificates',
    'boolean',
    "With --bootstrap-kubeconfig: request a new client certificate at a random point between 70% and 90% of the current one's lifetime, and use it without a restart, as the kubelet's --rotate-certificates (false: a new one only once the current one has expired).",
    'true or false',
    'true with --bootstrap-kubeconfig',
  ),
  option('objectCacheTtlMs', 'duration', 'API mode: how long a PVC, PV or CSIDriver read (a ConfigMap or Secret one with the Cache strategy) is reused.', duration(0), '5s', {
    flag: '--object-cache-ttl',
    aliases: [ms('--object-cache-ttl-ms')],
  }),
  option(
    'configMapAndSecretChangeDetectionStrategy',
    'enum',
    "API mode: how changes of the ConfigMaps and Secrets volumes read are found, as the kubelet's option of that name: Watch (a watch per referenced object; a change reaches the files at once, an idle node only renews its watches), Cache (a GET reused for --object-cache-ttl; changes found on each one-minute pod sync), Get (a GET on every read).",
    '"Watch", "Cache" or "Get"',
    'Watch',
    { value: 'STRATEGY' },
  ),
  option('nodeStatusPeriodMs', 'duration', 'API mode: how often node.status.volumesInUse is checked besides on every change.', duration(10), '10s', {
    flag: '--node-status-update-frequency',
    aliases: [ms('--node-status-period-ms')],
  }),
  option('watchRetryMs', 'duration', 'API mode: the first delay before a failed list or watch is started again (doubling up to 30 s).', duration(1), '1s', {
    flag: '--watch-retry-delay',
    aliases: [ms('--watch-retry-ms')],
  }),
  option('address', 'string', 'The IP address the HTTP status endpoints listen on.', 'an IP address or host name', '127.0.0.1', { value: 'IP' }),
  option('port', 'integer', 'The port of the HTTP status endpoints (0: any free port).', 'an integer from 0 to 65535', '10280 (with run --once: 0)', { value: 'PORT' }),
  option('authTokenFile', 'string', 'A file holding the bearer token every endpoint requires (see --unauthenticated-probes).', 'a file path', 'none (no token)', { value: 'FILE' }),
  option('unauthenticatedProbes', 'boolean', 'With a token: serve /livez and /readyz (without ?verbose) to requests without it, for probes that cannot send one.', 'true or false', 'false'),
  option('stuckOperationMs', 'duration', 'A volume operation running this long is reported stuck (/readyz, /v1/state, metrics, a Warning event).', duration(10), '2m', {
    flag: '--stuck-operation-threshold',
    aliases: [ms('--stuck-operation-ms')],
  }),
  option('logFormat', 'enum', "Log format, as the kubelet's --logging-format: JSON lines, or text for people.", '"auto", "json" or "text"', 'auto (text on a terminal, JSON otherwise)', {
    flag: '--logging-format',
    aliases: ['--log-format'],
    value: 'FORMAT',
  }),
  option('verbosity', 'integer', "Log verbosity, the kubelet's -v: 0-3 info, 4-10 debug.", 'an integer from 0 to 10', '2', { flag: '--v', short: 'v', aliases: ['--verbosity'] }),
  option('eventsKept', 'integer', 'How many events are kept in memory for /v1/events.', 'an integer of at least 1', '1000'),
  option('postEvents', 'boolean', 'Post events to the API (core/v1 Events).', 'true or false', 'true in API mode'),
  option('finalizePodDeletion', 'boolean', "API mode: delete a terminating pod's object (grace 0) once its volumes are unmounted, as the kubelet does.", 'true or false', 'true in API mode'),
  option('statsPeriodMs', 'duration', "How often volume usage is collected for kubelet_volume_stats_* (0: never), the kubelet's --volume-stats-agg-period.", duration(0), '1m', {
    flag: '--volume-stats-agg-period',
    aliases: [ms('--stats-period-ms')],
  }),
  option(
    'podSyncRetryMs',
    'duration',
    "The delay before a pod whose volumes failed is synced again, plus up to half of it at random (the kubelet's pod worker backoff: 10 to 15 s, not growing).",
    duration(1),
    '10s',
    { flag: '--pod-sync-retry', aliases: [ms('--pod-sync-retry-ms')] },
  ),
  option('podSyncTimeoutMs', 'duration', 'How long one pod sync waits for its volumes.', duration(1), '2m3s', { flag: '--pod-sync-timeout', aliases: [ms('--pod-sync-timeout-ms')] }),
  option('shutdownGraceMs', 'duration', 'On shutdown, how long running operations may finish before they are abandoned.', duration(0), '10s', {
    flag: '--shutdown-grace-period',
    aliases: [ms('--shutdown-grace-ms')],
  }),
  option(
    'csiDrivers',
    'string',
    'CSI drivers to register at start-up without the registration handshake, by name and socket (a config file may give a list of { name, endpoint }).',
    'NAME=SOCKET pairs separated by commas, each SOCKET an absolute path or unix:///path',
    'none',
    { value: 'NAME=SOCKET,...' },
  ),
  option('pluginRegistration', 'boolean', 'Watch --plugin-registration-dir for CSI drivers registering themselves (node-driver-registrar), as the kubelet does.', 'true or false', 'true with the Linux host'),
  option(
    'pluginRegistrationDir',
    'string',
    "The directory watched for CSI drivers' registration sockets (the kubelet's is /var/lib/kubelet/plugins_registry; a DaemonSet mounts the host's here).",
    'an absolute path',
    '<root-dir>/plugins_registry',
    { value: 'DIR' },
  ),
  option('config', 'string', 'A YAML or JSON file with any of these options by key (flags and environment win over it; a duration key takes 10s or milliseconds).', 'a file path', 'none', { value: 'FILE' }),
]

/** The option a flag names (`--root-dir`, `-v`, or a deprecated alias such as `--root`), with the alias used. */
export function optionOfFlag(name: string): { readonly option: AgentOption; readonly alias?: OptionAlias } | undefined {
  for (const option of AGENT_OPTIONS) {
    if (option.flag === name || (option.short !== undefined && name === `-${option.short}`)) return { option }
    const alias = option.aliases.find((a) => a.flag === name)
    if (alias) return { option, alias }
  }
  return undefined
}

/** The option of a key. */
export function optionOf(key: string): AgentOption | undefined {
  return AGENT_OPTIONS.find((o) => o.key === key)
}
