/**
 * The TokenSource port: service account tokens for projected `serviceAccountToken` sources. The
 * agent implements it with the TokenRequest API; tests with an in-memory source.
 */
import type { Pod } from '../api/kubernetes.js'

export interface ServiceAccountToken {
  readonly token: string
  /** Expiry, ms since the epoch. */
  readonly expiresAt: number
  /** Issue time, ms since the epoch (the rotation point is 80% of `expiresAt - issuedAt`). */
  readonly issuedAt: number
}

export interface TokenRequest {
  readonly pod: Pod
  readonly serviceAccountName: string
  readonly audience: string
  /** @default 3600 */
  readonly expirationSeconds: number
}

export interface TokenSource {
  /** A token for the pod's service account. Rejects when none can be issued. */
  getToken(request: TokenRequest): Promise<ServiceAccountToken>
}
