/**
 * The command table: every command, its arguments and flags. Parsing (`parse.ts`), `--help` and the
 * docs reference page (`reference.ts`) are all rendered from it, so they cannot disagree.
 */
import { AGENT_OPTIONS, type AgentOption } from '@kubevol/agent'

/** How a flag's value is read. */
export type FlagType = 'string' | 'integer' | 'number' | 'boolean'

/** One flag of a command. */
export interface FlagSpec {
  /** `manifests` for `--manifests` */
  readonly name: string
  readonly type: FlagType
  readonly description: string
  readonly short?: string
  /** The value's placeholder in help: `DIR`. */
  readonly value?: string
  /** The default, as help shows it; also applied by the parser when `defaultValue` is set. */
  readonly defaultText?: string
  readonly defaultValue?: string | number | boolean
  /** Allowed values (checked by the parser). */
  readonly choices?: readonly string[]
  /** The agent option this flag sets (`run` only). */
  readonly agentKey?: AgentOption['key']
}

/** One positional argument. */
export interface ArgSpec {
  readonly name: string
  readonly description: string
  readonly required: boolean
}

/** One command. */
export interface CommandSpec {
  readonly name: string
  /** One line, for the command list. */
  readonly summary: string
  /** More, for `kubevol CMD --help` and the reference. */
  readonly description: string
  readonly args: readonly ArgSpec[]
  readonly flags: readonly FlagSpec[]
  readonly examples: readonly string[]
  /** Exit codes beyond the common ones. */
  readonly exitCodes: readonly { readonly code: number; readonly meaning: string }[]
}

const OUTPUT: FlagSpec = {
  name: 'output',
  short: 'o',
  type: 'string',
  value: 'FORMAT',
  description: 'Output format.',
  choices: ['table', 'wide', 'json', 'yaml'],
  defaultValue: 'table',
  defaultText: 'table',
}
const SERVER: FlagSpec = {
  name: 'server',
  type: 'string',
  value: 'URL',
  description: "The agent's status endpoint.",
  defaultValue: 'http://127.0.0.1:10280',
  defaultText: 'http://127.0.0.1:10280',
}
const TOKEN: FlagSpec = { name: 'token-file', type: 'string', value: 'FILE', description: 'A file holding the bearer token the agent requires.' }
const HOST: FlagSpec = {
  name: 'host',
  type: 'string',
  value: 'KIND',
  description: 'The host: in memory (touches nothing) or the real Linux host (root).',
  choices: ['mock', 'linux'],
  defaultValue: 'mock',
  defaultText: 'mock',
  agentKey: 'host',
}
const ROOT: FlagSpec = {
  name: 'root',
  type: 'string',
  value: 'DIR',
  description: 'The kubevol root directory.',
  defaultValue: '/var/lib/kubevol',
  defaultText: '/var/lib/kubevol',
  agentKey: 'rootDir',
}
const MANIFESTS: FlagSpec = { name: 'manifests', type: 'string', value: 'DIR', description: 'A directory of Pod, PVC, PV, ConfigMap, Secret and CSIDriver manifests (static mode).', agentKey: 'manifestDir' }
const NODE: FlagSpec = { name: 'node-name', type: 'string', value: 'NAME', description: "This node's name.", defaultText: 'the host name', agentKey: 'nodeName' }

/** The agent options `run` takes under the agent's own flag names, besides its friendlier aliases. */
const AGENT_FLAGS: FlagSpec[] = AGENT_OPTIONS.filter((o) => !['host', 'rootDir', 'manifestDir', 'nodeName'].includes(o.key)).map((o) => ({
  name: o.flag.slice(2),
  type: o.kind === 'boolean' ? 'boolean' : 'string',
  value: o.kind === 'boolean' ? undefined : o.kind === 'integer' ? 'N' : 'VALUE',
  description: `${o.description} Allowed: ${o.allowed}.`,
  defaultText: o.defaultText,
  agentKey: o.key,
}))

