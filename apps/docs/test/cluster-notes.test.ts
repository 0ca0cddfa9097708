/**
 * What a reader of the top README and the getting-started page learns before applying the DaemonSet
 * agrees with the DaemonSet itself: the Node each kubevol pod serves (named from `--node-name`), its
 * label (`--node-labels`), the taint that Node gets, and the section of deploy/README.md with the
 * bundle's rights, which must exist.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const REPO = fileURLToPath(new URL('../../../', import.meta.url))
const read = (path: string) => readFileSync(join(REPO, path), 'utf8')

// The container's args, one `- --flag=value` a line in deploy/daemonset.yaml.
const args = [...read('deploy/daemonset.yaml').matchAll(/^\s*- (--[\w-]+=\S+)$/gm)].map((m) => m[1] as string)
const argOf = (flag: string) => args.find((a) => a.startsWith(`${flag}=`))?.slice(flag.length + 1)

describe.each(['README.md', 'apps/docs/pages/guide/getting-started.md'])('%s on a cluster', (file) => {
  const text = read(file)
  it("names the DaemonSet's own Node per machine, its label and its taint", () => {
    const nodeName = argOf('--node-name')
    expect(nodeName).toMatch(/^\$\(NODE_NAME\)-\w+$/)
    expect(text).toContain(`\`${nodeName?.replace('$(NODE_NAME)', '<machine node>')}\``)
    expect(text).toContain(argOf('--node-labels')?.replace('$(NODE_NAME)', '<machine node>'))
    for (const taint of ['node.kubernetes.io/unreachable', 'node.kubernetes.io/not-ready']) expect(text).toContain(taint)
    expect(text).toMatch(/NotReady/)
  })

  it('says what the bundle may do, pointing at the table in deploy/README.md', () => {
    expect(text).toMatch(/rbac\.yaml/)
    expect(text).toMatch(/bootstrap-rbac\.yaml/)
    expect(read('deploy/README.md')).toMatch(/^### What each identity may do$/m)
    if (file === 'README.md') expect(text).toContain('](deploy/README.md#what-each-identity-may-do)')
  })
})
