import { release } from 'node:os'
import { describe, expect, it } from 'vitest'
import { type KernelFloor, kernelFloorRefusal, probeKernelFloor } from './kernel-floor.js'

describe('probeKernelFloor', () => {
  it.runIf(process.platform === 'linux')('finds openat2 and the new mount API on this kernel (5.6 or later)', () => {
    const [major = 0, minor = 0] = release().split(/[.-]/).map(Number)
    const modern = major > 5 || (major === 5 && minor >= 6)
    expect(probeKernelFloor()).toEqual({ release: release(), openat2: modern, newMountApi: modern })
  })
})

describe('kernelFloorRefusal', () => {
  it.each<{ name: string; floor: KernelFloor; expected: RegExp | undefined }>([
    { name: 'nothing missing', floor: { release: '6.1.0', openat2: true, newMountApi: true }, expected: undefined },
    { name: 'openat2 missing (5.4)', floor: { release: '5.4.0-150-generic', openat2: false, newMountApi: true }, expected: /^the kernel \(Linux 5\.4\.0-150-generic\) is too old for the Linux host: it lacks openat2 \(Linux 5\.6\);/ },
    {
      name: 'both missing (4.19)',
      floor: { release: '4.19.0', openat2: false, newMountApi: false },
      expected: /it lacks openat2 \(Linux 5\.6\) and the new mount API: open_tree, move_mount, fsopen \(Linux 5\.2\);/,
    },
  ])('$name', ({ floor, expected }) => {
    const refusal = kernelFloorRefusal(floor)
    if (expected === undefined) expect(refusal).toBeUndefined()
    else {
      expect(refusal).toMatch(expected)
      expect(refusal).not.toContain('\n')
    }
  })
})
