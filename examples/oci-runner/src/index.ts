/**
 * Runs a pod's containers with an OCI runtime on the volumes kubevol mounted: the runtime's half
 * of what a kubelet does with a volume manager (see the how-to "Give your runtime its mounts").
 */
export { type BundleOptions, runtimeSpec, writeBundle } from './bundle.js'
export { type ContainerExit, type RunningContainer, type RuntimeOptions, startContainer } from './container.js'
export { busyboxRootfs } from './rootfs.js'
export { type RunPodOptions, runPod } from './run-pod.js'
export { type NodeOptions, runManifest } from './node.js'
