/** A volume a process still uses cannot be unmounted: the failure names the process and mounts holding it. */
import { spawn } from 'node:child_process'
import { createVolumeManager } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildPod, createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { expect, it, vi } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'

describeAsRoot('a busy unmount on the real kernel', () => {
  const h = useLinuxHost()

  it('names the processes using the volume and the mounts below it, and finishes once they are gone', async () => {
    const { host, p } = h()
    const pods = createMemoryPodSource()
    const manager = createVolumeManager({ host, plugins: createBuiltinPlugins(), podSource: pods, objects: createMemoryObjectReader(), nodeName: 'node-1', rootDir: p('kubevol'), statsPeriodMs: 0 })
    const stop = new AbortController()
    const running = manager.run(stop.signal)
    const pod = buildPod({ uid: 'busy', volumes: [{ name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } }] })
    pods.setPod(pod)
    await manager.waitForAttachAndMount(pod, { timeoutMs: 20_000 })
    const dir = p('kubevol/pods/busy/volumes/kubernetes.io~empty-dir/shm')
    const sleeper = spawn('sleep', ['60'], { cwd: dir, stdio: 'ignore' })
    try {
      pods.deletePod('busy')
      const volume = 'kubernetes.io/empty-dir/busy-shm'
      await vi.waitFor(() => expect(String((manager.executor.lastFailure(volume, 'busy')?.error as Error | undefined)?.message)).toContain('held by'), { timeout: 10_000 })
      const message = String((manager.executor.lastFailure(volume, 'busy')?.error as Error | undefined)?.message)
      expect(message).toContain('UnmountVolume.TearDown failed for volume "shm"')
      expect(message).toContain(`processes [${sleeper.pid} (sleep)]`)
      expect(manager.hasPossiblyMountedVolumesForPod('busy')).toBe(true)
    } finally {
      sleeper.kill('SIGKILL')
    }
    await vi.waitFor(() => expect(manager.hasPossiblyMountedVolumesForPod('busy')).toBe(false), { timeout: 20_000 })
    expect(await host.lstat(dir)).toBeNull()
    stop.abort()
    await running
  })
})
