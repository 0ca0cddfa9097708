/**
 * Structured logs with pino: JSON lines by default (what a container's log collector wants), klog-like
 * text for a person at a terminal. The kubelet's verbosity maps onto levels: -v 0-3 logs info and up,
 * 4 and more adds debug.
 */
import type { Logger, LogFields } from '@kubevol/core'
import { type Logger as PinoLogger, pino } from 'pino'

/** Where log lines go: anything with `write(string)`. */
export interface LogDestination {
  write(line: string): unknown
  /** A terminal gets text when the format is `auto`. */
  readonly isTTY?: boolean
}

export interface AgentLoggerOptions {
  /** @default 'auto' */
  readonly format?: 'auto' | 'json' | 'text'
  /** The kubelet's -v. @default 2 */
  readonly verbosity?: number
  /** @default standard output, written synchronously */
  readonly destination?: LogDestination
  /** Fields on every line. */
  readonly base?: Readonly<Record<string, unknown>>
  /** Log nothing (tests). @default false */
  readonly silent?: boolean
}

/** The core's Logger port over pino, with the pino logger for the agent's own use. */
export interface AgentLogger extends Logger {
  readonly pino: PinoLogger
}

const LETTER: Readonly<Record<string, string>> = { trace: 'I', debug: 'I', info: 'I', warn: 'W', error: 'E', fatal: 'F' }

/** One JSON log record as a klog-like line: `I1129 23:17:01.123 message key="value"`. */
export function formatTextLine(record: Record<string, unknown>): string {
  const { level, time, msg, ...rest } = record
  const date = new Date(typeof time === 'string' || typeof time === 'number' ? time : Date.now())
  const pad = (n: number, w = 2) => String(n).padStart(w, '0')
  const stamp = `${pad(date.getMonth() + 1)}${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`
  const fields = Object.entries(rest)
    .filter(([key]) => key !== 'pid' && key !== 'hostname')
    .map(([key, value]) => `${key}=${typeof value === 'string' ? JSON.stringify(value) : JSON.stringify(value) ?? String(value)}`)
  return `${LETTER[String(level)] ?? 'I'}${stamp} ${String(msg ?? '')}${fields.length ? ` ${fields.join(' ')}` : ''}\n`
}

/** Creates the agent's logger. */
export function createAgentLogger(options: AgentLoggerOptions = {}): AgentLogger {
  // Synchronous writes: a line logged just before exit is not lost.
  const destination: LogDestination = options.destination ?? Object.assign(pino.destination({ dest: 1, sync: true }), { isTTY: process.stdout.isTTY === true })
  const format = options.format ?? 'auto'
  const text = format === 'text' || (format === 'auto' && destination.isTTY === true)
  const level = options.silent ? 'silent' : (options.verbosity ?? 2) >= 4 ? 'debug' : 'info'
  const stream = text
    ? {
        write(line: string) {
          try {
            destination.write(formatTextLine(JSON.parse(line) as Record<string, unknown>))
          } catch {
            destination.write(line)
          }
        },
      }
    : destination
  const logger = pino(
    {
      level,
      base: { ...options.base },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    stream,
  )
  const at =
    (method: 'debug' | 'info' | 'warn' | 'error') =>
    (message: string, fields?: LogFields): void => {
      if (fields) logger[method](fields, message)
      else logger[method](message)
    }
  return { pino: logger, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }
}
