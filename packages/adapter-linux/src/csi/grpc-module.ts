/**
 * @grpc/grpc-js and @grpc/proto-loader, loaded at the first CSI call rather than with the package.
 *
 * Why: with protobufjs they are about 14 MiB of a process's RSS (measured by importing the package
 * with and without them, bench/README.md "Memory"), and a node whose volumes need no CSI driver
 * (static mode, emptyDir, hostPath, configMap, secret) never calls them. Both are CommonJS, so the
 * first use loads them synchronously and the callers stay as they were.
 */
import { createRequire } from 'node:module'
import type * as Grpc from '@grpc/grpc-js'
import type * as ProtoLoader from '@grpc/proto-loader'

const require = createRequire(import.meta.url)
let grpcModule: typeof Grpc | undefined
let protoLoaderModule: typeof ProtoLoader | undefined

/** @grpc/grpc-js, loaded on the first call. */
export function grpc(): typeof Grpc {
  grpcModule ??= require('@grpc/grpc-js') as typeof Grpc
  return grpcModule
}

/** @grpc/proto-loader, loaded on the first call. */
export function protoLoader(): typeof ProtoLoader {
  protoLoaderModule ??= require('@grpc/proto-loader') as typeof ProtoLoader
  return protoLoaderModule
}
