import { describe, expect, it } from 'vitest'
import { AgentConfigError, loadAgentConfig, resolveAgentConfig } from './load-config.js'
import { AGENT_OPTIONS, formatDuration, parseDuration } from './options.js'

const load = (argv: string[], env: Record<string, string> = {}, files: Record<string, string> = {}) =>
  loadAgentConfig({
    argv,
    env,
    hostname: () => 'My-Host',
    readFile: (path) => {
      const text = files[path]
      if (text === undefined) throw new Error(`ENOENT: no such file, open '${path}'`)
      return text
    },
  })

async function problems(promise: Promise<unknown>) {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(AgentConfigError)
  return (err as AgentConfigError).problems
}

describe('loadAgentConfig', () => {
  it('fills in the defaults, the host name as node name, and the mode-dependent ones', async () => {
    const config = await load([])
    expect(config).toMatchObject({ nodeName: 'my-host', mode: 'static', host: 'mock', rootDir: '/var/lib/kubevol', port: 10_280, address: '127.0.0.1' })
    expect(config).toMatchObject({ controllerAttachDetach: false, postEvents: false, finalizePodDeletion: false })
    expect(await load(['--mode=api'])).toMatchObject({ controllerAttachDetach: true, postEvents: true, finalizePodDeletion: true })
    expect(await load(['--mode', 'api', '--no-controller-attach-detach'])).toMatchObject({ controllerAttachDetach: false })
  })

  it('registers the node in API mode only, with the labels of --node-labels, refusing those a kubelet may not set', async () => {
    expect(await load([])).toMatchObject({ registerNode: false, nodeLabels: {} })
    expect(await load(['--mode=api', '--node-labels=node.kubernetes.io/pool=edge, example.com/rack=r1,kubernetes.io/hostname=h'])).toMatchObject({
      registerNode: true,
      nodeLabels: { 'node.kubernetes.io/pool': 'edge', 'example.com/rack': 'r1', 'kubernetes.io/hostname': 'h' },
    })
    expect(await load(['--mode=api', '--no-register-node'])).toMatchObject({ registerNode: false })
    expect(await load(['--config=/c.yaml'], {}, { '/c.yaml': 'mode: api\nnodeLabels: { example.com/a: b }\n' })).toMatchObject({ nodeLabels: { 'example.com/a': 'b' } })
    for (const bad of ['kubernetes.io/role=x', 'node-restriction.kubernetes.io/a=b', 'noequals', 'a=bad value']) {
      const [problem] = await problems(load(['--mode=api', `--node-labels=${bad}`]))
      expect(problem).toMatchObject({ key: 'nodeLabels', source: '--node-labels', allowed: expect.stringContaining('KEY=VALUE pairs') })
    }
  })

  it('lets flags win over the environment, which wins over the file', async () => {
    const files = { '/etc/kubevol/agent.yaml': 'mode: api\nport: 1\nverbosity: 1\nnodeName: from-file\n' }
    const config = await load(['--config=/etc/kubevol/agent.yaml', '--port', '3'], { KUBEVOL_PORT: '2', KUBEVOL_VERBOSITY: '5', NODE_NAME: 'from-env' }, files)
    expect(config).toMatchObject({ mode: 'api', port: 3, verbosity: 5, nodeName: 'from-env' })
  })

  it.each([
    ['an enum', ['--mode=cluster'], {}, { key: 'mode', value: 'cluster', source: '--mode', allowed: '"static" or "api"' }],
    ['a number', [], { KUBEVOL_PORT: 'http' }, { key: 'port', value: 'http', source: 'KUBEVOL_PORT', allowed: 'an integer from 0 to 65535' }],
    ['a boolean', ['--post-events=maybe'], {}, { key: 'postEvents', value: 'maybe', source: '--post-events', allowed: 'true or false' }],
    ['a path', ['--root-dir=var/lib'], {}, { key: 'rootDir', value: 'var/lib', source: '--root-dir', allowed: 'an absolute path' }],
    ['an unknown flag', ['--colour=red'], {}, { key: '--colour', value: 'red', source: 'the command line' }],
  ])('refuses %s with the key, the value, where it came from and what is allowed', async (_name, argv, env, expected) => {
    const [problem] = await problems(load(argv, env as Record<string, string>))
    expect(problem).toMatchObject(expected)
  })

  it('reads CSI drivers as NAME=SOCKET pairs from a flag or variable, or as a list from the file', async () => {
    const pairs = 'a.csi=/run/a.sock, b.csi=unix:///run/b.sock'
    const expected = [
      { name: 'a.csi', endpoint: '/run/a.sock' },
      { name: 'b.csi', endpoint: 'unix:///run/b.sock' },
    ]
    expect((await load(['--csi-drivers', pairs])).csiDrivers).toEqual(expected)
    expect((await load([], { KUBEVOL_CSI_DRIVERS: pairs })).csiDrivers).toEqual(expected)
    const files = { '/etc/kubevol/agent.yaml': 'csiDrivers:\n  - { name: a.csi, endpoint: /run/a.sock }\n  - { name: b.csi, endpoint: "unix:///run/b.sock" }\n' }
    expect((await load(['--config=/etc/kubevol/agent.yaml'], {}, files)).csiDrivers).toEqual(expected)
    expect(await load([])).toMatchObject({ csiDrivers: [], pluginRegistration: false })
    expect(await load(['--host=linux'])).toMatchObject({ pluginRegistration: true })
    expect(await load(['--host=linux', '--no-plugin-registration'])).toMatchObject({ pluginRegistration: false })
    // The registration directory follows the root unless given (a DaemonSet mounts the kubelet's there).
    expect(await load(['--root-dir=/var/lib/kv/'])).toMatchObject({ pluginRegistrationDir: '/var/lib/kv/plugins_registry' })
    expect(await load(['--plugin-registration-dir=/var/lib/kubelet/plugins_registry'])).toMatchObject({ pluginRegistrationDir: '/var/lib/kubelet/plugins_registry' })
    expect(await problems(load(['--plugin-registration-dir=plugins_registry']))).toMatchObject([{ key: 'pluginRegistrationDir', allowed: 'an absolute path' }])
    expect(await problems(load(['--csi-drivers', 'a.csi=relative.sock']))).toEqual([
      { key: 'csiDrivers', value: 'a.csi=relative.sock', source: '--csi-drivers', allowed: 'NAME=SOCKET pairs separated by commas, each SOCKET an absolute path or unix:///path' },
    ])
  })

  it('names the file for a bad key or value in it', async () => {
    const files = { '/c.yaml': 'verbosity: 11\ncolour: red\n' }
    const list = await problems(load(['--config=/c.yaml'], {}, files))
    expect(list.map((p) => [p.key, p.source])).toEqual([
      ['colour', 'config file /c.yaml'],
      ['verbosity', 'config file /c.yaml'],
    ].sort((a, b) => (list.findIndex((p) => p.key === a[0]) - list.findIndex((p) => p.key === b[0]))))
    const err = await load(['--config=/c.yaml'], {}, files).catch((e: Error) => e)
    expect((err as Error).message).toContain('verbosity: 11 (from config file /c.yaml) is not allowed; allowed: an integer from 0 to 10')
  })

  it('refuses a missing or unreadable config file', async () => {
    const [problem] = await problems(load(['--config=/nope.yaml']))
    expect(problem).toMatchObject({ key: 'config', value: '/nope.yaml', allowed: expect.stringContaining('a readable file') })
  })
})

