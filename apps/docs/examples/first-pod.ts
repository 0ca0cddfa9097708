// A first pod: a real volume manager on the in-memory host, with the built-in plugins.
import { createMemoryHost } from '@kubevol/adapter-mock'
import { createMemoryObjectReader, createMemoryPodSource, createVolumeManager, uniquePodName } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildPod } from '@kubevol/core/testing'

export async function run() {
  const host = createMemoryHost() // a file tree and a mount table in memory: nothing real is touched
  const pods = createMemoryPodSource() // which pods are on this node (the agent reads the API or a directory)
  const objects = createMemoryObjectReader() // ConfigMaps, Secrets, PVCs, PVs by name
  objects.put('ConfigMap', { metadata: { name: 'web-config', namespace: 'default' }, data: { 'nginx.conf': 'worker_processes 2;\n' } })
  objects.put('Secret', { metadata: { name: 'web-tls', namespace: 'default' }, data: { 'tls.key': 'c2VjcmV0' } })

  const manager = createVolumeManager({
    host,
    plugins: createBuiltinPlugins(),
    podSource: pods,
    objects,
    nodeName: 'node-1',
    controllerAttachDetach: false,
  })
  const stop = new AbortController()
  const running = manager.run(stop.signal)

  const pod = buildPod({
    name: 'web',
    volumes: [
      { name: 'cache', emptyDir: {} },
      { name: 'config', configMap: { name: 'web-config' } },
      { name: 'tls', secret: { secretName: 'web-tls' } },
    ],
  })
  pods.setPod(pod)
  await manager.waitForAttachAndMount(pod, { timeoutMs: 5_000 })

  const lines = ['pod web is ready; its volumes:']
  const volumes = manager.getMountedVolumesForPod(uniquePodName(pod))
  for (const [name, volume] of volumes) lines.push(`  ${name.padEnd(7)} ${volume.pluginName}`)
  // A container reads nginx.conf through kubevol's own links (nginx.conf → ..data/nginx.conf, ..data →
  // the version written last); the host never follows a link beneath the root, so read them as links.
  const configDir = manager.paths.podVolumeDir(pod.metadata.uid!, 'kubernetes.io/configmap', 'config')
  const version = await host.readlink(`${configDir}/..data`)
  const config = new TextDecoder().decode(await host.readFile(`${configDir}/${version}/nginx.conf`))
  lines.push(`the container sees /mnt/config/nginx.conf = ${JSON.stringify(config)} (a link: nginx.conf → ${await host.readlink(`${configDir}/nginx.conf`)})`)
  // emptyDir and configMap volumes are directories on the node's disk; a secret gets a tmpfs (memory).
  const root = manager.paths.root
  const mounts = (await host.mounts()).filter((m) => m.target.startsWith(root)).map((m) => `${m.fstype} on ${m.target}`)
  lines.push(`mounts under ${root}:`, ...mounts.map((t) => `  ${t}`))

  stop.abort()
  await running
  return { lines, mounts, config, volumes: [...volumes.keys()].sort() }
}
