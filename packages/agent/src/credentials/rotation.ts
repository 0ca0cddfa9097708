/**
 * When a client certificate is renewed, and how a failed request is retried: the kubelet's numbers
 * (client-go `util/certificate/certificate_manager.go`).
 */

/**
 * The moment to request a new certificate: at 70 to 90% of the current one's lifetime, drawn at
 * random so that nodes that joined together do not all renew together (client-go's
 * `jitteryDuration`: `wait.Jitter(total, 0.2) - 0.3 * total`). `random` is in [0, 1).
 */
export function rotationDeadline(cert: { readonly notBefore: number; readonly notAfter: number }, random: () => number = Math.random): number {
  const total = cert.notAfter - cert.notBefore
  return cert.notBefore + total * (0.7 + 0.2 * random())
}

/**
 * The wait after failed request number `attempt` (0 for the first): 2, 4, 8 and 16 s, each up to 10%
 * longer at random, then 32 s for every later one (client-go: `wait.ExponentialBackoff` of five
 * steps from 2 s, factor 2, jitter 0.1, then `wait.PollInfinite` every 32 s).
 */
export function rotationRetryMs(attempt: number, random: () => number = Math.random): number {
  if (attempt >= 4) return 32_000
  return 2_000 * 2 ** attempt * (1 + 0.1 * random())
}

/**
 * How long the agent waits for one request to be approved and signed before it makes a new one
 * (client-go's `certificateWaitTimeout`).
 */
export const CERTIFICATE_WAIT_MS = 15 * 60_000
