/**
 * The files in deploy/ stay in step with the agent: every manifest parses, the DaemonSet's flags are
 * ones the agent accepts, the fileDisk CSIDriver object says there is nothing to attach, and the
 * static-mode example is a valid manifest.
 */
import { readFileSync, readdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parseAllDocuments } from 'yaml'
import { describe, expect, it } from 'vitest'
import { loadAgentConfig } from './config/load-config.js'
import { parseManifests } from './sources/manifest-parser.js'

const deploy = fileURLToPath(new URL('../../../deploy/', import.meta.url))
const read = (name: string) => readFileSync(`${deploy}${name}`, 'utf8')

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

  it('ships the CSIDriver object that makes fileDisk volumes need no VolumeAttachment, and the rights to register the Node', () => {
    const [driver] = parseAllDocuments(read('csidriver-filedisk.yaml')).map((d) => d.toJS())
    expect(driver).toMatchObject({ apiVersion: 'storage.k8s.io/v1', kind: 'CSIDriver', metadata: { name: 'filedisk.kubevol.io' }, spec: { attachRequired: false, podInfoOnMount: false } })
    const role = parseAllDocuments(read('rbac.yaml'))
      .map((d) => d.toJS())
      .find((d) => d.kind === 'ClusterRole')
    const nodeVerbs = role.rules.filter((r: { resources: string[] }) => r.resources.includes('nodes')).flatMap((r: { verbs: string[] }) => r.verbs)
    expect(nodeVerbs).toEqual(expect.arrayContaining(['get', 'create', 'patch']))
  })

  it('gives the static-mode example as a valid manifest', () => {
    expect(parseManifests(read('examples/static-pod.yaml'), 'static-pod.yaml').errors).toEqual([])
  })
})
