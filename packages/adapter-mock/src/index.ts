/**
 * @kubevol/adapter-mock: an in-memory Host for @kubevol/core that behaves like the Linux kernel where
 * it matters, with fault injection and invariant checks. Pure TypeScript; runs in a browser.
 *
 * The front door: every public name is listed here.
 */
export type { CallMatch, Disposer, Faults, HangHandle, HostCall, InjectedError, Interceptor } from './faults.js'
export { matchesCall } from './faults.js'
export type { Violation, ViolationKind } from './host-state.js'
export type { TreeMount, TreeNode } from './inspect.js'
export type { MemoryHostCapabilities, MemoryHostOptions } from './memory-host.js'
export { createMemoryHost, MemoryHost } from './memory-host.js'
export type { SpecialNodeType } from './nodes.js'
