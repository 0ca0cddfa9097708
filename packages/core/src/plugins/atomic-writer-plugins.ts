/**
 * The AtomicWriter volumes of issue 3: configMap, secret, downwardAPI and projected, the writer they
 * share, and the pure pieces (payloads, downward API values, token rotation) embedders may reuse.
 */
export * from './payload.js'
export * from './atomic-writer.js'
export * from './atomic-writer-volume.js'
export * from './config-map.js'
export * from './secret.js'
export * from './downward-api.js'
export * from './downward-api-fields.js'
export * from './projected.js'
export * from './service-account-tokens.js'
