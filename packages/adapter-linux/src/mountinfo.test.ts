import { describe, expect, it } from 'vitest'
import {
  containingMount,
  deviceNumber,
  MountInfoParseError,
  mountReferencesIn,
  mountsOfDevice,
  parseMountInfo,
  parseMountInfoLine,
  splitMountOptions,
  unescapeMountField,
} from './mountinfo.js'

const ROOT = '27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard'

describe('parseMountInfoLine', () => {
  it('reads every field of a plain line', () => {
    const entry = parseMountInfoLine('36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue')
    expect(entry.optionalFields).toEqual(['master:1'])
    // JSON (what status output and logs write) carries every field, the lazily split ones included.
    expect(JSON.parse(JSON.stringify(entry))).toEqual({
      id: 36,
      parentId: 35,
      device: '98:0',
      root: '/mnt1',
      target: '/mnt2',
      options: ['rw', 'noatime'],
      optionalFields: ['master:1'],
      propagation: 'slave',
      fstype: 'ext3',
      source: '/dev/root',
      superOptions: ['rw', 'errors=continue'],
    })
  })

  it('shares the option lists a table repeats, and never lets one entry change another', () => {
    const [a, b] = parseMountInfo('40 27 0:39 / /a rw,relatime shared:1 - tmpfs tmpfs rw,inode64\n41 27 0:40 / /b rw,relatime shared:2 - tmpfs tmpfs rw,inode64\n')
    expect(a?.options).toBe(b?.options)
    expect(a?.superOptions).toBe(b?.superOptions)
    expect(Object.isFrozen(a?.options)).toBe(true)
    expect([a?.optionalFields, b?.optionalFields]).toEqual([['shared:1'], ['shared:2']])
  })

  it.each([
    { case: 'no optional field', fields: '', propagation: 'private' },
    { case: 'shared', fields: 'shared:12 ', propagation: 'shared' },
    { case: 'slave', fields: 'master:3 ', propagation: 'slave' },
    { case: 'shared and slave', fields: 'shared:7 master:3 ', propagation: 'shared' },
    { case: 'slave with propagate_from', fields: 'master:3 propagate_from:2 ', propagation: 'slave' },
    { case: 'unbindable', fields: 'unbindable ', propagation: 'unbindable' },
  ] as const)('propagation from optional fields: $case → $propagation', ({ fields, propagation }) => {
    const entry = parseMountInfoLine(`40 27 0:39 / /m rw,relatime ${fields}- tmpfs tmpfs rw`)
    expect(entry.propagation).toBe(propagation)
    expect(entry.optionalFields).toEqual(fields.trim() === '' ? [] : fields.trim().split(' '))
    expect(entry.fstype).toBe('tmpfs')
  })

  it.each([
    { case: 'space', raw: '/var/lib/a\\040b', path: '/var/lib/a b' },
    { case: 'tab', raw: '/x\\011y', path: '/x\ty' },
    { case: 'newline', raw: '/x\\012y', path: '/x\ny' },
    { case: 'backslash', raw: '/x\\134y', path: '/x\\y' },
    { case: 'several', raw: '/pods/\\040two\\040spaces\\134', path: '/pods/ two spaces\\' },
  ])('unescapes the kernel octal escape for a $case in root, target and source', ({ raw, path }) => {
    const entry = parseMountInfoLine(`50 27 254:0 ${raw} ${raw} rw - ext4 ${raw} rw`)
    expect(entry.root).toBe(path)
    expect(entry.target).toBe(path)
    expect(entry.source).toBe(path)
  })

  it('strips the " (deleted)" suffix the kernel adds to an unlinked mount point', () => {
    expect(parseMountInfoLine('51 27 0:40 / /tmp/gone\\040(deleted) rw - tmpfs tmpfs rw').target).toBe('/tmp/gone')
  })

  it('keeps commas inside double quotes together (SELinux contexts)', () => {
    const entry = parseMountInfoLine('52 27 0:41 / /m rw - tmpfs tmpfs rw,context="system_u:object_r:container_file_t:s0:c1,c2",size=1024k')
    expect(entry.superOptions).toEqual(['rw', 'context="system_u:object_r:container_file_t:s0:c1,c2"', 'size=1024k'])
  })

  it.each([
    { case: 'too few fields', line: '36 35 98:0 /mnt1 /mnt2 rw - ext3', error: /expected at least 10, got 8/ },
    { case: 'no separator', line: '36 35 98:0 /mnt1 /mnt2 rw shared:1 ext3 /dev/root rw', error: /after the separator/ },
    { case: 'bad major:minor', line: '36 35 98 /mnt1 /mnt2 rw - ext3 /dev/root rw', error: /bad major:minor "98"/ },
    { case: 'bad id', line: 'x 35 98:0 /mnt1 /mnt2 rw - ext3 /dev/root rw', error: /bad mount id/ },
  ])('rejects a line with $case', ({ line, error }) => {
    expect(() => parseMountInfoLine(line)).toThrow(MountInfoParseError)
    expect(() => parseMountInfoLine(line)).toThrow(error)
  })
})

