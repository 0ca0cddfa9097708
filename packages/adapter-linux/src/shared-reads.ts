/**
 * Reads of one path asked for while an identical read is still queued for the I/O worker share
 * that read's call.
 *
 * Why: before it removes anything, a tear-down checks each directory from the pods directory down
 * to its volume (core's pod-dir-chain: seven lstats), and the volumes torn down together have most
 * of those directories in common. Tearing down 1,000 tmpfs and 1,000 hostPath volumes at once asked
 * for 14,000 lstats of about 1,600 paths, and each call held its promises, closures and deadline
 * timer until answered: about 35 MiB of the heap at the process's peak (bench/README.md, "Memory").
 *
 * A read joins only one that no dispatch of the I/O workers has taken from their queue since it
 * was asked (`dispatches` has not moved), so the system call is made after every caller asked: the
 * answer is as fresh as a call of its own would have been. A failure is shared as the answer is.
 */
export class SharedReads<T> {
  readonly #dispatches: () => number
  readonly #queued = new Map<string, { readonly dispatches: number; readonly answer: Promise<T> }>()

  /**
   * `dispatches`: a count that moves whenever a queued read may no longer answer for a new one: the
   * I/O workers taking calls from their queue (and, for the Linux host, any other call asked of it).
   */
  constructor(dispatches: () => number) {
    this.#dispatches = dispatches
  }

  /** The answer of the queued read of `key`, or of `read()`, started now. */
  read(key: string, read: () => Promise<T>): Promise<T> {
    const dispatches = this.#dispatches()
    const queued = this.#queued.get(key)
    if (queued && queued.dispatches === dispatches) return queued.answer
    const answer = read()
    this.#queued.set(key, { dispatches, answer })
    const forget = (): void => {
      if (this.#queued.get(key)?.answer === answer) this.#queued.delete(key)
    }
    answer.then(forget, forget)
    return answer
  }
}
