/**
 * The files in deploy/ stay in step with the agent: every manifest parses, the DaemonSet's flags are
 * ones the agent accepts, every host path the agent uses (resolved from the DaemonSet's own args) is
 * mounted at the same path, the agent bootstraps its node identity from the bundle's kubeconfig (and
 * the README's patch turns that off), the probes reach the status endpoints, the example CSI node plugin
 * registers where the agent watches and mounts what the agent publishes into, the fileDisk
 * CSIDriver object says there is nothing to attach, and the static-mode example is a valid manifest.
 */
import { readFileSync, readdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parseAllDocuments } from 'yaml'
import { describe, expect, it } from 'vitest'
import { loadAgentConfig } from './config/load-config.js'
import { parseManifests } from './sources/manifest-parser.js'

const deploy = fileURLToPath(new URL('../../../deploy/', import.meta.url))
const read = (name: string) => readFileSync(`${deploy}${name}`, 'utf8')

interface Mount {
  readonly name: string
  readonly mountPath: string
  readonly mountPropagation?: string
}
interface PodSpec {
  readonly hostNetwork?: boolean
  readonly containers: { name: string; args?: string[]; env?: { name: string; value?: string }[]; volumeMounts?: Mount[]; [k: string]: unknown }[]
  readonly volumes: { name: string; hostPath?: { path: string } }[]
}

/** The DaemonSet's pod, its agent container, and the configuration the agent resolves from its args. */
async function daemonSet() {
  const [ds] = parseAllDocuments(read('daemonset.yaml')).map((d) => d.toJS())
  const pod = ds.spec.template.spec as PodSpec
  const container = pod.containers[0] as PodSpec['containers'][number]
  // The kubelet expands $(VAR) in args from the container's environment.
  const argv = (container.args ?? []).map((a) => a.replace(/\$\(NODE_NAME\)/g, 'n1'))
  const env = Object.fromEntries((container.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value]))
  const config = await loadAgentConfig({ argv, env: { ...env, NODE_NAME: 'n1' } })
  return { ds, pod, container, config }
}

/**
 * The host path a container path reaches through the pod's hostPath volumes, or undefined. The
 * deepest mount holding the path wins, as in the container's mount table.
 */
function hostPathOf(pod: PodSpec, mounts: readonly Mount[], path: string): { hostPath: string; mount: Mount } | undefined {
  const holding = mounts.filter((m) => path === m.mountPath || path.startsWith(`${m.mountPath.replace(/\/$/, '')}/`)).sort((a, b) => b.mountPath.length - a.mountPath.length)
  const mount = holding[0]
  const volume = mount && pod.volumes.find((v) => v.name === mount.name)
  if (!mount || !volume?.hostPath) return undefined
  return { hostPath: volume.hostPath.path.replace(/\/$/, '') + path.slice(mount.mountPath.replace(/\/$/, '').length), mount }
}

