/**
 * The two kubeconfigs of TLS bootstrapping, as the kubelet handles them (`pkg/kubelet/certificate/
 * bootstrap`): the bootstrap kubeconfig (a bootstrap token, or a ServiceAccount's token, that may
 * only request certificates), read again for every request; and the node's kubeconfig, which names
 * the node's own certificate: used as it is while it holds an unexpired client certificate, else
 * written anew from the bootstrap kubeconfig's cluster, pointing at the cert directory's current pair.
 */
import { readFileSync } from 'node:fs'
import { dirname, isAbsolute, join } from 'node:path'
import { type Cluster, KubeConfig } from '@kubernetes/client-node'
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml'
import { type ClientPair, parseClientPair } from './client-pair.js'

/**
 * Loads the bootstrap kubeconfig. Its user's `tokenFile` (kubectl's key, which client-node does not
 * read) is read here, relative to the file, so a ServiceAccount's projected token works; paths are
 * made absolute as kubectl makes them. Throws with the file's name when it cannot be used.
 */
export function loadBootstrapKubeConfig(path: string): KubeConfig {
  const text = readFileSync(path, 'utf8')
  const doc = (parseYaml(text) ?? {}) as { users?: { user?: Record<string, unknown> }[] }
  for (const entry of doc.users ?? []) {
    const user = entry?.user
    if (user && typeof user.tokenFile === 'string' && user.token === undefined && user['token-file'] === undefined) {
      user.token = readFileSync(isAbsolute(user.tokenFile) ? user.tokenFile : join(dirname(path), user.tokenFile), 'utf8').trim()
    }
  }
  const kc = new KubeConfig()
  kc.loadFromString(stringifyYaml(doc))
  kc.makePathsAbsolute(dirname(path))
  if (!kc.getCurrentCluster()) throw new Error(`the bootstrap kubeconfig ${path} names no current cluster`)
  return kc
}

/** The cluster a kubeconfig written from `kc` keeps: the server, how it is trusted, the TLS name. */
function clusterStanza(cluster: Cluster): Record<string, unknown> {
  // A CA file is named as it was; otherwise its data is copied (the kubelet does the same).
  const ca = cluster.caFile ? { 'certificate-authority': cluster.caFile } : cluster.caData ? { 'certificate-authority-data': cluster.caData } : {}
  return {
    server: cluster.server,
    ...ca,
    ...(cluster.skipTLSVerify ? { 'insecure-skip-tls-verify': true } : {}),
    ...(cluster.tlsServerName ? { 'tls-server-name': cluster.tlsServerName } : {}),
  }
}

/**
 * The node's kubeconfig as the kubelet writes it after bootstrapping: cluster `default-cluster` from
 * the bootstrap kubeconfig, user `default-auth` whose certificate and key are both `pemPath` (the
 * store's current pair), context `default-context` (namespace `default`), made current.
 */
export function nodeKubeconfigYaml(cluster: Cluster, pemPath: string): string {
  return stringifyYaml({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'default-cluster', cluster: clusterStanza(cluster) }],
    users: [{ name: 'default-auth', user: { 'client-certificate': pemPath, 'client-key': pemPath } }],
    contexts: [{ name: 'default-context', context: { cluster: 'default-cluster', user: 'default-auth', namespace: 'default' } }],
    'current-context': 'default-context',
  })
}

/** What the node's kubeconfig gives: a usable identity, or why it is not one. */
export type NodeKubeconfig =
  | { readonly state: 'valid'; readonly cluster: Cluster; readonly pair: ClientPair }
  | { readonly state: 'missing' }
  | { readonly state: 'invalid'; readonly reason: string }

/**
 * Reads the node's kubeconfig and its current user's client certificate and key (inline, or files
 * relative to it). Valid when both parse, match, and the certificate has not expired at `now` (the
 * kubelet's `isClientConfigStillValid`); a file that cannot be used is `invalid` with the reason,
 * never an exception.
 */
export function readNodeKubeconfig(path: string, now: number): NodeKubeconfig {
  let kc: KubeConfig
  try {
    kc = new KubeConfig()
    kc.loadFromFile(path)
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return { state: 'missing' }
    return { state: 'invalid', reason: `${path} cannot be read: ${err instanceof Error ? err.message : String(err)}` }
  }
  const cluster = kc.getCurrentCluster()
  const user = kc.getCurrentUser()
  if (!cluster || !user) return { state: 'invalid', reason: `${path} names no current cluster and user` }
  try {
    const cert = user.certFile ? readFileSync(user.certFile, 'utf8') : user.certData ? Buffer.from(user.certData, 'base64').toString('utf8') : undefined
    const key = user.keyFile ? readFileSync(user.keyFile, 'utf8') : user.keyData ? Buffer.from(user.keyData, 'base64').toString('utf8') : undefined
    if (cert === undefined || key === undefined) return { state: 'invalid', reason: `${path} holds no client certificate and key` }
    const pair = parseClientPair(cert, key)
    if (now >= pair.notAfter) return { state: 'invalid', reason: `the client certificate of ${path} expired at ${new Date(pair.notAfter).toISOString()}` }
    return { state: 'valid', cluster, pair }
  } catch (err) {
    return { state: 'invalid', reason: `the client certificate of ${path} cannot be used: ${err instanceof Error ? err.message : String(err)}` }
  }
}
