/**
 * @kubevol/core/host: helpers for code that implements a Host or works through one. The Host port
 * speaks in POSIX paths and bytes, and the core runs where `node:path` does not (a browser), so
 * these are the path and UTF-8 helpers the core itself uses; `removeUnmounted` is the removal that
 * never crosses into a mount, which a Host's `removeAll` is held to. The Host port's types are in
 * the main entry.
 */
export { basename, dirname, joinPath } from '../paths.js'
export { decodeUtf8, encodeUtf8 } from '../text.js'
export { removeUnmounted, removeUnmountedOneByOne } from '../plugins/util/remove-unmounted.js'
export { fileStepsOneByOne, runFileSteps } from '../plugins/util/file-steps.js'
