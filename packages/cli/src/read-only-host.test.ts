import { createMemoryHost } from '@kubevol/adapter-mock'
import type { Host } from '@kubevol/core'
import { describe, expect, it } from 'vitest'
import { MUTATING_HOST_METHODS, READING_HOST_METHODS, ReadOnlyHostError, createReadOnlyHost } from './read-only-host.js'

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

  it('refuses a member it has not heard of, on the host and on a capability it has not heard of', async () => {
    const memory = createMemoryHost()
    const wrote: string[] = []
    const extended = Object.assign(Object.create(memory) as Host, {
      grow: async (path: string) => void wrote.push(path),
      snapshots: { take: async (path: string) => void wrote.push(path) },
    })
    const ro = createReadOnlyHost(extended)
    const host = ro.host as unknown as { grow(p: string): Promise<void>; snapshots: { take(p: string): Promise<void> } }
    await expect(host.grow('/x')).rejects.toBeInstanceOf(ReadOnlyHostError)
    await expect(host.snapshots.take('/x')).rejects.toBeInstanceOf(ReadOnlyHostError)
    expect(ro.refused.map((e) => e.method)).toEqual(['grow', 'snapshots.take'])
    expect(wrote).toEqual([])
  })

  it('lets through only the members that read, of all the memory host has', async () => {
    const memory = createMemoryHost()
    const ro = createReadOnlyHost(memory)
    const members: string[] = []
    const record = (obj: object, prefix: string): void => {
      for (let o: object | null = obj; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
        for (const key of Object.getOwnPropertyNames(o)) {
          if (key === 'constructor') continue
          const value = (obj as Record<string, unknown>)[key]
          if (typeof value === 'function') members.push(`${prefix}${key}`)
          else if (prefix === '' && value && typeof value === 'object') record(value, `${key}.`)
        }
      }
    }
    record(memory, '')
    expect(members).toEqual(expect.arrayContaining(MUTATING_HOST_METHODS.filter((m) => m !== 'lockRoot' || 'lockRoot' in memory)))
    // Holding the root may make its directory: the read-only host has no such member at all.
    expect(members).toContain('openRoot')
    expect((ro.host as { openRoot?: unknown }).openRoot).toBeUndefined()
    for (const name of members.filter((m) => m !== 'openRoot')) {
      const [capability, member] = name.includes('.') ? name.split('.') : [undefined, name]
      const target = (capability ? (ro.host as unknown as Record<string, object>)[capability] : ro.host) as Record<string, (...a: unknown[]) => Promise<unknown>>
      const call = target[member as string]!
      if (READING_HOST_METHODS.includes(name)) continue
      const before = ro.refused.length
      await expect(call('/x', '/y', 0)).rejects.toBeInstanceOf(ReadOnlyHostError)
      expect(ro.refused.length).toBe(before + 1)
    }
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