describe('one flag vocabulary, the kubelet\'s', () => {
  it('names each option the kubelet has as the kubelet does, and no flag twice', () => {
    const flags = AGENT_OPTIONS.map((o) => o.flag)
    for (const kubelet of ['--root-dir', '--pod-manifest-path', '--kubeconfig', '--node-labels', '--register-node', '--v', '--address', '--port', '--node-status-update-frequency', '--file-check-frequency', '--enable-controller-attach-detach', '--logging-format', '--volume-stats-agg-period', '--config']) {
      expect(flags).toContain(kubelet)
    }
    const every = AGENT_OPTIONS.flatMap((o) => [o.flag, ...(o.short ? [`-${o.short}`] : []), ...o.aliases.map((a) => a.flag)])
    expect(new Set(every).size).toBe(every.length)
  })

  it.each([
    { name: '-v N', argv: ['-v', '4'], expected: { verbosity: 4 } },
    { name: '-vN', argv: ['-v4'], expected: { verbosity: 4 } },
    { name: '--v=N', argv: ['--v=5'], expected: { verbosity: 5 } },
    { name: 'a boolean =false', argv: ['--mode=api', '--enable-controller-attach-detach=false', '--finalize-pod-deletion=false'], expected: { controllerAttachDetach: false, finalizePodDeletion: false } },
    { name: 'a boolean =true', argv: ['--register-node=true'], expected: { registerNode: true } },
    { name: 'a duration', argv: ['--file-check-frequency=500ms', '--node-status-update-frequency', '1m30s'], expected: { manifestRescanMs: 500, nodeStatusPeriodMs: 90_000 } },
    { name: 'a zero duration', argv: ['--volume-stats-agg-period=0'], expected: { statsPeriodMs: 0 } },
    { name: 'the kubelet\'s manifest path', argv: ['--pod-manifest-path=/etc/kubernetes/manifests'], expected: { manifestDir: '/etc/kubernetes/manifests' } },
    { name: 'deprecated spellings', argv: ['--root=/r', '--manifest-dir=/m', '--log-format=json', '--verbosity=3', '--controller-attach-detach=false'], expected: { rootDir: '/r', manifestDir: '/m', logFormat: 'json', verbosity: 3, controllerAttachDetach: false } },
    { name: 'an old --*-ms flag, in milliseconds', argv: ['--manifest-rescan-ms=250', '--shutdown-grace-ms', '0'], expected: { manifestRescanMs: 250, shutdownGraceMs: 0 } },
  ])('reads $name', async ({ argv, expected }) => {
    expect(await load(argv)).toMatchObject(expected)
  })

  it('warns of each deprecated spelling as the kubelet does, and of nothing else', async () => {
    const warnings: string[] = []
    await loadAgentConfig({ argv: ['--root=/r', '--v=3', '--stats-period-ms=0'], hostname: () => 'h', warn: (m) => warnings.push(m) })
    expect(warnings).toEqual(['Flag --root has been deprecated, use --root-dir instead', 'Flag --stats-period-ms has been deprecated, use --volume-stats-agg-period instead'])
  })

  it('reads durations from the environment (bare: milliseconds) and the config file', async () => {
    expect(await load([], { KUBEVOL_MANIFEST_RESCAN_MS: '300', KUBEVOL_STUCK_OPERATION_MS: '5m' })).toMatchObject({ manifestRescanMs: 300, stuckOperationMs: 300_000 })
    const files = { '/c.yaml': 'manifestRescanMs: 2m\npodSyncRetryMs: 1500\n' }
    expect(await load(['--config=/c.yaml'], {}, files)).toMatchObject({ manifestRescanMs: 120_000, podSyncRetryMs: 1_500 })
  })

  it.each([
    ['a number without a unit', '--file-check-frequency=20'],
    ['a word', '--file-check-frequency=often'],
    ['below the minimum', '--file-check-frequency=1ms'],
  ])('refuses %s as a duration', async (_name, arg) => {
    const [problem] = await problems(load([arg]))
    expect(problem).toMatchObject({ key: 'manifestRescanMs', source: '--file-check-frequency', allowed: 'a duration such as 10s, 500ms or 2m, at least 10ms' })
  })

  it.each([
    ['10s', 10_000],
    ['500ms', 500],
    ['2m', 120_000],
    ['1h30m', 5_400_000],
    ['1.5s', 1_500],
    ['0', 0],
    ['20', undefined],
    ['s', undefined],
    ['-1s', undefined],
  ])('parseDuration(%s)', (text, expected) => {
    expect(parseDuration(text)).toBe(expected)
  })

  it('shows every duration default in the syntax it is given in, and that syntax parses to the schema default', async () => {
    const defaults = await load([])
    for (const o of AGENT_OPTIONS.filter((x) => x.kind === 'duration')) {
      expect(parseDuration(o.defaultText)).toBe(defaults[o.key])
      expect(formatDuration(defaults[o.key] as number)).toBe(o.defaultText)
    }
  })
})

describe('resolveAgentConfig', () => {
  it('needs a node name', () => {
    expect(() => resolveAgentConfig({} as never)).toThrow(/nodeName: undefined \(from startAgent\)/)
  })
})
