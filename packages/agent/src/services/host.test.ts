import { systemClock } from '@kubevol/core'
import { describe, expect, it } from 'vitest'
import { startAgent } from '../agent.js'
import { AgentConfigError, resolveAgentConfig } from '../config/load-config.js'
import { type KernelFloor, loadHost } from './host.js'

const config = (rootDir = '/nonexistent/kubevol-root') => resolveAgentConfig({ nodeName: 'n1', host: 'linux', rootDir, port: 0, manifestDir: '/nonexistent/manifests' })

describe('the kernel floor of the Linux host', () => {
  it.each<{ name: string; floor: KernelFloor; lacks: string }>([
    { name: 'a 5.4 kernel', floor: { release: '5.4.0-150-generic', openat2: false, newMountApi: true }, lacks: 'openat2 (Linux 5.6)' },
    { name: 'a 4.19 kernel', floor: { release: '4.19.0', openat2: false, newMountApi: false }, lacks: 'openat2 (Linux 5.6) and the new mount API: open_tree, move_mount, fsopen (Linux 5.2)' },
  ])('refuses $name at start: a configuration error in one line naming the release and what is missing', async ({ floor, lacks }) => {
    const starting = startAgent(config(), { probeKernelFloor: () => floor, log: { silent: true } })
    await expect(starting).rejects.toBeInstanceOf(AgentConfigError)
    const message = await starting.then(
      () => '',
      (err: Error) => err.message,
    )
    expect(message).toContain(`the kernel (Linux ${floor.release}) is too old for the Linux host: it lacks ${lacks};`)
    expect(message).not.toContain('\n')
  })

  it('creates the Linux host on a kernel that has both, and never probes for the in-memory host', async () => {
    const host = await loadHost(config(), systemClock, () => ({ release: '6.1.0', openat2: true, newMountApi: true }))
    expect(typeof (host as { callsInFlight?: unknown }).callsInFlight).toBe('function')
    const memory = await loadHost(resolveAgentConfig({ nodeName: 'n1', host: 'mock' }), systemClock, () => {
      throw new Error('probed')
    })
    expect(memory).toBeDefined()
  })
})
