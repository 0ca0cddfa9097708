/**
 * strace(1) attached to this test process (every thread, and threads started later), for tests
 * that count the system calls a host call makes on the real kernel.
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** Whether strace(1) runs here; when it does not, why. */
export function straceMissing(): string | undefined {
  const r = spawnSync('strace', ['-V'], { encoding: 'utf8' })
  return r.error || r.status !== 0 ? 'strace(1) is not installed (apt-get install strace)' : undefined
}

export interface Trace {
  /** Detaches and gives the lines strace wrote (one per call). */
  stop(): Promise<string[]>
}

/** Starts tracing `syscalls` (strace's `-e trace=` list) in this process; resolves once attached. */
export async function traceSelf(syscalls: string): Promise<Trace> {
  const dir = mkdtempSync(join(tmpdir(), 'kubevol-strace-'))
  const out = join(dir, 'trace')
  const child = spawn('strace', ['-f', '-e', `trace=${syscalls}`, '-o', out, '-p', String(process.pid)], { stdio: ['ignore', 'ignore', 'pipe'] })
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
  await new Promise<void>((resolve, reject) => {
    let said = ''
    child.stderr.on('data', (chunk: Buffer) => {
      said += chunk.toString()
      // "strace: Process N attached with M threads" once every thread is traced.
      if (/Process \d+ attached/.test(said)) resolve()
    })
    child.on('exit', (code) => reject(new Error(`strace exited (${code}) before attaching: ${said.trim()}`)))
  })
  return {
    async stop() {
      child.kill('SIGINT')
      await exited
      const lines = readFileSync(out, 'utf8').split('\n').filter((line) => line.length > 0)
      rmSync(dir, { recursive: true, force: true })
      return lines
    },
  }
}
