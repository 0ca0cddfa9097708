/** The CLI's one way to ask a running agent: `--server`, `--token-file`, and clear errors. */
import { readFile } from 'node:fs/promises'
import { CliError, EXIT } from '../errors.js'
import type { ParsedCommand } from '../parse.js'

/** GETs `path` of the agent: the status and the JSON body. Throws CliError (exit 3) when it cannot be reached. */
export async function agentGet(p: ParsedCommand, path: string, timeoutMs = 10_000): Promise<{ status: number; body: unknown }> {
  const server = String(p.flags.server).replace(/\/+$/, '')
  const headers: Record<string, string> = {}
  if (p.flags['token-file'] !== undefined) headers.authorization = `Bearer ${(await readFile(String(p.flags['token-file']), 'utf8')).trim()}`
  let res: Response
  try {
    res = await fetch(`${server}${path}`, { headers, signal: AbortSignal.timeout(timeoutMs) })
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause
    throw new CliError(`cannot reach the agent at ${server} (${cause?.code ?? cause?.message ?? (err as Error).message}): is \`kubevol run\` running? Pass its address with --server`, EXIT.unreachable)
  }
  if (res.status === 401) throw new CliError(`the agent at ${server} requires a bearer token: pass --token-file`, EXIT.failed)
  const text = await res.text()
  try {
    return { status: res.status, body: JSON.parse(text) }
  } catch {
    throw new CliError(`the agent at ${server} answered ${path} with HTTP ${res.status} and no JSON: is it a kubevol agent?`)
  }
}
