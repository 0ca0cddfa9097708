import { describe, expect, it } from 'vitest'
import { failureKind } from '../../errors.js'
import { type GrpcCodeName, GRPC_CODES, classifyCsiError, csiError, isFinalCsiError } from './csi-error.js'

describe('classification of CSI failures (kubelet isFinalError)', () => {
  const uncertain = new Set(['Canceled', 'DeadlineExceeded', 'Unavailable', 'ResourceExhausted', 'Aborted'])
  it.each(Object.keys(GRPC_CODES).filter((c) => c !== 'OK') as GrpcCodeName[])('%s', (code) => {
    const err = csiError(code, 'x')
    expect(isFinalCsiError(err)).toBe(!uncertain.has(code))
    expect(failureKind(classifyCsiError('rpc NodeStageVolume', err))).toBe(uncertain.has(code) ? 'uncertain' : 'final')
  })

  it('a non-gRPC error is not final: the call may have reached the driver', () => {
    expect(isFinalCsiError(new Error('socket closed'))).toBe(false)
    expect(failureKind(classifyCsiError('rpc NodePublishVolume', new Error('socket closed')))).toBe('uncertain')
  })

  it('words the message as Go gRPC does', () => {
    expect(csiError('FailedPrecondition', 'not staged').message).toBe('rpc error: code = FailedPrecondition desc = not staged')
  })
})