const COMMON_EXITS = [
  { code: 0, meaning: 'success' },
  { code: 1, meaning: 'the command ran and found a problem (it says which)' },
  { code: 2, meaning: 'bad usage or an invalid configuration' },
]

/** The commands as written; {@link COMMANDS} adds the common exit codes. */
const TABLE: CommandSpec[] = [
  {
    name: 'run',
    summary: 'Run the volume manager on this node (the agent).',
    description:
      'Runs the kubevol agent: pods from a manifest directory (--manifests) or the Kubernetes API (--kubeconfig with --node-name). ' +
      'The default host is the in-memory mock, so a first run never touches the machine; pass --host linux as root to mount for real. ' +
      'With --once it reconciles until every pod\'s volumes are mounted or --timeout passes, prints a summary and exits, leaving mounts in place.',
    args: [],
    flags: [
      MANIFESTS,
      { name: 'kubeconfig', type: 'string', value: 'FILE', description: 'A kubeconfig: pods come from the Kubernetes API (API mode).', agentKey: 'kubeconfig' },
      NODE,
      HOST,
      ROOT,
      { name: 'listen', type: 'string', value: 'ADDR', description: 'Where the status endpoints listen: HOST:PORT, :PORT or PORT.', defaultText: '127.0.0.1:10280 (with --once: 127.0.0.1, any free port)' },
      { name: 'once', type: 'boolean', description: 'Reconcile until converged or --timeout, print the summary and exit (0: converged).' },
      { name: 'timeout', type: 'string', value: 'DURATION', description: 'With --once: how long to wait for convergence (60s, 500ms, 2m).', defaultValue: '60s', defaultText: '60s' },
      OUTPUT,
      ...AGENT_FLAGS,
    ],
    examples: ['kubevol run --once --manifests examples/manifests', 'kubevol run --manifests /etc/kubevol/manifests --host linux --root /var/lib/kubevol', 'kubevol run --kubeconfig ~/.kube/config --node-name n1 --host linux'],
    exitCodes: [{ code: 1, meaning: 'with --once: not converged by the deadline (the reasons are listed)' }],
  },
  {
    name: 'status',
    summary: 'Show what a running agent holds: pods, volumes, phases.',
    description: "Reads a running agent's /v1/state and prints its pods and volumes.",
    args: [],
    flags: [SERVER, TOKEN, OUTPUT],
    examples: ['kubevol status', 'kubevol status -o yaml --server http://10.0.0.5:10280'],
    exitCodes: [{ code: 3, meaning: 'the agent cannot be reached' }],
  },
  {
    name: 'explain',
    summary: "Explain one pod's volumes: phase, last error, attempts, next retry.",
    description: "Reads a running agent's /v1/pods/<uid>. POD is a UID, a name, or namespace/name.",
    args: [{ name: 'POD', description: 'the pod: UID, name or namespace/name', required: true }],
    flags: [SERVER, TOKEN, OUTPUT],
    examples: ['kubevol explain web', 'kubevol explain default/web -o json'],
    exitCodes: [
      { code: 1, meaning: 'the pod is not known to the agent' },
      { code: 3, meaning: 'the agent cannot be reached' },
    ],
  },
  {
    name: 'plan',
    summary: 'Print the operations a run would perform, touching nothing.',
    description:
      'Reconstructs what is on the machine under --root (pod volume directories and the mount table), reads the desired state from --manifests, ' +
      'and lists the operations the first reconcile pass would start. Every call that would change the host is refused, so nothing is touched. ' +
      'Operations that follow a successful one (mount after attach) are not listed.',
    args: [],
    flags: [{ ...MANIFESTS, description: `${MANIFESTS.description} Required.` }, ROOT, HOST, NODE, OUTPUT],
    examples: ['kubevol plan --manifests examples/manifests', 'sudo kubevol plan --manifests /etc/kubevol/manifests --host linux'],
    exitCodes: [],
  },
  {
    name: 'reconstruct',
    summary: 'Show what is on disk, mounted and journaled under the root.',
    description: 'Lists pod volume directories (and whether each is a mount point), mounts under the root, and the journal, as kubevol sees them after a restart. Read only.',
    args: [],
    flags: [ROOT, HOST, OUTPUT],
    examples: ['sudo kubevol reconstruct --host linux --root /var/lib/kubevol'],
    exitCodes: [],
  },
  {
    name: 'gc',
    summary: 'Remove orphaned pod directories safely, reporting what was refused and why.',
    description:
      'Removes pods/<uid> directories of pods that are not in --manifests (if given) and have nothing mounted, never deleting through a mount point. ' +
      'It refuses to run while an agent holds the root (the lock <root>/kubevol.lock): stop the agent first. ' +
      'A pod whose volumes the journal records as set up is kept unless --force. ' +
      '--dry-run only reports.',
    args: [],
    flags: [
      ROOT,
      HOST,
      { ...MANIFESTS, description: 'Pods still wanted (their directories are kept).' },
      { name: 'dry-run', type: 'boolean', description: 'Report only; remove nothing.' },
      { name: 'force', type: 'boolean', description: 'Also remove pods the journal records as set up (nothing mounted is ever removed).' },
      OUTPUT,
    ],
    examples: ['sudo kubevol gc --host linux --dry-run', 'sudo kubevol gc --host linux'],
    exitCodes: [{ code: 1, meaning: 'an agent holds the root, or some orphans were refused (listed with the reason)' }],
  },
  {
    name: 'doctor',
    summary: 'Check that this node can run kubevol for real.',
    description: 'Checks root, the kernel, the mount namespace, mount propagation of the root directory, loop devices, filesystem tools, the FFI library and the CSI sockets directory; each failed check has a fix hint.',
    args: [],
    flags: [ROOT, { name: 'csi-dir', type: 'string', value: 'DIR', description: 'Where CSI drivers put their sockets.', defaultText: '<root>/plugins' }, OUTPUT],
    examples: ['sudo kubevol doctor'],
    exitCodes: [{ code: 1, meaning: 'a check failed' }],
  },
  {
    name: 'simulate',
    summary: 'Run the manager on the in-memory host at scale with injected faults.',
    description:
      'Creates N pods of M volumes each (emptyDir, Memory emptyDir, configMap, secret, in turn) on the in-memory host, injects host failures at --fault-rate ' +
      '(decided from --seed, the call and its attempt, so a seed gives the same faults every run), waits until every pod is mounted, and reports ' +
      'time to converge, operations by kind and outcome, p50/p99 time from desired to mounted and peak memory.',
    args: [],
    flags: [
      { name: 'pods', type: 'integer', value: 'N', description: 'How many pods.', defaultValue: 100, defaultText: '100' },
      { name: 'volumes-per-pod', type: 'integer', value: 'M', description: 'Volumes per pod.', defaultValue: 3, defaultText: '3' },
      { name: 'fault-rate', type: 'number', value: 'R', description: 'Share of host calls on pod volumes that fail (0 to 1); a call fails at most 3 times in a row.', defaultValue: 0, defaultText: '0' },
      { name: 'seed', type: 'integer', value: 'S', description: 'Seed of the fault decisions.', defaultValue: 1, defaultText: '1' },
      { name: 'timeout', type: 'string', value: 'DURATION', description: 'Give up after this long.', defaultValue: '120s', defaultText: '120s' },
      { name: 'progress', type: 'boolean', description: 'Show a progress bar on stderr.', defaultText: 'on a terminal' },
      OUTPUT,
    ],
    examples: ['kubevol simulate --pods 1000 --volumes-per-pod 4 --fault-rate 0.05 --seed 42'],
    exitCodes: [{ code: 1, meaning: 'not converged before --timeout' }],
  },
]

/** Every command, in the order help lists them (common exit codes added). */
export const COMMANDS: readonly CommandSpec[] = TABLE.map((c) => ({ ...c, exitCodes: [...COMMON_EXITS.filter((e) => !c.exitCodes.some((x) => x.code === e.code)), ...c.exitCodes] }))

/** The command of a name. */
export function commandOf(name: string): CommandSpec | undefined {
  return COMMANDS.find((c) => c.name === name)
}
