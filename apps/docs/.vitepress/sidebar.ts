/** The sidebar, also read by the browser test, which visits every page listed here. */
export const sidebar = [
  {
    text: 'Getting started',
    items: [
      { text: 'Getting started', link: '/guide/getting-started' },
      { text: 'How kubevol is built', link: '/guide/architecture' },
      { text: 'Playground', link: '/playground' },
    ],
  },
  {
    text: 'Concepts',
    items: [
      { text: 'Desired and actual state', link: '/concepts/desired-and-actual-state' },
      { text: 'The reconcile pass', link: '/concepts/reconcile-pass' },
      { text: 'Operations and backoff', link: '/concepts/operation-executor' },
      { text: 'Uncertain states', link: '/concepts/uncertain-states' },
      { text: 'Reconstruction and the journal', link: '/concepts/reconstruction' },
      { text: 'Volume plugins', link: '/concepts/volume-plugins' },
      { text: 'CSI', link: '/concepts/csi' },
      { text: 'kubevol and the kubelet', link: '/concepts/kubelet-fidelity' },
      { text: 'kubevol and the kubelet: measured', link: '/concepts/measured' },
      { text: 'What kubevol never does', link: '/concepts/never-does' },
    ],
  },
  {
    text: 'How-to',
    items: [
      { text: 'Run on a node or as a DaemonSet', link: '/howto/run-on-a-node' },
      { text: 'Embed the core in your agent', link: '/howto/embed-the-core' },
      { text: 'Give your runtime its mounts', link: '/howto/give-your-runtime-its-mounts' },
      { text: 'Write a host adapter', link: '/howto/write-a-host-adapter' },
      { text: 'Write a volume plugin', link: '/howto/write-a-volume-plugin' },
      { text: 'Operate: status, explain, gc, doctor', link: '/howto/operate' },
    ],
  },
  {
    text: 'Reference',
    items: [
      { text: 'CLI', link: '/reference/cli' },
      { text: 'API: @kubevol/core', link: '/reference/api-core' },
      { text: 'API: @kubevol/core/plugins', link: '/reference/api-core-plugins' },
      { text: 'API: @kubevol/core/engine', link: '/reference/api-core-engine' },
      { text: 'API: @kubevol/core/host', link: '/reference/api-core-host' },
      { text: 'API: @kubevol/core/testing', link: '/reference/api-core-testing' },
      { text: 'API: @kubevol/core/testing/host-contract', link: '/reference/api-core-testing-host-contract' },
      { text: 'API: @kubevol/adapter-mock', link: '/reference/api-adapter-mock' },
      { text: 'API: @kubevol/adapter-linux', link: '/reference/api-adapter-linux' },
      { text: 'API: @kubevol/agent', link: '/reference/api-agent' },
      { text: 'API: @kubevol/agent/kube', link: '/reference/api-agent-kube' },
      { text: 'API: @kubevol/agent/testing', link: '/reference/api-agent-testing' },
      { text: 'API: @kubevol/cli', link: '/reference/api-cli' },
      { text: 'Configuration', link: '/reference/configuration' },
      { text: 'Metrics and events', link: '/reference/metrics-and-events' },
    ],
  },
]
