/**
 * The real CSI binaries of the envtest kit, for tests: the directory `KUBEVOL_ENVTEST_ASSETS` names
 * holds `hostpathplugin` (csi-driver-host-path v1.16.1), `csi-node-driver-registrar` (v2.13.0) and
 * `csi-sanity` (csi-test v5.3.1). Without the variable, root or a private mount namespace the tests
 * skip with the reason, and fail under `CI=true` (CI sets the variable and runs as root).
 *
 * Each binary runs in a process group of its own (so a helper it runs, `mount` for one, goes with
 * it) and is stopped by its pid, never by name; every group still running when the test process
 * exits is killed. Their output goes to a log file the test names, where the driver's
 * `GRPC call: <method>` lines (`--v=3`) say which calls it served.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { accessSync, closeSync, constants, existsSync, lstatSync, openSync, readFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type * as grpc from '@grpc/grpc-js'
import { describe, it } from 'vitest'
import { grpc as loadGrpc, protoLoader } from '../src/csi/grpc-module.js'
import { PROTO_DIR } from '../src/csi/proto.js'

const BINARIES = ['hostpathplugin', 'csi-node-driver-registrar', 'csi-sanity'] as const

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** The assets directory, or why the real-CSI tests cannot run here. */
function assetsOrReason(): { dir: string } | { reason: string } {
  const dir = process.env.KUBEVOL_ENVTEST_ASSETS
  if (!dir) return { reason: 'KUBEVOL_ENVTEST_ASSETS is not set (the directory of the envtest kit: hostpathplugin, csi-node-driver-registrar, csi-sanity)' }
  const missing = BINARIES.filter((name) => !executable(join(dir, name)))
  if (missing.length > 0) return { reason: `KUBEVOL_ENVTEST_ASSETS=${dir} has no executable ${missing.join(', ')}` }
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return { reason: `needs root on Linux (uid ${process.getuid?.() ?? 'unknown'})` }
  if (process.env.KUBEVOL_TEST_MOUNT_NAMESPACE !== 'private') return { reason: 'the test process is not in a private mount namespace (test/mount-namespace.cjs did not run)' }
  return { dir }
}

/** `describe` for tests that run the real CSI binaries; `body` gets the assets directory. */
export function describeWithRealCsi(name: string, body: (assets: string) => void): void {
  const found = assetsOrReason()
  if ('dir' in found) {
    describe(name, () => body(found.dir))
    return
  }
  if (process.env.CI === 'true') {
    describe(name, () => {
      it(`cannot run: ${found.reason}`, () => {
        throw new Error(`${name}: ${found.reason}; CI must run the real-CSI tests`)
      })
    })
    return
  }
  console.warn(`[adapter-linux] skipping "${name}": ${found.reason}`)
  describe.skip(name, () => body(''))
}

/** A binary running in its own process group. */
export interface RealProcess {
  readonly name: string
  readonly pid: number
  readonly logFile: string
  running(): boolean
  /** How it ended: its exit code, or the signal that ended it; undefined while it runs. */
  exit(): { code: number | null; signal: NodeJS.Signals | null } | undefined
  /** Sends `signal` to its process group and resolves once it exited; SIGKILL after `graceMs`. */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<void>
  /** The log's last `lines` lines. */
  tail(lines?: number): string
}

const groups = new Set<number>()
let exitHook = false

/** Kills what a test left running when the test process goes, whatever the way it goes. */
function killLeftOnExit(): void {
  if (exitHook) return
  exitHook = true
  process.on('exit', () => {
    for (const pid of groups) {
      try {
        process.kill(-pid, 'SIGKILL')
      } catch {}
    }
  })
}

