import { describe, expect, it } from 'vitest'
import { cli } from '../../test/helpers.js'
import { simulate } from './simulate.js'

const counts = (r: Awaited<ReturnType<typeof simulate>>) => ({ faults: r.faultsInjected, operations: r.operations, converged: r.converged })

describe('kubevol simulate', () => {
  it('converges without faults, one mount per volume', async () => {
    const r = await simulate({ pods: 20, volumesPerPod: 4, faultRate: 0, seed: 1, timeoutMs: 30_000 })
    expect(r).toMatchObject({ converged: true, podsMounted: 20, volumes: 80, faultsInjected: 0 })
    expect(r.operations.volume_mount).toEqual({ ok: 80 })
  })

  it('injects the same faults for the same seed, and converges anyway', async () => {
    const options = { pods: 20, volumesPerPod: 4, faultRate: 0.2, seed: 42, timeoutMs: 30_000 }
    const first = await simulate(options)
    const second = await simulate(options)
    expect(first.faultsInjected).toBeGreaterThan(0)
    expect(counts(second)).toEqual(counts(first))
    expect(first.operations.volume_mount?.ok).toBe(80)
    const other = await simulate({ ...options, seed: 43 })
    expect(other.converged).toBe(true)
  })

  it('prints the report and a progress bar when asked', async () => {
    const r = await cli(['simulate', '--pods', '10', '--volumes-per-pod', '2', '--fault-rate', '0.1', '--seed', '5', '--progress'])
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/^10 pods, 20 volumes: converged in \d+\.\ds$/m)
    expect(r.stdout).toMatch(/^desired to mounted: p50 \d+ ms, p99 \d+ ms/m)
    expect(r.stdout).toMatch(/^volume_mount\s+20\s+\d+$/m)
    expect(r.stderr).toContain('10/10 pods mounted')
    const bad = await cli(['simulate', '--fault-rate', '2'])
    expect(bad.code).toBe(2)
  })
})
