/**
 * Output: tables for people (cli-table3, borderless, colour only on a terminal), JSON and YAML for
 * machines (stable: keys as the agent or command produces them).
 */
import Table from 'cli-table3'
import { stringify } from 'yaml'

/** Where a command writes. */
export interface Io {
  readonly stdout: { write(text: string): unknown }
  readonly stderr: { write(text: string): unknown }
  /** Colour and progress bars only on a terminal. */
  readonly isTTY: boolean
  readonly env: Readonly<Record<string, string | undefined>>
  readonly cwd: string
}

/** `-o`: every command takes the first four; `name` only where a command lists it (`status`). */
export type OutputFormat = 'table' | 'wide' | 'json' | 'yaml' | 'name'

/** How a table is printed. */
export interface TableOptions {
  /** Leave out the header row (`--no-headers`). @default false */
  readonly noHeaders?: boolean
}

/** The table options a command line asks for. */
export function tableOptions(p: { readonly flags: Readonly<Record<string, unknown>> }): TableOptions {
  return { noHeaders: p.flags['no-headers'] === true }
}

/** The widest error a table shows; `-o wide`, JSON, YAML and `explain` show it whole. */
export const ERROR_WIDTH = 60

/**
 * The kubelet's operation texts name the operation, the volume, its unique name and the pod, and give
 * the cause last: `MountVolume.SetUp failed for volume "cfg" (UniqueName: "…") pod "web" (UID: "…") :
 * configmap "web-config" not found`. This matches everything before the cause.
 */
const OPERATION_PREFIX = /^[^"]*? for volume "[^"]*"(?: \(UniqueName: "[^"]*"\))?(?: pod "[^"]*" \(UID: "[^"]*"\))? ?:? (?=\S)/

/** An absolute path of four levels or more: shortened to its last two when a cause is too long. */
const LONG_PATH = /\/(?:[^\s/:"']+\/){2,}([^\s/:"']+\/[^\s/:"']+)/g

/**
 * The cause of an operation's error, on one line and at most `width` characters: the operation,
 * volume and pod prefix left out (the row already names them); when still too long, long paths cut
 * to their last two levels, then its end kept, since the cause is said last.
 */
export function causeOf(message: string, width: number = ERROR_WIDTH): string {
  let cause = message.replace(/\s*\n\s*/g, ' ').trim().replace(OPERATION_PREFIX, '')
  if (cause.length > width) cause = cause.replace(LONG_PATH, '…/$1')
  return cause.length <= width ? cause : `…${cause.slice(cause.length - width + 1)}`
}

/** A borderless table, like kubectl's. */
export function renderTable(head: readonly string[], rows: readonly (readonly unknown[])[], options: TableOptions = {}): string {
  const table = new Table({
    head: options.noHeaders ? [] : head.map((h) => h.toUpperCase()),
    chars: {
      top: '', 'top-mid': '', 'top-left': '', 'top-right': '',
      bottom: '', 'bottom-mid': '', 'bottom-left': '', 'bottom-right': '',
      left: '', 'left-mid': '', mid: '', 'mid-mid': '', right: '', 'right-mid': '', middle: '  ',
    },
    style: { head: [], border: [], 'padding-left': 0, 'padding-right': 0 },
  })
  for (const row of rows) table.push(row.map((c) => (c === undefined || c === null ? '' : String(c))))
  return `${table.toString().split('\n').map((l) => l.trimEnd()).join('\n')}\n`
}

/** Writes `value` as JSON or YAML. */
export function renderData(format: 'json' | 'yaml', value: unknown): string {
  return format === 'json' ? `${JSON.stringify(value, null, 2)}\n` : stringify(value)
}
