// A volume plugin of your own: `greeting` volumes get a file with a message, on a tmpfs of their own.
// A plugin holds one volume type's logic and touches the machine only through the Host it is given.
import { createMemoryHost } from '@kubevol/adapter-mock'
import { type Host, type Paths, type VolumePlugin, type VolumeSpec, createMemoryObjectReader, createMemoryPodSource, createVolumeManager, uniquePodName } from '@kubevol/core'
import { joinPath } from '@kubevol/core/host'
import { buildPod } from '@kubevol/core/testing'

interface GreetingSource {
  readonly message?: string
}

export function createGreetingPlugin(): VolumePlugin {
  const name = 'example.com/greeting'
  let host: Host
  let paths: Paths
  const sourceOf = (spec: VolumeSpec) => spec.volume?.greeting as GreetingSource | undefined
  const dirOf = (podUID: string, volume: string) => paths.podVolumeDir(podUID, name, volume)
  return {
    name,
    init(context) {
      host = context.host
      paths = context.paths
    },
    canSupport: (spec) => sourceOf(spec) !== undefined,
    getVolumeName: (spec) => spec.name,
    requiresRemount: () => false,
    supportsMountOption: () => false,
    newMounter(spec, pod) {
      const dir = dirOf(pod.metadata.uid!, spec.name)
      return {
        getPath: () => dir,
        getAttributes: () => ({ readOnly: true, managed: false, seLinuxRelabel: false }),
        // SetUp must be idempotent: after a restart it runs again on a volume that is already set up.
        async setUp() {
          await host.mkdir(dir, { recursive: true })
          if (!(await host.isMountPoint(dir))) await host.mount({ source: 'tmpfs', target: dir, fstype: 'tmpfs' })
          await host.writeFile(joinPath(dir, 'message'), sourceOf(spec)?.message ?? 'hello')
        },
      }
    },
    newUnmounter(volume, podUID) {
      const dir = dirOf(podUID, volume)
      return {
        getPath: () => dir,
        // TearDown too: it must succeed when there is nothing left to do.
        async tearDown() {
          if (!(await host.lstat(dir))) return
          if (await host.isMountPoint(dir)) await host.unmount(dir)
          await host.remove(dir)
        },
      }
    },
  }
}

export async function run() {
  const host = createMemoryHost()
  const pods = createMemoryPodSource()
  const manager = createVolumeManager({
    host,
    plugins: [createGreetingPlugin()],
    podSource: pods,
    objects: createMemoryObjectReader(),
    nodeName: 'node-1',
    controllerAttachDetach: false,
  })
  const stop = new AbortController()
  const running = manager.run(stop.signal)
  const pod = buildPod({ name: 'hello', volumes: [{ name: 'motd', greeting: { message: 'hello from a plugin' } }] })
  pods.setPod(pod)
  await manager.waitForAttachAndMount(pod, { timeoutMs: 5_000 })
  const file = joinPath(manager.paths.podVolumeDir(pod.metadata.uid!, 'example.com/greeting', 'motd'), 'message')
  const message = new TextDecoder().decode(await host.readFile(file))
  const lines = [`mounted: ${[...manager.getMountedVolumesForPod(uniquePodName(pod)).keys()].join(', ')}`, `${file}: ${message}`]

  pods.deletePod(pod.metadata.uid!)
  await manager.waitForUnmount(pod, { timeoutMs: 5_000 })
  lines.push(`after the pod is deleted: ${host.mountTargets().length} mounts`)
  stop.abort()
  await running
  host.assertNoViolations()
  return { lines, message, mountsLeft: host.mountTargets().length }
}