/** Starts `file` with `args` in a process group of its own, its output appended to `logFile`. */
export function startProcess(name: string, file: string, args: readonly string[], o: { logFile: string; env?: NodeJS.ProcessEnv }): RealProcess {
  killLeftOnExit()
  const fd = openSync(o.logFile, 'a')
  let child: ChildProcess
  try {
    child = spawn(file, args, { detached: true, stdio: ['ignore', fd, fd], env: o.env ?? process.env })
  } finally {
    closeSync(fd)
  }
  const pid = child.pid
  if (pid === undefined) throw new Error(`${name}: ${file} did not start`)
  groups.add(pid)
  let done = false
  let ended: { code: number | null; signal: NodeJS.Signals | null } | undefined
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      done = true
      ended = { code, signal }
      resolve()
    })
    child.once('error', () => {
      done = true
      resolve()
    })
  })
  const signalGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-pid, signal)
    } catch {}
  }
  const tail = (lines = 40) => (existsSync(o.logFile) ? readFileSync(o.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n') : '')
  return {
    name,
    pid,
    logFile: o.logFile,
    running: () => !done,
    exit: () => ended,
    tail,
    async stop(signal = 'SIGTERM', graceMs = 10_000) {
      if (!done) {
        signalGroup(signal)
        const timer = setTimeout(() => signalGroup('SIGKILL'), graceMs)
        await exited
        clearTimeout(timer)
      }
      // What the leader left in its group (a helper it ran) goes with it.
      signalGroup('SIGKILL')
      groups.delete(pid)
    },
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Resolves once `socket` accepts a connection; fails at once, with its log, if `proc` exited first. */
async function waitForSocket(socket: string, proc: RealProcess, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (!proc.running()) throw new Error(`${proc.name} exited before it listened on ${socket}; its log:\n${proc.tail()}`)
    if (lstatSync(socket, { throwIfNoEntry: false })?.isSocket()) {
      const accepted = await new Promise<boolean>((resolve) => {
        const s = connect(socket)
        s.once('connect', () => {
          s.destroy()
          resolve(true)
        })
        s.once('error', () => resolve(false))
      })
      if (accepted) return
    }
    if (Date.now() > deadline) throw new Error(`${proc.name} did not listen on ${socket} within ${timeoutMs} ms; its log:\n${proc.tail()}`)
    await sleep(50)
  }
}

/** One call a hostpathplugin served: its method and request (JSON, secrets stripped), from its `--v=5` log. */
interface LoggedCall {
  readonly method: string
  readonly request: Record<string, unknown>
}

/**
 * The gRPC calls a hostpathplugin served, in order, from its log: each `GRPC call: /csi.v1.Node/NodePublishVolume`
 * line, paired with the next `GRPC request: {...}` line not yet paired (concurrent calls may interleave).
 */
export function grpcCalls(logFile: string): LoggedCall[] {
  if (!existsSync(logFile)) return []
  const methods: string[] = []
  const calls: LoggedCall[] = []
  for (const line of readFileSync(logFile, 'utf8').split('\n')) {
    const call = /GRPC call: \/csi\.v1\.\w+\/(\w+)/.exec(line)
    if (call) methods.push(call[1] as string)
    const request = /GRPC request: (\{.*\})$/.exec(line)
    const method = request ? methods.shift() : undefined
    if (request && method) calls.push({ method, request: JSON.parse(request[1] as string) as Record<string, unknown> })
  }
  return calls
}

interface HostpathPluginOptions {
  readonly assets: string
  readonly socket: string
  /** Its `--statedir`: volumes as `<dir>/<volume id>` (a directory, or a block image) and `state.json`. */
  readonly stateDir: string
  readonly driverName: string
  readonly nodeId: string
  readonly logFile: string
  /** Directories put before PATH, for the tools it runs (mount, losetup, fallocate). */
  readonly pathPrefix?: string
}

/** hostpathplugin on `socket`, once it listens. */
export async function startHostpathPlugin(o: HostpathPluginOptions): Promise<RealProcess> {
  const env = o.pathPrefix ? { ...process.env, PATH: `${o.pathPrefix}:${process.env.PATH ?? ''}` } : process.env
  const proc = startProcess(
    'hostpathplugin',
    join(o.assets, 'hostpathplugin'),
    [`--endpoint=unix://${o.socket}`, `--nodeid=${o.nodeId}`, `--drivername=${o.driverName}`, `--statedir=${o.stateDir}`, '--v=5'],
    { logFile: o.logFile, env },
  )
  await waitForSocket(o.socket, proc).catch(async (err: unknown) => {
    await proc.stop('SIGKILL')
    throw err
  })
  return proc
}

/** csi-node-driver-registrar for the driver on `driverSocket`, once its `<registrationDir>/<driver>-reg.sock` listens. */
export async function startRegistrar(o: { assets: string; driverSocket: string; driverName: string; registrationDir: string; logFile: string }): Promise<RealProcess> {
  const proc = startProcess(
    'csi-node-driver-registrar',
    join(o.assets, 'csi-node-driver-registrar'),
    [`--csi-address=${o.driverSocket}`, `--kubelet-registration-path=${o.driverSocket}`, `--plugin-registration-path=${o.registrationDir}`, '--v=3'],
    { logFile: o.logFile },
  )
  await waitForSocket(join(o.registrationDir, `${o.driverName}-reg.sock`), proc).catch(async (err: unknown) => {
    await proc.stop('SIGKILL')
    throw err
  })
  return proc
}

/** A volume the driver's controller service created. */
interface CreatedVolume {
  readonly volumeId: string
  readonly capacityBytes: number
  readonly volumeContext: Record<string, string>
}

/** The Controller calls an external-provisioner and external-resizer would make, over the driver's socket. */
export interface ControllerClient {
  createVolume(name: string, bytes: number, access: 'mount' | 'block'): Promise<CreatedVolume>
  expandVolume(volumeId: string, bytes: number, access: 'mount' | 'block'): Promise<{ capacityBytes: number; nodeExpansionRequired: boolean }>
  deleteVolume(volumeId: string): Promise<void>
  close(): void
}

const CONTROLLER_PROTO = fileURLToPath(new URL('./fixtures/csi-controller.proto', import.meta.url))

export function createControllerClient(socket: string): ControllerClient {
  const g = loadGrpc()
  const definition = protoLoader().loadSync(CONTROLLER_PROTO, { includeDirs: [PROTO_DIR], keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true })
  const loaded = g.loadPackageDefinition(definition) as unknown as { csi: { v1: { Controller: grpc.ServiceClientConstructor } } }
  const client = new loaded.csi.v1.Controller(`unix://${socket}`, g.credentials.createInsecure())
  const unary = <T>(method: string, request: object): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const fn = (client as unknown as Record<string, (r: object, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r?: unknown) => void) => void>)[method]
      if (!fn) throw new Error(`no method ${method}`)
      fn.call(client, request, { deadline: Date.now() + 20_000 }, (err, response) => (err ? reject(new Error(`${method}: ${err.message}`, { cause: err })) : resolve(response as T)))
    })
  const capability = (access: 'mount' | 'block') => ({ ...(access === 'block' ? { block: {} } : { mount: {} }), accessMode: { mode: 'SINGLE_NODE_WRITER' } })
  return {
    async createVolume(name, bytes, access) {
      const r = await unary<{ volume: { volumeId: string; capacityBytes: number; volumeContext: Record<string, string> } }>('createVolume', {
        name,
        capacityRange: { requiredBytes: bytes },
        volumeCapabilities: [capability(access)],
      })
      return { volumeId: r.volume.volumeId, capacityBytes: Number(r.volume.capacityBytes), volumeContext: r.volume.volumeContext }
    },
    async expandVolume(volumeId, bytes, access) {
      const r = await unary<{ capacityBytes: number; nodeExpansionRequired: boolean }>('controllerExpandVolume', {
        volumeId,
        capacityRange: { requiredBytes: bytes },
        volumeCapability: capability(access),
      })
      return { capacityBytes: Number(r.capacityBytes), nodeExpansionRequired: r.nodeExpansionRequired }
    },
    async deleteVolume(volumeId) {
      await unary('deleteVolume', { volumeId })
    },
    close: () => client.close(),
  }
}
