/**
 * What several attacks share: the type of an attack, reading what the agent says went wrong with a
 * pod, and a short wait that is a deadline, never a sleep the result depends on.
 */
import type { HostileNode } from '../harness/node.js'

/** An attack class: registers its `it`s, each on a fresh node from `node()`. */
export type Attack = (node: () => HostileNode) => void

/** Every error text the agent shows about a pod: its view, the state's pod errors, its manifest file's errors. */
export async function problemsOf(node: HostileNode, uid: string, file?: string): Promise<string[]> {
  const out: string[] = []
  const view = await node.pod(uid).catch(() => undefined)
  if (view) {
    out.push(...(view.podErrors ?? []))
    if (view.worker?.lastError) out.push(view.worker.lastError)
    for (const v of view.volumes) if (v.lastError) out.push(v.lastError)
  }
  const state = await node.state()
  out.push(...(state.podErrors[uid] ?? []))
  if (file) out.push(...(state.manifests?.errors ?? []).filter((e) => e.file.endsWith(`/${file}`) || e.file === file).map((e) => e.reason))
  return out
}

/** Waits `ms` (for "nothing happens meanwhile" checks only). */
export const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls `check` for `ms`, failing at once if it ever holds: for "this never happens" checks. */
export async function never(what: string, check: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await check()) throw new Error(what)
    await pause(50)
  }
}