describe('deploy/', () => {
  it.each(readdirSync(deploy).filter((f) => f.endsWith('.yaml')))('%s is valid YAML', (name) => {
    const docs = parseAllDocuments(read(name))
    expect(Array.isArray(docs) ? docs.flatMap((d) => d.errors) : []).toEqual([])
  })

  it('runs the DaemonSet with flags the agent accepts, privileged, with Bidirectional propagation for the root directory', async () => {
    const [ds] = parseAllDocuments(read('daemonset.yaml')).map((d) => d.toJS())
    const container = ds.spec.template.spec.containers[0]
    // The kubelet expands $(VAR) in args from the container's environment.
    const argv = (container.args as string[]).map((a) => a.replace(/\$\(NODE_NAME\)/g, 'n1'))
    const config = await loadAgentConfig({ argv, env: { NODE_NAME: 'n1' } })
    expect(config).toMatchObject({ mode: 'api', host: 'linux', rootDir: '/var/lib/kubevol', controllerAttachDetach: true })
    // kubevol owns its node: a Node of its own, registered by it, never the kubelet's.
    expect(config).toMatchObject({ nodeName: 'n1-kubevol', registerNode: true, nodeLabels: { 'kubevol.io/host': 'n1' }, finalizePodDeletion: true })
    expect(container.securityContext.privileged).toBe(true)
    const rootMount = container.volumeMounts.find((m: { mountPath: string }) => m.mountPath === config.rootDir)
    expect(rootMount.mountPropagation).toBe('Bidirectional')
    expect(ds.spec.template.spec.hostPID).toBeUndefined()
  })

  it('mounts every host path the agent uses at the same path: root (Bidirectional), registration directory, /dev', async () => {
    const { pod, container, config } = await daemonSet()
    const mounts = container.volumeMounts ?? []
    // Paths the agent and the drivers exchange are host paths (a registrar's --kubelet-registration-path,
    // a CSI socket, a staging or publish target): inside the container each must be the same path.
    const paths: [what: string, path: string][] = [
      ['root directory', config.rootDir],
      ['pods directory (publish targets)', `${config.rootDir}/pods`],
      ['plugins directory (staging paths, driver sockets)', `${config.rootDir}/plugins`],
      ...(config.pluginRegistration ? ([['plugin registration directory', config.pluginRegistrationDir]] as [string, string][]) : []),
      ...config.csiDrivers.map((d): [string, string] => [`CSI driver ${d.name}`, d.endpoint.replace(/^unix:\/\//, '')]),
      ...(config.host === 'linux' ? ([['loop control', '/dev/loop-control']] as [string, string][]) : []),
      ...(config.mode === 'static' ? ([['manifest directory', config.manifestDir]] as [string, string][]) : []),
    ]
    expect(config.pluginRegistration).toBe(true)
    for (const [what, path] of paths) expect({ what, path, host: hostPathOf(pod, mounts, path)?.hostPath }).toEqual({ what, path, host: path })
    // Mounts made under the root (volumes, and a CSI driver's, through its own Bidirectional mounts) must reach the host.
    for (const [, path] of paths.filter(([, p]) => p.startsWith(`${config.rootDir}/`) || p === config.rootDir)) {
      expect(hostPathOf(pod, mounts, path)?.mount.mountPropagation).toBe('Bidirectional')
    }
    // Nothing of the kubelet's: kubevol serves a Node of its own from a root of its own.
    expect(pod.volumes.filter((v) => v.hostPath?.path.startsWith('/var/lib/kubelet'))).toEqual([])
  })

  it('probes the status endpoints with httpGet where the agent listens, with a startup probe', async () => {
    const { pod, container, config } = await daemonSet()
    const probes = { startupProbe: '/livez', livenessProbe: '/livez', readinessProbe: '/readyz' } as const
    for (const [probe, path] of Object.entries(probes)) {
      expect({ probe, ...(container[probe] as { httpGet: object }).httpGet }).toEqual({ probe, host: config.address, port: config.port, path })
      expect(container[probe]).not.toHaveProperty('exec')
    }
    // The kubelet's httpGet comes from the node's network namespace: a loopback address is the
    // node's only with hostNetwork. Beyond loopback, a token needs the probes let through.
    if (/^(127\.|::1$|localhost$)/.test(config.address)) expect(pod.hostNetwork).toBe(true)
    else if (config.authTokenFile) expect(config.unauthenticatedProbes).toBe(true)
  })

  it("requests at least the agent's measured memory that deploy/README.md states", async () => {
    const { container } = await daemonSet()
    const measured = /peak (\d+) MiB in API mode/.exec(read('README.md'))
    expect(measured).not.toBeNull()
    const mebibytes = (q: string) => Number(/^(\d+)Mi$/.exec(q)?.[1] ?? Number.NaN)
    const resources = container.resources as { requests: { memory: string }; limits: { memory: string } }
    expect(mebibytes(resources.requests.memory)).toBeGreaterThanOrEqual(Number(measured?.[1]))
    expect(mebibytes(resources.limits.memory)).toBeGreaterThan(mebibytes(resources.requests.memory))
  })

  it("gives an example CSI node plugin whose registrar and mounts agree with the agent's paths", async () => {
    const { config } = await daemonSet()
    const [plugin] = parseAllDocuments(read('examples/csi-node-plugin.yaml')).map((d) => d.toJS())
    const pod = plugin.spec.template.spec as PodSpec
    const registrar = pod.containers.find((c) => c.name === 'node-driver-registrar')
    const driver = pod.containers.find((c) => c.name !== 'node-driver-registrar')
    expect(registrar && driver).toBeTruthy()
    const flag = (name: string) => registrar?.args?.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
    // The registrar puts its socket in /registration (fixed in node-driver-registrar): that must be the agent's directory.
    expect(hostPathOf(pod, registrar?.volumeMounts ?? [], '/registration/x.sock')?.hostPath).toBe(`${config.pluginRegistrationDir}/x.sock`)
    // --kubelet-registration-path is the driver's socket as the agent dials it: a host path the agent's container sees at the same path, reached through the registrar's --csi-address.
    const registrationPath = flag('kubelet-registration-path') ?? ''
    expect(registrationPath.startsWith(`${config.rootDir}/plugins/`)).toBe(true)
    expect(hostPathOf(pod, registrar?.volumeMounts ?? [], flag('csi-address') ?? '')?.hostPath).toBe(registrationPath)
    const endpoint = (driver?.args?.find((a) => a.startsWith('--endpoint='))?.slice('--endpoint='.length) ?? '').replace(/^unix:\/\//, '')
    expect(hostPathOf(pod, driver?.volumeMounts ?? [], endpoint)?.hostPath).toBe(registrationPath)
    // The driver mounts into kubevol's publish targets and staging paths, which must reach the host and kubevol.
    for (const dir of [`${config.rootDir}/pods`, `${config.rootDir}/plugins`]) {
      const reached = hostPathOf(pod, driver?.volumeMounts ?? [], `${dir}/x`)
      expect({ dir, host: reached?.hostPath, propagation: reached?.mount.mountPropagation }).toEqual({ dir, host: `${dir}/x`, propagation: 'Bidirectional' })
    }
  })

  it("runs as its node identity by TLS bootstrapping from bootstrap-rbac.yaml's kubeconfig, and keeps the certificate on the host", async () => {
    const { pod, container, config } = await daemonSet()
    expect(config).toMatchObject({ bootstrapKubeconfig: '/etc/kubevol/bootstrap/kubeconfig', rotateCertificates: true, certDir: '/var/lib/kubevol/pki', kubeconfig: '/var/lib/kubevol/kubeconfig' })
    // The flag names the file of the bundle's ConfigMap, mounted where the flag says.
    const mount = (container.volumeMounts ?? []).find((m) => config.bootstrapKubeconfig === `${m.mountPath}/kubeconfig`)
    const volume = (pod.volumes as { name: string; configMap?: { name: string } }[]).find((v) => v.name === mount?.name)
    const configMap = parseAllDocuments(read('bootstrap-rbac.yaml'))
      .map((d) => d.toJS())
      .find((d) => d.kind === 'ConfigMap')
    expect(volume?.configMap?.name).toBe(configMap.metadata.name)
    expect(configMap.data.kubeconfig).toContain('tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token')
    // The pair and the node's kubeconfig outlive the container: a restart uses them and makes no request.
    for (const path of [config.certDir, config.kubeconfig ?? '']) expect({ path, host: hostPathOf(pod, container.volumeMounts ?? [], path)?.hostPath }).toEqual({ path, host: path })
  })

  it("gives deploy/README.md's patch for running without TLS bootstrapping, which removes exactly that flag", async () => {
    const { container } = await daemonSet()
    const patch = JSON.parse(/kubectl -n kube-system patch ds kubevol --type=json -p '(\[[^']*\])'/.exec(read('README.md'))?.[1] ?? '[]') as { op: string; path: string; value?: string }[]
    const index = container.args?.findIndex((a) => a.startsWith('--bootstrap-kubeconfig=')) ?? -1
    expect(patch).toEqual([
      { op: 'test', path: `/spec/template/spec/containers/0/args/${index}`, value: container.args?.[index] },
      { op: 'remove', path: `/spec/template/spec/containers/0/args/${index}` },
    ])
    const args = (container.args ?? []).filter((_, i) => i !== index).map((a) => a.replace(/\$\(NODE_NAME\)/g, 'n1'))
    const config = await loadAgentConfig({ argv: args, env: { NODE_NAME: 'n1' } })
    expect(config.bootstrapKubeconfig).toBeUndefined()
    expect(config.mode).toBe('api')
  })

  it('ships the CSIDriver object that makes fileDisk volumes need no VolumeAttachment, and the rights to register the Node without TLS bootstrapping', () => {
    const [driver] = parseAllDocuments(read('csidriver-filedisk.yaml')).map((d) => d.toJS())
    expect(driver).toMatchObject({ apiVersion: 'storage.k8s.io/v1', kind: 'CSIDriver', metadata: { name: 'filedisk.kubevol.io' }, spec: { attachRequired: false, podInfoOnMount: false } })
    const role = parseAllDocuments(read('serviceaccount-rbac.yaml'))
      .map((d) => d.toJS())
      .find((d) => d.kind === 'ClusterRole')
    const nodeVerbs = role.rules.filter((r: { resources: string[] }) => r.resources.includes('nodes')).flatMap((r: { verbs: string[] }) => r.verbs)
    expect(nodeVerbs).toEqual(expect.arrayContaining(['get', 'create', 'patch']))
  })

  it('gives the static-mode example as a valid manifest', () => {
    expect(parseManifests(read('examples/static-pod.yaml'), 'static-pod.yaml').errors).toEqual([])
  })
})
