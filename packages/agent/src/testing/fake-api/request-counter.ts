/**
 * How many requests the fake API server served, by verb, resource and user: what a test or a
 * benchmark reads to say how much load a client makes (a list of every request would grow without
 * bound under a fleet of clients; these are counters).
 */

/** One counter: requests of one verb on one resource by one user. */
export interface RequestCount {
  /** The API verb: get, list, watch, create, update, patch, delete. */
  readonly verb: string
  /** The plural, with the subresource when there is one: `configmaps`, `nodes/status`. */
  readonly resource: string
  /** The authenticated user: `system:node:n1`, `kubernetes-admin`. */
  readonly user: string
  readonly count: number
}

/** Which counters to add up; an absent field matches every value, a function tests the value. */
export interface RequestFilter {
  readonly verb?: string
  readonly resource?: string
  readonly user?: string | ((user: string) => boolean)
}

const SEP = '\u0000'

/** Counts requests by verb, resource and user. */
export class RequestCounter {
  readonly #counts = new Map<string, number>()

  /** Counts one request. */
  add(verb: string, resource: string, user: string): void {
    const key = `${verb}${SEP}${resource}${SEP}${user}`
    this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1)
  }

  /** Every counter, sorted by user, resource and verb. */
  counts(): RequestCount[] {
    return [...this.#counts.entries()]
      .map(([key, count]) => {
        const [verb = '', resource = '', user = ''] = key.split(SEP)
        return { verb, resource, user, count }
      })
      .sort((a, b) => a.user.localeCompare(b.user) || a.resource.localeCompare(b.resource) || a.verb.localeCompare(b.verb))
  }

  /** The sum of the counters that match `filter` (all of them without one). */
  total(filter: RequestFilter = {}): number {
    let sum = 0
    for (const c of this.counts()) {
      if (filter.verb !== undefined && c.verb !== filter.verb) continue
      if (filter.resource !== undefined && c.resource !== filter.resource) continue
      if (typeof filter.user === 'string' && c.user !== filter.user) continue
      if (typeof filter.user === 'function' && !filter.user(c.user)) continue
      sum += c.count
    }
    return sum
  }

  /** Sets every counter back to zero. */
  reset(): void {
    this.#counts.clear()
  }
}
