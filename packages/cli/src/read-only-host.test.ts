import { createMemoryHost } from '@kubevol/adapter-mock'
import type { Host } from '@kubevol/core'
import { describe, expect, it } from 'vitest'
import { MUTATING_HOST_METHODS, ReadOnlyHostError, createReadOnlyHost } from './read-only-host.js'

function call(host: Host, method: string): Promise<unknown> {
  const [capability, member] = method.includes('.') ? method.split('.') : [undefined, method]
  const target = (capability ? (host as unknown as Record<string, Record<string, (...a: unknown[]) => Promise<unknown>>>)[capability] : host) as unknown as Record<
    string,
    (...a: unknown[]) => Promise<unknown>
  >
  const args = method === 'mount' ? [{ source: 'tmpfs', target: '/x', fstype: 'tmpfs' }] : ['/x', '/y', 0]
  return target[member as string]!(...args)
}

describe('createReadOnlyHost', () => {
  it.each(MUTATING_HOST_METHODS.map((m) => [m]))('refuses %s and records it, changing nothing', async (method) => {
    const memory = createMemoryHost()
    const before = JSON.stringify(memory.tree('/'))
    const ro = createReadOnlyHost(memory)
    await expect(call(ro.host, method)).rejects.toBeInstanceOf(ReadOnlyHostError)
    expect(ro.refused.map((e) => e.method)).toEqual([method])
    expect(JSON.stringify(memory.tree('/'))).toBe(before)
  })

  it('reads through', async () => {
    const memory = createMemoryHost()
    await memory.mkdir('/etc', { recursive: true })
    await memory.writeFile('/etc/hello', 'hi')
    const { host } = createReadOnlyHost(memory)
    expect(new TextDecoder().decode(await host.readFile('/etc/hello'))).toBe('hi')
    expect(await host.readdir('/etc')).toEqual(['hello'])
    expect(await host.isMountPoint('/etc')).toBe(false)
  })
})
