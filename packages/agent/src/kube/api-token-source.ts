/**
 * Service account tokens through the TokenRequest API (`serviceaccounts/<name>/token`), bound to the
 * pod that asks, as the kubelet requests them for projected `serviceAccountToken` volumes. The Node
 * authorizer allows a node this only for the pods bound to it.
 */
import { type Clock, type TokenSource, systemClock } from '@kubevol/core'
import { type KubeClients, apiErrorMessage } from './kube-client.js'

/** Creates a {@link TokenSource} over the API. */
export function createApiTokenSource(clients: KubeClients, clock: Clock = systemClock): TokenSource {
  return {
    async getToken({ pod, serviceAccountName, audience, expirationSeconds }) {
      const namespace = pod.metadata.namespace ?? 'default'
      const issuedAt = clock.now()
      try {
        const result = await clients.core.createNamespacedServiceAccountToken({
          name: serviceAccountName,
          namespace,
          body: {
            spec: {
              // No audience: the API server's own (an empty list asks for it).
              audiences: audience ? [audience] : [],
              expirationSeconds,
              boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata.name ?? '', uid: pod.metadata.uid ?? '' },
            },
          },
        })
        const token = result.status?.token
        if (!token) throw new Error('the TokenRequest answer holds no token')
        const expires = result.status?.expirationTimestamp
        const expiresAt = expires ? new Date(expires).getTime() : issuedAt + expirationSeconds * 1000
        return { token, issuedAt, expiresAt }
      } catch (err) {
        throw new Error(`requesting a token for service account ${namespace}/${serviceAccountName}: ${apiErrorMessage(err)}`, { cause: err })
      }
    },
  }
}
