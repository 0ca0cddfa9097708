/**
 * Service account tokens of projected volumes, cached and rotated as the kubelet's token manager
 * (`pkg/kubelet/token/token_manager.go`): a token is used until 80% of its lifetime has passed (or
 * 24 h, whichever is first), then a new one is requested.
 */
import type { Clock } from '../clock.js'
import { errorMessage } from '../errors.js'
import { type Logger, silentLogger } from '../observability.js'
import type { ServiceAccountToken, TokenRequest, TokenSource } from './token-source.js'

/** The share of a token's lifetime after which it is rotated. */
const TOKEN_ROTATION_FRACTION = 0.8
/** A token is rotated after this long at the latest, however long it would live (kubelet `maxTTL`). */
export const MAX_TOKEN_TTL_MS = 24 * 60 * 60 * 1000
/** `expirationSeconds` when a projection does not say. */
export const DEFAULT_TOKEN_EXPIRATION_SECONDS = 3600

/**
 * When `token` is due for rotation, ms since the epoch: issuedAt + 80% of (expiresAt − issuedAt),
 * but no later than issuedAt + 24 h. The kubelet adds up to 10 s of random jitter; kubevol does not.
 */
export function tokenRotationTime(token: ServiceAccountToken): number {
  const lifetime = token.expiresAt - token.issuedAt
  return token.issuedAt + Math.min(lifetime * TOKEN_ROTATION_FRACTION, MAX_TOKEN_TTL_MS)
}

/** A token request for one file of one volume. */
export interface CachedTokenRequest extends TokenRequest {
  /** The file the token goes to: two projections of one pod and audience at different paths get their own tokens. */
  readonly path: string
}

interface Entry {
  readonly podUID: string
  readonly token: ServiceAccountToken
}

/**
 * Tokens per (pod UID, service account, audience, expiration, path). Not shared between plugins.
 */
export class ServiceAccountTokenCache {
  readonly #source: TokenSource
  readonly #clock: Pick<Clock, 'now'>
  readonly #logger: Logger
  readonly #entries = new Map<string, Entry>()

  constructor(options: { readonly source: TokenSource; readonly clock: Pick<Clock, 'now'>; readonly logger?: Logger }) {
    this.#source = options.source
    this.#clock = options.clock
    this.#logger = options.logger ?? silentLogger
  }

  /**
   * The cached token while it is not due for rotation, else a new one from the source. When the
   * source fails and the cached token has not expired yet, the cached one is returned (and the
   * failure logged), as the kubelet does; otherwise the source's error is thrown.
   */
  async get(request: CachedTokenRequest): Promise<ServiceAccountToken> {
    const now = this.#clock.now()
    this.#dropExpired(now)
    const key = keyOf(request)
    const cached = this.#entries.get(key)
    if (cached && now < tokenRotationTime(cached.token)) return cached.token
    const { path: _path, ...tokenRequest } = request
    try {
      const token = await this.#source.getToken(tokenRequest)
      this.#entries.set(key, { podUID: request.pod.metadata.uid ?? '', token })
      return token
    } catch (err) {
      if (!cached || now >= cached.token.expiresAt) throw err
      this.#logger.warn('Could not rotate a service account token; using the cached one until it expires', {
        serviceAccount: request.serviceAccountName,
        audience: request.audience,
        expiresAt: cached.token.expiresAt,
        err: errorMessage(err),
      })
      return cached.token
    }
  }

  /** The earliest rotation time of the cached tokens (of one pod, when given); undefined when none is cached. */
  nextRotation(podUID?: string): number | undefined {
    let next: number | undefined
    for (const entry of this.#entries.values()) {
      if (podUID !== undefined && entry.podUID !== podUID) continue
      const at = tokenRotationTime(entry.token)
      if (next === undefined || at < next) next = at
    }
    return next
  }

  /** Forgets the tokens of a pod whose volumes are gone (kubelet `DeleteServiceAccountToken`). */
  forgetPod(podUID: string): void {
    for (const [key, entry] of this.#entries) if (entry.podUID === podUID) this.#entries.delete(key)
  }

  #dropExpired(now: number): void {
    for (const [key, entry] of this.#entries) if (now >= entry.token.expiresAt) this.#entries.delete(key)
  }
}

function keyOf(request: CachedTokenRequest): string {
  return JSON.stringify([request.pod.metadata.uid ?? '', request.serviceAccountName, request.audience, request.expirationSeconds, request.path])
}
