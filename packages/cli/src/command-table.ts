/**
 * The command table: every command, its arguments and flags. Parsing (`parse.ts`), `--help` and the
 * docs reference page (`reference.ts`) are all rendered from it, so they cannot disagree.
 */
import { AGENT_OPTIONS, type AgentOption, optionHelp } from '@kubevol/agent'

/** How a flag's value is read. A `duration` (`60s`, `500ms`, `2m`) is held in milliseconds. */
export type FlagType = 'string' | 'integer' | 'number' | 'boolean' | 'duration'

/** An older spelling of a flag, still read (help does not show it). */
export interface FlagAlias {
  /** `root` for `--root` */
  readonly name: string
  /** `ms`: a bare integer is milliseconds (the old `--*-ms` flags). */
  readonly unit?: 'ms'
}

/** One flag of a command. */
export interface FlagSpec {
  /** `root-dir` for `--root-dir` */
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
  /** Deprecated spellings, still read. */
  readonly aliases?: readonly FlagAlias[]
  /** The environment variable it is also read from (`run`'s agent flags). */
  readonly env?: string
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
  /** Values the first argument takes, for shell completion (`completion bash`). */
  readonly argChoices?: readonly string[]
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
const NO_HEADERS: FlagSpec = { name: 'no-headers', type: 'boolean', description: 'Print tables without their header row.' }
const SERVER: FlagSpec = {
  name: 'server',
  type: 'string',
  value: 'URL',
  description: "The agent's status endpoint.",
  defaultValue: 'http://127.0.0.1:10280',
  defaultText: 'http://127.0.0.1:10280',
}
const TOKEN: FlagSpec = { name: 'token-file', type: 'string', value: 'FILE', description: 'A file holding the bearer token the agent requires.' }

const FLAG_TYPE: Readonly<Record<AgentOption['kind'], FlagType>> = { string: 'string', enum: 'string', integer: 'integer', boolean: 'boolean', duration: 'duration' }

/** The flag of an agent option: the option table's name, placeholder, aliases, meaning, choices and default. */
function agentFlag(key: AgentOption['key'], overrides: Partial<FlagSpec> = {}): FlagSpec {
  const o = AGENT_OPTIONS.find((x) => x.key === key)
  if (!o) throw new Error(`no agent option ${key}`)
  // An enum's choices are checked by the parser and listed by help and completion.
  const { description, choices } = optionHelp(o)
  return {
    name: o.flag.slice(2),
    type: FLAG_TYPE[o.kind],
    ...(o.short ? { short: o.short } : {}),
    ...(o.value ? { value: o.value } : {}),
    ...(choices ? { choices } : {}),
    description,
    defaultText: o.defaultText,
    agentKey: o.key,
    aliases: o.aliases.map((a) => ({ name: a.flag.slice(2), ...(a.unit ? { unit: a.unit } : {}) })),
    ...overrides,
  }
}

// Flags of the commands that read the node without running the agent: the agent's names and defaults.
const HOST = agentFlag('host', { defaultValue: 'mock', description: 'The host: in memory (touches nothing) or the real Linux host (root).' })
const ROOT = agentFlag('rootDir', { defaultValue: '/var/lib/kubevol', description: 'The kubevol root directory.' })
const MANIFESTS = agentFlag('manifestDir', { defaultText: undefined, description: 'A directory of Pod, PVC, PV, ConfigMap, Secret and CSIDriver manifests, or one such file.' })
const NODE = agentFlag('nodeName', { description: "This node's name." })

/** `run`: every agent option under the option table's flag (the kubelet's name where it has one). */
// `run` reads each from its environment variable too, as the agent does.
const RUN_AGENT_FLAGS: FlagSpec[] = AGENT_OPTIONS.map((o) => agentFlag(o.key, { env: o.env }))

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
      'Runs the kubevol agent: pods from manifests (--pod-manifest-path, a directory or one file) or the Kubernetes API (--kubeconfig with --node-name). ' +
      'The default host is the in-memory mock, so a first run never touches the machine; pass --host linux as root to mount for real. ' +
      "With --once it reconciles until the node's actual state equals the desired state (every pod's volumes mounted, everything no pod needs unmounted and detached) or --timeout passes, prints a summary and exits, leaving mounts in place. " +
      'Flags are the kubelet\'s where the kubelet has the option; durations are written 10s, 500ms, 2m.',
    args: [],
    flags: [
      { name: 'once', type: 'boolean', description: 'Reconcile until converged or --timeout, print the summary and exit (0: converged).' },
      { name: 'timeout', type: 'duration', value: 'DURATION', description: 'With --once: how long to wait for convergence.', defaultValue: 60_000, defaultText: '60s' },
      OUTPUT,
      NO_HEADERS,
      ...RUN_AGENT_FLAGS,
    ],
    examples: [
      'kubevol run --once --pod-manifest-path examples/manifests',
      'kubevol run --pod-manifest-path /etc/kubevol/manifests --host linux --root-dir /var/lib/kubevol -v 4',
      'kubevol run --kubeconfig ~/.kube/config --node-name n1 --host linux --node-status-update-frequency 10s',
    ],
    exitCodes: [
      { code: 1, meaning: 'with --once: not converged by the deadline, or a volume type is not supported (the reasons are listed)' },
      { code: 2, meaning: 'bad usage, an invalid configuration, or a --pod-manifest-path that does not exist' },
    ],
  },
  {
    name: 'status',
    summary: 'Show what a running agent holds: pods, volumes, phases.',
    description: "Reads a running agent's /v1/state and prints its pods and volumes.",
    args: [],
    flags: [SERVER, TOKEN, { ...OUTPUT, choices: [...(OUTPUT.choices ?? []), 'name'], description: 'Output format; name prints pod/NAMESPACE/NAME, one line a pod, for explain.' }, NO_HEADERS, { name: 'watch', short: 'w', type: 'boolean', description: 'After printing, watch: print again on every change (checked every 2 s) until interrupted.' }],
    examples: ['kubevol status', 'kubevol status --watch', 'kubevol status -o yaml --server http://10.0.0.5:10280', 'kubevol status -o name | xargs -n1 kubevol explain'],
    exitCodes: [{ code: 3, meaning: 'the agent cannot be reached' }],
  },
  {
    name: 'explain',
    summary: "Explain one pod's volumes: phase, last error, attempts, next retry, events.",
    description: "Reads a running agent's /v1/pods/<uid> and the pod's events from /v1/events, as kubectl describe shows them. POD is a UID, a name, or namespace/name, with or without pod/ before it (as status -o name prints it).",
    args: [{ name: 'POD', description: 'the pod: UID, name or namespace/name', required: true }],
    flags: [SERVER, TOKEN, OUTPUT, NO_HEADERS],
    examples: ['kubevol explain web', 'kubevol explain default/web -o json'],
    exitCodes: [
      { code: 1, meaning: 'the pod is not known to the agent' },
      { code: 3, meaning: 'the agent cannot be reached' },
    ],
  },
  {
    name: 'mounts',
    summary: "Print a container's mounts and devices, as a runtime gives them to it.",
    description:
      "Reads a running agent's /v1/pods/<uid>/containers/<name>/mounts: each mount's container path, host path, read-only or recursively read-only, and propagation, " +
      "as the kubelet makes them from the pod's mounted volumes (subPaths are the binds the agent made). POD is a UID or namespace/name; without CONTAINER, every container of the pod. " +
      "-o json and -o yaml give the CRI's Mount and Device fields; -o oci gives one container's entries of an OCI runtime spec's mounts, ready to append to a bundle's config.json. " +
      "--wait first waits for the pod's volumes, as the kubelet does before it starts the containers.",
    args: [
      { name: 'POD', description: 'the pod: UID or namespace/name', required: true },
      { name: 'CONTAINER', description: 'one of its containers (default: every container)', required: false },
    ],
    flags: [
      SERVER,
      TOKEN,
      { ...OUTPUT, choices: ['table', 'json', 'yaml', 'oci'] },
      NO_HEADERS,
      { name: 'wait', type: 'duration', value: 'DURATION', description: "Wait this long for the pod's volumes first (at most 10m)." },
      { name: 'recursive-read-only', type: 'boolean', description: 'The runtime makes recursive read-only mounts: recursiveReadOnly IfPossible gives one.' },
    ],
    examples: ['kubevol mounts default/web', 'kubevol mounts default/web app -o oci --wait 30s', 'kubevol mounts 6f1c2a9e-0d4b-4c55-9a7e-3b2f1d0c8e77 app -o json'],
    exitCodes: [
      { code: 1, meaning: 'the pod or container is not known, a volume is not mounted yet, or a mount is refused (the kubelet\'s text)' },
      { code: 3, meaning: 'the agent cannot be reached' },
    ],
  },
  {
    name: 'plan',
    summary: 'Print the operations a run would perform, touching nothing.',
    description:
      'Reconstructs what is on the machine under --root-dir (pod volume directories and the mount table), reads the desired state from --pod-manifest-path, ' +
      'and lists the operations the first reconcile pass would start. Every call that would change the host is refused, so nothing is touched. ' +
      'Operations that follow a successful one (mount after attach) are not listed.',
    args: [],
    flags: [{ ...MANIFESTS, description: `${MANIFESTS.description} Required.` }, ROOT, HOST, NODE, OUTPUT, NO_HEADERS],
    examples: ['kubevol plan --pod-manifest-path examples/manifests', 'sudo kubevol plan --pod-manifest-path /etc/kubevol/manifests --host linux'],
    exitCodes: [],
  },
  {
    name: 'reconstruct',
    summary: 'Show what is on disk, mounted and journaled under the root.',
    description: 'Lists pod volume directories (and whether each is a mount point), mounts under the root, and the journal, as kubevol sees them after a restart. Read only.',
    args: [],
    flags: [ROOT, HOST, OUTPUT, NO_HEADERS],
    examples: ['sudo kubevol reconstruct --host linux --root-dir /var/lib/kubevol'],
    exitCodes: [],
  },
  {
    name: 'gc',
    summary: 'Remove orphaned pod directories safely, reporting what was refused and why.',
    description:
      'Removes pods/<uid> directories of pods that are not in --pod-manifest-path (if given) and have nothing mounted, never deleting through a mount point. ' +
      'It refuses to run while an agent holds the root (the lock <root-dir>/kubevol.lock): stop the agent first. ' +
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
      NO_HEADERS,
    ],
    examples: ['sudo kubevol gc --host linux --dry-run', 'sudo kubevol gc --host linux'],
    exitCodes: [{ code: 1, meaning: 'an agent holds the root, or some orphans were refused (listed with the reason)' }],
  },
  {
    name: 'doctor',
    summary: 'Check that this node can run kubevol for real.',
    description: 'Checks root, the kernel, openat2 and the new mount API (probed with real system calls), the mount namespace, mount propagation of the root directory, loop devices, filesystem tools, the FFI library and the CSI sockets directory; each failed check has a fix hint.',
    args: [],
    flags: [ROOT, { name: 'csi-dir', type: 'string', value: 'DIR', description: 'Where CSI drivers put their sockets.', defaultText: '<root-dir>/plugins' }, OUTPUT, NO_HEADERS],
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
      { name: 'timeout', type: 'duration', value: 'DURATION', description: 'Give up after this long.', defaultValue: 120_000, defaultText: '2m' },
      { name: 'progress', type: 'boolean', description: 'Show a progress bar on stderr.', defaultText: 'on a terminal' },
      OUTPUT,
      NO_HEADERS,
    ],
    examples: ['kubevol simulate --pods 1000 --volumes-per-pod 4 --fault-rate 0.05 --seed 42'],
    exitCodes: [{ code: 1, meaning: 'not converged before --timeout' }],
  },
  {
    name: 'completion',
    summary: 'Print a shell completion script (bash or zsh).',
    description: "Prints a completion script for the shell, generated from this command table. Load it with `source <(kubevol completion bash)` (bash) or `source <(kubevol completion zsh)` (zsh), or put it in the shell's completion directory.",
    args: [{ name: 'SHELL', description: 'bash or zsh', required: true }],
    argChoices: ['bash', 'zsh'],
    flags: [],
    examples: ['source <(kubevol completion bash)', 'kubevol completion zsh > ~/.zsh/completions/_kubevol'],
    exitCodes: [],
  },
  {
    name: 'version',
    summary: 'Print the version of kubevol.',
    description: 'Prints the version of the kubevol command (also `kubevol --version`).',
    args: [],
    flags: [],
    examples: ['kubevol version'],
    exitCodes: [],
  },
]

/** Every command, in the order help lists them (common exit codes added). */
export const COMMANDS: readonly CommandSpec[] = TABLE.map((c) => ({ ...c, exitCodes: [...COMMON_EXITS.filter((e) => !c.exitCodes.some((x) => x.code === e.code)), ...c.exitCodes] }))

/** The command of a name. */
export function commandOf(name: string): CommandSpec | undefined {
  return COMMANDS.find((c) => c.name === name)
}
