import { posix } from 'node:path'

/** Absolute, with no empty, `.` or `..` component and no trailing slash: what posix.resolve would leave as it is. */
function isNormalAbsolute(path: string): boolean {
  return path.charCodeAt(0) === 47 && !path.includes('//') && !path.includes('/.') && (path.length === 1 || !path.endsWith('/'))
}

/**
 * `posix.resolve(path)`, without its work (and its garbage: it asks for the working directory and
 * builds the path anew) for a path it would leave as it is, which is nearly every path kubevol
 * builds. Every call of the Linux host normalizes its path(s) with this.
 */
export function normalPath(path: string): string {
  return isNormalAbsolute(path) ? path : posix.resolve(path)
}
