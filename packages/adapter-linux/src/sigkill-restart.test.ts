/**
 * Crash-safe restart on the real kernel: a manager process is killed with SIGKILL at random moments
 * of a mount/unmount storm, again and again; after each kill a new process must bring the machine
 * to exactly the wanted state (checked against the kernel's mount table and loop devices) with the
 * data written before the kill intact.
 */
import { execFileSync, spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { buildPod } from '@kubevol/core/testing'
import { expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'
import { parseMountInfo } from './mountinfo.js'

const agent = fileURLToPath(new URL('../test/fixtures/storm-agent.mjs', import.meta.url))
const ROUNDS = Number(process.env.KUBEVOL_SIGKILL_ROUNDS ?? 20)

function run(args: string[], until: string, killAfterMs?: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [agent, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => {
      out += d
      if (killAfterMs !== undefined && out.includes(until)) setTimeout(() => child.kill('SIGKILL'), killAfterMs)
    })
    child.stderr.on('data', (d) => {
      err += d
    })
    child.on('exit', (code, signal) => {
      if (signal === 'SIGKILL' || out.includes(until)) resolve(out)
      else reject(new Error(`agent exited ${code}: ${err}`))
    })
  })
}

const mountsUnder = (root: string) =>
  parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'))
    .map((e) => e.target)
    .filter((t) => t.startsWith(`${root}/`))

describeAsRoot('SIGKILL during a mount/unmount storm, then restart', () => {
  const h = useLinuxHost()

  it(`converges to exactly the wanted volumes after ${ROUNDS} kills, with data intact`, async () => {
    const { host, p } = h()
    const root = p('kubevol')
    await host.mkdir(p('images'), { recursive: true })
    await host.mkdir(p('shared'), { recursive: true })
    const disks = [0, 1].map((i) => ({ claim: `disk${i}`, image: p(`images/disk${i}.img`) }))
    for (const d of disks) {
      await host.writeFile(d.image, '')
      await host.truncate(d.image, 32 << 20)
    }
    const pods = [0, 1, 2, 3].map((i) =>
      buildPod({
        uid: `pod${i}`,
        name: `pod${i}`,
        volumes: [
          { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '4Mi' } },
          { name: 'host', hostPath: { path: p('shared'), type: 'Directory' } },
          { name: 'cfg', configMap: { name: 'cfg' } },
          ...(i < 2 ? [{ name: 'data', persistentVolumeClaim: { claimName: `disk${i}` } }] : []),
        ],
      }),
    )
    const stateFile = p('state.json')
    // The proof last written to each disk: it must be there in the next round that mounts the disk.
    const lastWritten: (number | undefined)[] = [undefined, undefined]
    let seed = 7
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed / 2 ** 31
    }
    for (let round = 0; round < ROUNDS; round++) {
      const wanted = pods.filter(() => random() < 0.5).map((pod) => pod.metadata.uid as string)
      writeFileSync(stateFile, JSON.stringify({ pods, disks, wanted: pods.map((pod) => pod.metadata.uid) }))
      await run([root, stateFile], 'STARTED', Math.floor(random() * 400))
      writeFileSync(stateFile, JSON.stringify({ pods, disks, wanted }))
      await run([root, stateFile, '--settle'], 'CONVERGED')

      const mounts = mountsUnder(root)
      for (const uid of wanted) {
        expect(mounts, `round ${round}, wanted ${wanted.join(',')}`).toContain(`${root}/pods/${uid}/volumes/kubernetes.io~empty-dir/shm`)
      }
      for (const pod of pods) {
        const uid = pod.metadata.uid as string
        if (!wanted.includes(uid)) expect(mounts.filter((m) => m.includes(`/pods/${uid}/`))).toEqual([])
      }
      for (const [i, d] of disks.entries()) {
        const loops = (await host.loopDevices?.find(d.image)) ?? []
        const used = wanted.includes(`pod${i}`)
        expect(loops.length).toBe(used ? 1 : 0)
        if (used) {
          // Data written before the kill is there after it; write the next round's proof.
          const file = `${root}/pods/pod${i}/volumes/kubevol.io~file-disk/pv-disk${i}/proof`
          const before = await host.readFile(file).then((b) => Number(Buffer.from(b).toString()), () => -1)
          expect(before, `disk${i} in round ${round}`).toBe(lastWritten[i] ?? -1)
          await host.writeFile(file, String(round))
          execFileSync('sync')
          lastWritten[i] = round
        }
      }
    }
    // Everything away at the end: nothing left mounted, no loop device.
    writeFileSync(stateFile, JSON.stringify({ pods, disks, wanted: [] }))
    await run([root, stateFile, '--settle'], 'CONVERGED')
    expect(mountsUnder(root)).toEqual([])
    for (const d of disks) expect(await host.loopDevices?.find(d.image)).toEqual([])
  }, 600_000)
})
