/**
 * A dependent sequence of file steps (a directory, its mode, a marker beside it) as one Host call
 * where the host has `fileSteps`, else as the separate calls: the same calls either way.
 */
import type { FileStep, Host } from '../../host/host.js'

/**
 * Makes `steps` in order (see {@link Host.fileSteps}): one call where the host has `fileSteps`.
 * Resolves with the index of the `lstat` step with `stopIfFound` that found something, else
 * `steps.length`; the first failure ends it with that step's error.
 */
export function runFileSteps(host: Host, steps: readonly FileStep[]): Promise<number> {
  return host.fileSteps ? host.fileSteps(steps) : fileStepsOneByOne(host, steps)
}

/** {@link runFileSteps} as one Host call per step (two for a `setPermissions` that changes the mode). */
export async function fileStepsOneByOne(host: Pick<Host, 'lstat' | 'stat' | 'mkdir' | 'chmod' | 'writeFile' | 'isMountPoint' | 'mount'>, steps: readonly FileStep[]): Promise<number> {
  for (let i = 0; i < steps.length; i++) {
    const step = steps[i] as FileStep
    switch (step.op) {
      case 'lstat':
        if ((await host.lstat(step.path)) && step.stopIfFound) return i
        break
      case 'mkdir':
        await host.mkdir(step.path, { recursive: step.recursive, mode: step.mode })
        break
      case 'setPermissions': {
        const info = await host.stat(step.path)
        if (info && (info.mode & 0o777) !== step.permissions) await host.chmod(step.path, (info.mode & ~0o777) | step.permissions)
        break
      }
      case 'writeFile':
        await host.writeFile(step.path, step.data, step.mode === undefined ? undefined : { mode: step.mode })
        break
      case 'mountUnlessMountPoint':
        if (!(await host.isMountPoint(step.path))) await host.mount({ ...step.mount, target: step.path })
        break
    }
  }
  return steps.length
}
