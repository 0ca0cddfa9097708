import { describe, expect, it } from 'vitest'
import { requestOutcome } from './csr-request.js'

const csr = (conditions: { type: string; reason?: string; message?: string }[], certificate?: string, uid = 'u1') => ({
  metadata: { name: 'csr-abcde', uid },
  spec: { request: '', signerName: 'kubernetes.io/kube-apiserver-client-kubelet' },
  status: { conditions: conditions.map((c) => ({ status: 'True', ...c })), ...(certificate ? { certificate: Buffer.from(certificate).toString('base64') } : {}) },
})

describe('requestOutcome', () => {
  it.each([
    ['pending', csr([]), undefined],
    ['approved, not yet signed', csr([{ type: 'Approved' }]), undefined],
    ['signed without approval (never trusted)', csr([], 'PEM'), undefined],
    ['approved and signed', csr([{ type: 'Approved' }], 'PEM'), { certificate: 'PEM' }],
    ['denied', csr([{ type: 'Denied', reason: 'NotOurs', message: 'no' }]), { error: 'certificate signing request csr-abcde is denied, reason: NotOurs, message: no' }],
    ['failed by the signer', csr([{ type: 'Approved' }, { type: 'Failed', reason: 'SignerValidationFailure', message: 'bad' }]), { error: 'certificate signing request csr-abcde failed, reason: SignerValidationFailure, message: bad' }],
    ['replaced by another of the same name', csr([{ type: 'Approved' }], 'PEM', 'u2'), { error: 'certificate signing request csr-abcde changed UIDs' }],
  ])('%s', (_name, object, outcome) => {
    expect(requestOutcome(object, 'u1')).toEqual(outcome)
  })
})
