/**
 * @kubevol/core/testing: what tests of kubevol and of its embedders need: a fake clock, in-memory
 * sources, a fake plugin with fault interceptors, builders, a one-call harness, and the Host
 * contract suite every host adapter must pass.
 */
export * from './fake-clock.js'
export { seededRandom } from './seeded-random.js'
// Also in the main entry since they are production code; kept here so tests need one import.
export * from '../populator/memory-sources.js'
export * from './fake-plugin.js'
export * from './builders.js'
export * from './harness.js'
export * from './plugin-context.js'
export * from './csi/index.js'
// The CSI plugin names a volume's staging directory by the SHA-256 of its handle (as the kubelet
// does); tests that look for that directory compute the name with this.
export { sha256Hex } from '../plugins/csi/sha256.js'
