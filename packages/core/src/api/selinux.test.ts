import { describe, expect, it } from 'vitest'
import { fileLabelOf, volumeSELinuxLabel } from './selinux.js'

const label = 'system_u:object_r:container_file_t:s0:c1,c2'
const complete = { user: 'system_u', role: 'object_r', type: 'container_t', level: 's0:c1,c2' }
const base = { enabled: true, pluginSupports: true, accessModes: ['ReadWriteOncePod'], changePolicy: undefined, volumeName: 'v' }

describe('SELinux labels (SPEC §3.2.1, SELinuxMountReadWriteOncePod)', () => {
  it('maps the process options to the container file label', () => {
    expect(fileLabelOf(complete)).toBe(label)
    expect(fileLabelOf({ level: 's0:c1,c2' })).toBe(label)
    expect(fileLabelOf({})).toBe('')
  })

  it.each([
    { name: 'RWOP, complete options', input: { containerOptions: [complete] }, expected: label },
    { name: 'RWOP, level only', input: { containerOptions: [{ level: 's0:c1,c2' }] }, expected: label },
    { name: 'RWOP, no options', input: { containerOptions: [{}] }, expected: '' },
    { name: 'plugin without context mounts', input: { containerOptions: [complete], pluginSupports: false }, expected: '' },
    { name: 'RWX', input: { containerOptions: [complete], accessModes: ['ReadWriteMany'] }, expected: '' },
    { name: 'policy Recursive', input: { containerOptions: [complete], changePolicy: 'Recursive' }, expected: '' },
    { name: 'policy MountOption', input: { containerOptions: [complete], changePolicy: 'MountOption' }, expected: label },
    { name: 'SELinux disabled on the host', input: { containerOptions: [complete], enabled: false }, expected: '' },
  ])('$name', ({ input, expected }) => {
    expect(volumeSELinuxLabel({ ...base, ...input })).toBe(expected)
  })

  it('refuses two labels in one pod', () => {
    expect(() => volumeSELinuxLabel({ ...base, containerOptions: [complete, { level: 's0:c98,c99' }] })).toThrow(
      'volume v is used with two different SELinux contexts in the same pod',
    )
  })
})
