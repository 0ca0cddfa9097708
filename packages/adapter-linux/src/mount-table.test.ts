import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { libc } from './libc.js'
import { MountTable } from './mount-table.js'

const line = (id: number, target: string): string => `${id} 1 0:${id} / ${target} rw,relatime shared:1 - tmpfs tmpfs rw\n`

/** A reader whose answers the test releases one at a time. */
function controlledReader() {
  let text = line(20, '/')
  const waiting: (() => void)[] = []
  return {
    set(next: string) {
      text = next
    },
    /** Reads begun and not answered yet. */
    get pending() {
      return waiting.length
    },
    releaseAll() {
      for (const release of waiting.splice(0)) release()
    },
    read: () =>
      new Promise<string>((resolve) => {
        const snapshot = text
        waiting.push(() => resolve(snapshot))
      }),
  }
}

async function settle(reader: ReturnType<typeof controlledReader>): Promise<void> {
  // The consistent read reads until two reads agree: answer each read as it comes.
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setImmediate(r))
    if (reader.pending === 0) return
    reader.releaseAll()
  }
}

describe('MountTable', () => {
  const dirs: string[] = []
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
  })

  // A regular file stands in for /proc/self/mountinfo: poll(2) never reports a change on it, so
  // only invalidate() marks the snapshot stale.
  const table = (reader: ReturnType<typeof controlledReader>): MountTable => {
    const dir = mkdtempSync(join(tmpdir(), 'kubevol-table-'))
    dirs.push(dir)
    const path = join(dir, 'mountinfo')
    writeFileSync(path, '')
    return new MountTable(libc, path, reader.read)
  }

  it('a caller that arrives while a read is in flight gets that read, not the snapshot before it', async () => {
    const reader = controlledReader()
    const t = table(reader)
    const first = t.entries()
    await settle(reader)
    expect((await first).map((e) => e.target)).toEqual(['/'])

    // A mount of our own: the snapshot is stale. The first caller starts a read; a second arrives
    // while it is in flight and must not be answered from the snapshot that predates the mount.
    reader.set(line(20, '/') + line(21, '/mnt/a'))
    t.invalidate()
    const a = t.targets()
    const b = t.targets()
    let bAnswered = false
    void b.then(() => {
      bAnswered = true
    })
    await new Promise((r) => setImmediate(r))
    expect(bAnswered).toBe(false)
    await settle(reader)
    expect((await a).has('/mnt/a')).toBe(true)
    expect((await b).has('/mnt/a')).toBe(true)
    expect(t.reads).toBe(2)
  })

  it('a change during a read is not lost: the read is done again', async () => {
    const reader = controlledReader()
    const t = table(reader)
    const first = t.targets()
    // The read is in flight with the old text; a mount lands before it is answered.
    await new Promise((r) => setImmediate(r))
    reader.set(line(20, '/') + line(22, '/mnt/b'))
    t.invalidate()
    await settle(reader)
    expect((await first).has('/mnt/b')).toBe(true)
    expect(t.reads).toBe(2)
    expect((await t.targets()).has('/mnt/b')).toBe(true)
    expect(t.reads).toBe(2)
  })

  it('ordered: the consistent read asks its first two reads at once, and reads on until two in a row agree', async () => {
    // Answers in the order asked; the first two disagree (a mount came between them).
    const answers = [line(20, '/'), line(20, '/') + line(21, '/mnt/a'), line(20, '/') + line(21, '/mnt/a')]
    const asked: ((text: string) => void)[] = []
    const read = () => new Promise<string>((resolve) => asked.push(resolve))
    const answer = () => {
      for (const resolve of asked.splice(0)) resolve(answers.shift() as string)
    }
    const dir = mkdtempSync(join(tmpdir(), 'kubevol-table-'))
    dirs.push(dir)
    writeFileSync(join(dir, 'mountinfo'), '')
    const t = new MountTable(libc, join(dir, 'mountinfo'), read, { ordered: true })
    const entries = t.entries()
    await new Promise((r) => setImmediate(r))
    expect(asked).toHaveLength(2)
    answer()
    await new Promise((r) => setImmediate(r))
    // They disagreed: a third, alone, compared with the second.
    expect(asked).toHaveLength(1)
    answer()
    expect((await entries).map((e) => e.target)).toEqual(['/', '/mnt/a'])
    expect(answers).toHaveLength(0)
    expect(t.reads).toBe(1)
  })

  it('answers from the snapshot, with no read, while nothing changed', async () => {
    const reader = controlledReader()
    const t = table(reader)
    const first = t.entries()
    await settle(reader)
    await first
    for (let i = 0; i < 5; i++) await t.entries()
    expect(t.reads).toBe(1)
  })
})