describe('parseMountInfo', () => {
  it('keeps the kernel order and skips blank lines', () => {
    const entries = parseMountInfo(`${ROOT}\n\n40 27 0:39 / /a rw - tmpfs tmpfs rw\n41 40 0:40 / /a/b rw - tmpfs tmpfs rw\n`)
    expect(entries.map((e) => e.target)).toEqual(['/', '/a', '/a/b'])
    expect(entries[2]?.parentId).toBe(entries[1]?.id)
  })
})

describe('helpers', () => {
  it('splitMountOptions drops empty items', () => {
    expect(splitMountOptions('rw,,size=1m,')).toEqual(['rw', 'size=1m'])
  })

  it('unescapeMountField leaves a field without escapes alone', () => {
    expect(unescapeMountField('/plain')).toBe('/plain')
  })

  it.each([
    { dev: 0x0700, expected: '7:0' },
    { dev: 0x0703, expected: '7:3' },
    { dev: 0xfe00, expected: '254:0' },
    // minor ≥ 256 and major ≥ 4096 use the high bits (glibc makedev)
    { dev: 0x100700, expected: '7:256' },
    { dev: 2 ** 44, expected: '4096:0' },
  ])('deviceNumber($dev) = $expected', ({ dev, expected }) => {
    expect(deviceNumber(dev)).toBe(expected)
  })

  it('containingMount picks the deepest target, the latest of equal ones, and never a sibling prefix', () => {
    const entries = parseMountInfo(
      [ROOT, '40 27 0:39 / /var/lib rw - tmpfs a rw', '41 40 0:40 / /var/lib/kubevol rw - tmpfs b rw', '42 40 0:41 / /var/lib/kubevol rw - tmpfs c rw'].join('\n'),
    )
    expect(containingMount(entries, '/var/lib/kubevol/pods')?.source).toBe('c')
    expect(containingMount(entries, '/var/lib/kubevolume')?.source).toBe('a')
    expect(containingMount(entries, '/etc')?.target).toBe('/')
  })

  it('mountsOfDevice finds every mount of one filesystem', () => {
    const entries = parseMountInfo([ROOT, '40 27 7:3 / /mnt/disk rw - ext4 /dev/loop3 rw', '41 27 7:3 /sub /mnt/bind rw - ext4 /dev/loop3 rw'].join('\n'))
    expect(mountsOfDevice(entries, '7:3').map((e) => e.target)).toEqual(['/mnt/disk', '/mnt/bind'])
    expect(mountsOfDevice(entries, '7:4')).toEqual([])
  })

  it('mountReferencesIn: the root field joined with the rest of the path, same device, the holding mount by mount order', () => {
    const entries = parseMountInfo(
      [
        ROOT,
        '40 27 7:3 / /mnt/disk rw - ext4 /dev/loop3 rw',
        '41 27 7:3 /data/pv1 /pods/a rw - ext4 /dev/loop3 rw',
        '42 27 254:0 /srv/local /pods/b rw - ext4 /dev/vda rw',
        '43 27 7:3 /data /mnt/data rw - ext4 /dev/loop3 rw',
        // Mounted over /srv after /srv/x was: /srv/x now shows this tmpfs, not the mount below.
        '44 27 0:50 / /srv/x rw - tmpfs t rw',
        '45 27 0:51 / /srv rw - tmpfs u rw',
      ].join('\n'),
    )
    expect(mountReferencesIn(entries, '/mnt/disk/data/pv1')).toEqual(['/pods/a'])
    expect(mountReferencesIn(entries, '/mnt/data/pv1')).toEqual(['/pods/a'])
    expect(mountReferencesIn(entries, '/mnt/disk/data')).toEqual(['/mnt/data'])
    expect(mountReferencesIn(entries, '/mnt/disk')).toEqual([])
    expect(mountReferencesIn(entries, '/pods/a')).toEqual([])
    expect(mountReferencesIn(entries, '/srv/local')).toEqual([])
    expect(mountReferencesIn(parseMountInfo([ROOT, '42 27 254:0 /srv/local /pods/b rw - ext4 /dev/vda rw'].join('\n')), '/srv/local')).toEqual(['/pods/b'])
    expect(mountReferencesIn(entries, '/srv/x')).toEqual([])
    expect(() => mountReferencesIn([], '/a')).toThrow('failed to get root path and major:minor for /a')
  })
})
