import { describe, expect, it } from 'vitest'
import { SharedReads } from './shared-reads.js'

// A read whose answer names the call that made it ("/a#1" for the first call of "/a"), settled by hand.
function harness() {
  let dispatches = 0
  const made: string[] = []
  const pending: { settle: () => void; fail: () => void }[] = []
  const reads = new SharedReads<string>(() => dispatches)
  const read = (key: string) =>
    reads.read(
      key,
      () =>
        new Promise<string>((resolve, reject) => {
          made.push(key)
          const name = `${key}#${made.filter((k) => k === key).length}`
          pending.push({ settle: () => resolve(name), fail: () => reject(new Error(`${name} failed`)) })
        }),
    )
  return {
    read,
    dispatch: () => void dispatches++,
    settleAll: async () => {
      for (const p of pending.splice(0)) p.settle()
      await new Promise((r) => setTimeout(r, 0))
    },
    failAll: () => {
      for (const p of pending.splice(0)) p.fail()
    },
  }
}

describe('SharedReads', () => {
  it('gives reads of one path asked before any dispatch the same call; other paths their own', async () => {
    const h = harness()
    const answers = Promise.all([h.read('/a'), h.read('/b'), h.read('/a'), h.read('/a')])
    await h.settleAll()
    expect(await answers).toEqual(['/a#1', '/b#1', '/a#1', '/a#1'])
  })

  it.each([
    { name: 'after a dispatch (the queued call may have started)', between: (h: ReturnType<typeof harness>) => h.dispatch() },
    { name: 'after the first call was answered', between: (h: ReturnType<typeof harness>) => h.settleAll() },
  ])('makes a call of its own $name', async ({ between }) => {
    const h = harness()
    const first = h.read('/a')
    await between(h)
    const second = h.read('/a')
    await h.settleAll()
    expect([await first, await second]).toEqual(['/a#1', '/a#2'])
  })

  it('shares a failure as it shares an answer, and the next read makes a new call', async () => {
    const h = harness()
    const both = Promise.allSettled([h.read('/a'), h.read('/a')])
    h.failAll()
    expect((await both).map((r) => (r.status === 'rejected' ? (r.reason as Error).message : r.value))).toEqual(['/a#1 failed', '/a#1 failed'])
    const again = h.read('/a')
    await h.settleAll()
    expect(await again).toEqual('/a#2')
  })
})
