/**
 * SLOW (`npm run test:image`; on the 2-core test machine 2-3 minutes with the layers cached, 7-8 when a
 * package manifest or the lockfile changed, 13-15 the first time: the base image and both `npm ci`). The agent's image built from deploy/Dockerfile as shipped and run on the
 * real kernel as the DaemonSet runs it:
 *
 * 1. The base image `node:22-slim` made here (base-image.ts, kept between runs), then `buildah bud
 *    --pull=never` of the Dockerfile with the npm configuration as a build secret (build-image.ts).
 *    The image's size and layers are recorded in results.json; `kubevol --help` and the agent's
 *    `--help` run inside it; it holds no test tooling and no npm configuration.
 * 2. `podman run` with the DaemonSet's container (daemonset.ts) in static mode on a node made of a
 *    folder, a private mount namespace (the integration project's preload) and a private network
 *    namespace (so that the agent's 127.0.0.1:10280 is the node's, not the machine's): a pod's
 *    emptyDir on disk and in memory, configMap and fileDisk claim are mounted by the agent inside the
 *    container and seen on the node under the root directory; the probes' paths answer on
 *    127.0.0.1; `kubevol explain` runs through `podman exec`; `podman stop` ends the agent within
 *    the grace period and the mounts stay; a new container reconstructs them without mounting again
 *    (the same mount ids on the node); deleting the pod's manifest unmounts them from inside.
 * 3. The DaemonSet as shipped, in API mode: the same pod from an API server on the node (the agent's
 *    fake one, which this process serves from the node's network namespace), mounted and torn down.
 *    The agent's memory and CPU in its container over both runs (`/proc/<pid>` of the container's
 *    process, seen from the node) are recorded in results.json: deploy/daemonset.yaml's requests.
 *
 * Skipped with the reason printed without root, the private mount namespace, buildah, podman, crun
 * or debootstrap; under CI=true it fails instead.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { closeSync, existsSync, lstatSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, readlinkSync, unlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { release } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startFakeApiServer } from '@kubevol/agent/testing'
import { parseAllDocuments } from 'yaml'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ensureBaseImage } from './base-image.js'
import { buildImage, DOCKERFILE, repoRoot as REPO } from './build-image.js'
import { type PodmanRun, podmanRunOf, readDaemonSet } from './daemonset.js'
import { attempt, containerEnvironment, mountsUnder, removeWorkDir, run, whyNot } from './tools.js'

const RESULTS_FILE = fileURLToPath(new URL('results.json', import.meta.url))
const NODE_NAME = 'node1'
const POD_UID = 'image-web'
// Containers named for this run: a run that died elsewhere (or one running beside it) cannot collide.
const NAMES = { first: `kubevol-image-${process.pid}-1`, second: `kubevol-image-${process.pid}-2`, api: `kubevol-image-${process.pid}-api` }
const reason = whyNot()

if (reason !== undefined && process.env.CI === 'true') {
  describe('the agent image', () => {
    it(`cannot run: ${reason}`, () => {
      throw new Error(`the agent image test: ${reason}; CI must run it as root with buildah, podman, crun and debootstrap`)
    })
  })
} else if (reason !== undefined) {
  console.warn(`[integration] skipping the agent image test: ${reason}`)
  describe.skip('the agent image', () => {
    it(`is built and run (skipped: ${reason}; CI runs it as root)`, () => {})
  })
} else {
  describe('the agent image, built from deploy/Dockerfile and run as the DaemonSet runs it (slow)', imageSuite)
}

/** What the run measured; written to results.json once every step passed. */
const results: Record<string, unknown> = {}
const seconds = (since: number) => Math.round((Date.now() - since) / 100) / 10

function imageSuite(): void {
  const { container: daemonSetContainer, spec: daemonSetSpec } = readDaemonSet()
  const image = `localhost/${daemonSetContainer.image}`
  const work = mkdtempSync('/var/tmp/kubevol-image-')
  const env = containerEnvironment(work)
  const containers: string[] = []
  let holder: ChildProcess | undefined
  const started = Date.now()
  /**
   * The node, made once: a folder whose bind mount is shared (as / is under systemd: Bidirectional
   * propagation needs it), and a private network namespace with its loopback up, so 127.0.0.1:10280
   * is the node's, not the machine's. This process's main thread joins that namespace too (the fake
   * API server of the API-mode run listens there); the builds ran before, with the machine's network.
   */
  let nodeReady: Promise<NodeFixture> | undefined
  const nodeUp = (): Promise<NodeFixture> => (nodeReady ??= makeNode())
  const makeNode = async (): Promise<NodeFixture> => {
    const node = join(work, 'node')
    const manifests = join(node, 'etc/kubevol/manifests')
    const images = join(node, 'images')
    mkdirSync(manifests, { recursive: true })
    mkdirSync(images, { recursive: true })
    await run('mount', ['--bind', node, node])
    await run('mount', ['--make-rshared', node])
    holder = spawn('unshare', ['--net', 'sh', '-c', 'ip link set lo up && echo up && exec sleep infinity'], { stdio: ['ignore', 'pipe', 'inherit'] })
    await new Promise<void>((resolve, reject) => {
      holder?.stdout?.once('data', () => resolve())
      holder?.once('exit', (code) => reject(new Error(`the node's network namespace did not start (exit ${code})`)))
    })
    const netns = `/proc/${holder.pid}/ns/net`
    joinNetworkNamespace(netns)
    // This thread is in the node's network now: its sockets reach the node's 127.0.0.1.
    const get = async (port: number, path: string) => {
      try {
        const res = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(5_000) })
        return { status: res.status, body: await res.text() }
      } catch (error) {
        return { status: 0, body: String(error) }
      }
    }
    return { node, manifests, images, get }
  }
  const probes = [daemonSetContainer.startupProbe, daemonSetContainer.livenessProbe, daemonSetContainer.readinessProbe].map((p) => p.httpGet)
  /** Runs the agent's container as `podman` says; resolves with its process id on the node once /livez answers. */
  const startContainer = async (name: string, podman: PodmanRun): Promise<number> => {
    const { get } = await nodeUp()
    containers.push(name)
    await run('podman', ['run', '--detach', '--name', name, '--cgroups=disabled', ...podman.flags, `localhost/${podman.image}`, ...podman.args], { env })
    const pid = Number((await run('podman', ['inspect', '--format', '{{.State.Pid}}', name], { env })).trim())
    try {
      await until(`${name}: /livez`, async () => (await get(probes[0]?.port ?? 0, probes[0]?.path ?? '')).status === 200, 60_000)
    } catch (error) {
      const { stdout, stderr } = await attempt('podman', ['logs', '--tail', '30', name], { env })
      throw new Error(`${(error as Error).message}; the container's last lines:\n${stdout}${stderr}`)
    }
    return pid
  }
  /**
   * `podman stop` with the DaemonSet's grace period: how long it took; the exit code must be 0. The
   * container is removed unless `keep` (to read its logs).
   */
  const stopContainer = async (name: string, keep = false): Promise<number> => {
    const from = Date.now()
    await run('podman', ['stop', '--time', String(daemonSetSpec.terminationGracePeriodSeconds), name], { env, timeoutMs: 120_000 })
    const took = seconds(from)
    expect({ name, exitCode: (await run('podman', ['inspect', '--format', '{{.State.ExitCode}}', name], { env })).trim() }).toEqual({ name, exitCode: '0' })
    if (!keep) await run('podman', ['rm', name], { env })
    return took
  }
  const logs = async (name: string) => (await run('podman', ['logs', name], { env })).split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>)
  /** The kubelet's liveness and readiness probes at their periods (5 s steps): the agent's CPU over that window, and its RSS. */
  const steadyState = async (pid: number, forSeconds: number) => {
    const { get } = await nodeUp()
    const from = { at: Date.now(), cpu: cpuSeconds(pid) }
    for (let t = 0; t < forSeconds; t += 5) {
      expect((await get(probes[1]?.port ?? 0, probes[1]?.path ?? '')).status).toBe(200)
      if (t % 10 === 0) expect((await get(probes[2]?.port ?? 0, probes[2]?.path ?? '')).status).toBe(200)
      await new Promise((resolve) => setTimeout(resolve, 5_000))
    }
    return { cpuMillicores: Math.round(((cpuSeconds(pid) - from.cpu) / ((Date.now() - from.at) / 1000)) * 1000), rssMiB: memory(pid).rss }
  }
  const explain = async (name: string) => JSON.parse(await run('podman', ['exec', name, 'kubevol', 'explain', 'default/web', '-o', 'json'], { env }).catch(() => '{}')) as ExplainJson

  beforeAll(async () => {
    const base = await ensureBaseImage(work, env)
    const built = await buildImage(work, env, image)
    results.build = { baseImage: base, image: built }
    console.log(`[integration] base image ${base.made ? 'made' : 'reused'} (${base.seconds} s); image built in ${built.seconds} s, ${built.cachedSteps} of ${built.steps} steps from the layer cache`)
  }, 30 * 60_000)

  afterAll(async () => {
    for (const name of containers) await attempt('podman', ['rm', '--force', '--time', '0', name], { env })
    holder?.kill('SIGKILL')
    const images = join(work, 'node/images')
    if (existsSync(images)) {
      for (const image of readdirSync(images)) {
        for (const line of (await attempt('losetup', ['--noheadings', '--output', 'NAME', '--associated', join(images, image)])).stdout.split('\n').filter(Boolean)) await attempt('losetup', ['--detach', line.trim()])
      }
    }
    removeWorkDir(work)
  }, 120_000)

  it('is built from deploy/Dockerfile as shipped: FROM node:22-slim, its size and layers recorded', async () => {
    const dockerfile = readFileSync(DOCKERFILE, 'utf8')
    expect(dockerfile.match(/^FROM .*$/gm)).toEqual(['FROM node:22-slim AS build', 'FROM node:22-slim'])
    const [inspect] = JSON.parse(await run('podman', ['image', 'inspect', image], { env })) as [{ Size: number; RootFS: { Layers: string[] }; Config: { Entrypoint: string[]; Cmd: string[]; StopSignal: string; Env: string[] } }]
    const entrypoint = JSON.parse(/^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(dockerfile)?.[1] ?? '[]') as string[]
    expect(inspect.Config.Entrypoint).toEqual(entrypoint)
    expect(inspect.Config.StopSignal).toBe('SIGTERM')
    expect(inspect.Config.Env).toEqual(expect.arrayContaining(['NODE_ENV=production', 'MALLOC_ARENA_MAX=1']))
    const history = JSON.parse(await run('podman', ['history', '--format', 'json', image], { env })) as { size: number; CreatedBy?: string; createdBy?: string; comment?: string }[]
    const layers = history
      .filter((h) => h.size > 0)
      .reverse()
      .map((h) => ({ mb: Math.round(h.size / 1e5) / 10, step: (h.CreatedBy ?? h.createdBy ?? '').replace(/^\/bin\/sh -c (#\(nop\) )?/, '').replace(/\s+/g, ' ').slice(0, 120) }))
    results.image = { sizeMB: Math.round(inspect.Size / 1e5) / 10, layers: inspect.RootFS.Layers.length, layersWithContent: layers }
    console.log(`[integration] ${image}: ${Math.round(inspect.Size / 1e6)} MB, ${inspect.RootFS.Layers.length} layers\n  ${layers.map((l) => `${l.mb} MB  ${l.step}`).join('\n  ')}`)
    expect(inspect.RootFS.Layers.length).toBeGreaterThan(1)
  })

  it('runs kubevol --help and the agent --help inside; holds no test tooling and no npm configuration', async () => {
    const agentHelp = await run('podman', ['run', '--rm', '--cgroups=disabled', image, '--help'], { env })
    expect(agentHelp).toMatch(/--pod-manifest-path/)
    // `kubevol` through the image's PATH, as `kubectl exec ... kubevol explain` finds it; API mode's
    // client and the CSI .proto files in the production install. One container for both (each costs seconds).
    const load = "await import('@kubevol/agent/kube'); const m = await import('@kubevol/adapter-linux'); m.csiProto(); console.log('loaded')"
    const cliHelp = await run('podman', ['run', '--rm', '--cgroups=disabled', '--entrypoint', 'sh', image, '-c', `kubevol --help && node --input-type=module -e "${load}"`], { env })
    expect(cliHelp).toMatch(/explain/)
    expect(cliHelp).toMatch(/^loaded$/m)

    const root = (await run('podman', ['image', 'mount', image], { env })).trim()
    try {
      // vitest is an optional peer of @kubevol/core and a root devDependency; typescript and esbuild build.
      const packages = installedPackages(join(root, 'opt/kubevol/node_modules'))
      expect(packages).toContain('koffi')
      expect(packages.filter((name) => /^(vitest|vite|typescript|esbuild|@vitest\/.*|@esbuild\/.*)$/.test(name))).toEqual([])
      // The build secret and the npm cache mount stay out of every layer.
      expect(['root/.npmrc', 'root/.npm/_cacache', 'opt/kubevol/.npmrc'].filter((path) => existsSync(join(root, path)))).toEqual([])
    } finally {
      await run('podman', ['image', 'unmount', image], { env })
    }
  })

  it('runs as the DaemonSet: volumes mounted inside reach the node, probes answer, stop keeps the mounts, a new container reconstructs them, the pod deletion tears them down', { timeout: 600_000 }, async () => {
    const scenarioStarted = Date.now()
    const { node, manifests, images, get } = await nodeUp()

    // Static mode: the DaemonSet's args with --mode=static and the manifest directory; the disk image
    // folder is bound at the same path, as README.md tells for the pods' own host paths.
    const podman = podmanRunOf(node, NODE_NAME, [`${manifests}:/etc/kubevol/manifests:ro`, `${images}:${images}:rw,rprivate`], (args) => [
      ...args.map((a) => (a === '--mode=api' ? '--mode=static' : a)),
      '--pod-manifest-path=/etc/kubevol/manifests',
    ])
    expect(podman.args).toContain('--mode=static')
    const rootDir = podman.hostPaths.get('/var/lib/kubevol')
    if (!rootDir) throw new Error('the DaemonSet has no hostPath /var/lib/kubevol')
    // ---- first container: the pod's volumes mounted inside, seen on the node ----
    const disk = join(images, 'data.img')
    await run('truncate', ['--size', '64M', disk])
    const firstStarted = Date.now()
    const first = await startContainer(NAMES.first, podman)
    const startUp = { seconds: seconds(firstStarted), cpu: cpuSeconds(first), rssMiB: memory(first).rss }
    writeFileSync(join(manifests, 'web.yaml'), podManifest(disk))
    const volumes = join(rootDir, `pods/${POD_UID}/volumes`)
    const mountedSince = Date.now()
    await until('the pod volumes mounted', () => mountsUnder(volumes).length === 2, 120_000)
    await until('the pod ready in the agent', async () => explained(await explain(NAMES.first)) === 'config,data,scratch,shm: mounted', 60_000)
    const mountSeconds = seconds(mountedSince)
    const dirs = {
      scratch: join(volumes, 'kubernetes.io~empty-dir/scratch'),
      shm: join(volumes, 'kubernetes.io~empty-dir/shm'),
      config: join(volumes, 'kubernetes.io~configmap/config'),
    }
    const mountIds = nodeMounts(rootDir)
    const data = [...mountIds.keys()].find((target) => target.startsWith(volumes) && target !== dirs.shm)
    if (!data) throw new Error(`no fileDisk mount under ${volumes}: ${[...mountIds.keys()].join(', ')}`)
    // What the node sees: a tmpfs for the memory emptyDir, ext4 on a loop device for the claim, the
    // configMap's files, and files written inside the container in each writable volume.
    expect(fsTypes(volumes)).toEqual({ [dirs.shm]: 'tmpfs', [data]: 'ext4' })
    const configDir = join(dirs.config, readlinkSync(join(dirs.config, '..data')))
    expect(readFileSync(join(configDir, 'mode'), 'utf8')).toBe('fast')
    const inside = { scratch: '/var/lib/kubevol' + dirs.scratch.slice(rootDir.length), shm: '/var/lib/kubevol' + dirs.shm.slice(rootDir.length), data: '/var/lib/kubevol' + data.slice(rootDir.length) }
    await run('podman', ['exec', NAMES.first, 'sh', '-c', Object.entries(inside).map(([name, path]) => `echo ${name} > ${path}/written-inside`).join(' && ')], { env })
    for (const [name, path] of Object.entries({ scratch: dirs.scratch, shm: dirs.shm, data })) expect(readFileSync(join(path, 'written-inside'), 'utf8')).toBe(`${name}\n`)
    expect((await attempt('losetup', ['--noheadings', '--output', 'NAME', '--associated', disk])).stdout.trim()).toMatch(/^\/dev\/loop\d+$/)

    // The kubelet's probes, on the node's 127.0.0.1.
    for (const probe of probes) expect({ path: probe.path, ...(await get(probe.port, probe.path)) }).toMatchObject({ path: probe.path, status: 200 })
    const explainText = await run('podman', ['exec', NAMES.first, 'kubevol', 'explain', `default/web`], { env })
    expect(explainText).toMatch(/data/)

    const steady = await steadyState(first, 10)
    const firstPeak = memory(first).peak
    const firstCpu = cpuSeconds(first)

    // ---- SIGTERM: exits within the grace period, the mounts stay ----
    const stopSeconds = await stopContainer(NAMES.first, true)
    expect(stopSeconds).toBeLessThan(daemonSetSpec.terminationGracePeriodSeconds)
    expect((await logs(NAMES.first)).map((l) => l.msg)).toContain('Shutting down; mounts stay in place')
    expect(nodeMounts(rootDir)).toEqual(mountIds)
    await run('podman', ['rm', NAMES.first], { env })

    // ---- a new container: reconstructs without mounting again ----
    const secondStarted = Date.now()
    const second = await startContainer(NAMES.second, podman)
    await until('the pod known again', async () => explained(await explain(NAMES.second)) === 'config,data,scratch,shm: mounted', 60_000)
    const reconstructSeconds = seconds(secondStarted)
    expect((await logs(NAMES.second)).find((l) => l.msg === 'Volume reconstruction finished')).toMatchObject({ failed: 0 })
    // The same mounts, by the kernel's mount ids: nothing was unmounted or mounted again.
    expect(nodeMounts(rootDir)).toEqual(mountIds)
    expect(readFileSync(join(dirs.shm, 'written-inside'), 'utf8')).toBe('shm\n')
    for (const probe of probes) expect({ path: probe.path, ...(await get(probe.port, probe.path)) }).toMatchObject({ path: probe.path, status: 200 })

    // ---- the pod deleted: torn down from inside the container ----
    const teardownFrom = Date.now()
    unlinkSync(join(manifests, 'web.yaml'))
    await until('the pod torn down', () => mountsUnder(rootDir).length === 0 && !existsSync(join(rootDir, `pods/${POD_UID}`)), 120_000)
    await until('the loop device detached', async () => (await attempt('losetup', ['--noheadings', '--associated', disk])).stdout.trim() === '', 30_000)
    const teardownSeconds = seconds(teardownFrom)
    expect(readFileSync(disk).subarray(1080, 1082)).toEqual(Buffer.from([0x53, 0xef])) // the ext4 made inside stays in the image
    const secondPeak = memory(second).peak
    const secondCpu = cpuSeconds(second)
    await stopContainer(NAMES.second)

    results.static = {
      what: 'static mode, Linux host, one pod (emptyDir on disk and in memory, configMap, fileDisk claim)',
      startUp,
      podMountedSeconds: mountSeconds,
      steadyState: steady,
      first: { peakRssMiB: firstPeak, cpuSeconds: firstCpu },
      stopSeconds,
      second: { reconstructedSeconds: reconstructSeconds, peakRssMiB: secondPeak, cpuSeconds: secondCpu },
      teardownSeconds,
      seconds: seconds(scenarioStarted),
    }
    console.log(`[integration] the agent in its container, static mode: ${JSON.stringify(results.static)}`)
  })

  it('runs as the DaemonSet in API mode, its args as shipped: the same pod from an API server on the node; its memory and CPU are the requests', { timeout: 300_000 }, async () => {
    const scenarioStarted = Date.now()
    const { node, images } = await nodeUp()
    // An API server on the node's 127.0.0.1 (this process joined the node's network), the agent with
    // a node identity of its own Node through --kubeconfig, in place of the DaemonSet's TLS bootstrapping
    // (the fake API server signs no certificates; test/envtest/bundle.test.ts bootstraps on a real one).
    const api = await startFakeApiServer()
    try {
      const nodeName = `${NODE_NAME}-kubevol`
      const kubeDir = join(node, 'etc/kubevol/kube')
      mkdirSync(kubeDir, { recursive: true })
      writeFileSync(join(kubeDir, 'kubeconfig'), api.kubeConfig(api.nodeToken(nodeName)).exportConfig())
      const podman = podmanRunOf(node, NODE_NAME, [`${kubeDir}:/etc/kubevol/kube:ro`, `${images}:${images}:rw,rprivate`], (args) => [
        ...args.filter((a) => !a.startsWith('--bootstrap-kubeconfig=')),
        '--kubeconfig=/etc/kubevol/kube/kubeconfig',
      ])
      expect(podman.args).toContain('--mode=api')
      const rootDir = podman.hostPaths.get('/var/lib/kubevol') as string
      const disk = join(images, 'data.img')
      for (const doc of parseAllDocuments(readFileSync(join(REPO, 'deploy/csidriver-filedisk.yaml'), 'utf8'))) api.create('CSIDriver', doc.toJS())
      const objects = parseAllDocuments(podManifest(disk)).map((d) => d.toJS() as { kind: string; metadata: Record<string, unknown>; spec: Record<string, unknown> })
      for (const object of objects.filter((o) => o.kind !== 'Pod')) api.create(object.kind, object)

      const startedAt = Date.now()
      const agent = await startContainer(NAMES.api, podman)
      const startUp = { seconds: seconds(startedAt), cpu: cpuSeconds(agent), rssMiB: memory(agent).rss }
      const pod = objects.find((o) => o.kind === 'Pod')
      if (!pod) throw new Error('no pod in the manifest')
      const { uid: _uid, ...metadata } = pod.metadata
      const created = api.create('Pod', { ...pod, metadata: { ...metadata, namespace: 'default' }, spec: { ...pod.spec, nodeName } })
      const uid = String((created as { metadata: { uid: string } }).metadata.uid)
      const volumes = join(rootDir, `pods/${uid}/volumes`)
      const mountedSince = Date.now()
      await until('the API pod volumes mounted', () => mountsUnder(volumes).length === 2, 120_000)
      await until('the API pod ready in the agent', async () => explained(await explain(NAMES.api)) === 'config,data,scratch,shm: mounted', 60_000)
      const mountSeconds = seconds(mountedSince)
      expect(api.get('Node', undefined, nodeName)).toBeDefined()
      const steady = await steadyState(agent, 20)
      const peak = memory(agent).peak

      // Deleted through the API: the agent unmounts, then deletes the pod's object.
      api.delete('Pod', 'default', 'web')
      await until('the API pod torn down and finalized', () => mountsUnder(rootDir).length === 0 && api.get('Pod', 'default', 'web') === undefined, 120_000)
      const afterTeardown = memory(agent)
      const cpu = cpuSeconds(agent)
      await stopContainer(NAMES.api)
      results.api = {
        what: 'API mode (the DaemonSet as shipped) against a fake API server on the node, Linux host, the same pod',
        startUp,
        podMountedSeconds: mountSeconds,
        steadyState: steady,
        peakRssMiB: Math.max(peak, afterTeardown.peak),
        cpuSeconds: cpu,
        seconds: seconds(scenarioStarted),
      }
      console.log(`[integration] the agent in its container, API mode: ${JSON.stringify(results.api)}`)
    } finally {
      await api.close()
    }
    // deploy/daemonset.yaml's requests hold what this run used: the peak in API mode and the CPU of its
    // steady state (the start-up's burst is above the request, on CPU no limit holds back).
    const { requests } = daemonSetContainer.resources
    const measured = results.api as { peakRssMiB: number; steadyState: { cpuMillicores: number } }
    const memoryCovered = mebibytes(requests.memory) >= measured.peakRssMiB
    const cpuCovered = millicores(requests.cpu) >= measured.steadyState.cpuMillicores
    expect({ requests, measured, memoryCovered, cpuCovered }).toMatchObject({ memoryCovered: true, cpuCovered: true })
    results.requests = requests
    results.seconds = { total: seconds(started) }
    writeFileSync(RESULTS_FILE, `${JSON.stringify({ suite: 'image', date: new Date().toISOString(), machine: { kernel: release(), arch: process.arch }, ...results }, null, 2)}\n`)
  })
}

// ---- the pod ----

function podManifest(image: string): string {
  return `apiVersion: v1
kind: ConfigMap
metadata: { name: settings }
data: { mode: fast }
---
apiVersion: v1
kind: PersistentVolume
metadata: { name: pv-disk }
spec:
  capacity: { storage: 64Mi }
  accessModes: [ReadWriteOnce]
  csi: { driver: filedisk.kubevol.io, volumeHandle: ${image}, fsType: ext4 }
  claimRef: { name: data, namespace: default }
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: { name: data }
spec: { volumeName: pv-disk, accessModes: [ReadWriteOnce], resources: { requests: { storage: 64Mi } } }
status: { phase: Bound, capacity: { storage: 64Mi } }
---
apiVersion: v1
kind: Pod
metadata: { name: web, uid: ${POD_UID} }
spec:
  containers:
    - name: main
      volumeMounts: [{ name: scratch, mountPath: /scratch }, { name: shm, mountPath: /shm }, { name: config, mountPath: /config }, { name: data, mountPath: /data }]
  volumes:
    - { name: scratch, emptyDir: {} }
    - { name: shm, emptyDir: { medium: Memory, sizeLimit: 16Mi } }
    - { name: config, configMap: { name: settings } }
    - { name: data, persistentVolumeClaim: { claimName: data } }
`
}

interface ExplainJson {
  readonly volumes?: readonly { readonly name: string; readonly phase: string }[]
}
/** `a,b: mounted` when every volume has the same phase, else each with its own. */
function explained(json: ExplainJson): string {
  const volumes = [...(json.volumes ?? [])].sort((a, b) => a.name.localeCompare(b.name))
  const phases = new Set(volumes.map((v) => v.phase))
  return phases.size === 1 ? `${volumes.map((v) => v.name).join(',')}: ${[...phases][0]}` : volumes.map((v) => `${v.name}: ${v.phase}`).join(', ')
}

// ---- what the node sees ----

/** Mount points under `dir` on the node with their mount ids (a mount made again gets a new id). */
function nodeMounts(dir: string): Map<string, string> {
  const found = new Map<string, string>()
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const fields = line.split(' ')
    const target = fields[4] ?? ''
    if (target.startsWith(`${dir}/`)) found.set(target, fields[0] ?? '')
  }
  return found
}

function fsTypes(dir: string): Record<string, string> {
  const found: Record<string, string> = {}
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const [before, after] = line.split(' - ')
    const target = before?.split(' ')[4] ?? ''
    if (target.startsWith(`${dir}/`)) found[target] = after?.split(' ')[0] ?? ''
  }
  return found
}

/** Resident memory of a process in MiB: now and its peak (VmHWM). */
function memory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN)
  return { rss: Math.round(kb('VmRSS') / 102.4) / 10, peak: Math.round(kb('VmHWM') / 102.4) / 10 }
}

/** User and system CPU a process used so far, in seconds (clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/** Packages (`name` or `@scope/name`) installed in any node_modules under `dir` (symlinks not followed). */
function installedPackages(dir: string, found: string[] = []): string[] {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry)
    if (lstatSync(path).isSymbolicLink() || !lstatSync(path).isDirectory()) continue
    if (dir.endsWith('/node_modules') && entry.startsWith('@')) {
      for (const scoped of readdirSync(path)) {
        if (existsSync(join(path, scoped, 'package.json'))) found.push(`${entry}/${scoped}`)
        installedPackages(join(path, scoped), found)
      }
    } else {
      if (dir.endsWith('/node_modules') && existsSync(join(path, 'package.json'))) found.push(entry)
      installedPackages(path, found)
    }
  }
  return found
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

interface NodeFixture {
  /** The node's folder: its hostPaths are under it. */
  readonly node: string
  readonly manifests: string
  /** Where the pods' disk images are, bound into the agent's container at the same path. */
  readonly images: string
  /** An HTTP GET on the node's 127.0.0.1, as the kubelet's probes make it. */
  get(port: number, path: string): Promise<{ status: number; body: string }>
}

/**
 * Moves this process's main thread into the network namespace at `path` (setns(2) through koffi, as
 * the integration project's preload enters its mount namespace): sockets it opens and processes it
 * starts from then on are the node's.
 */
function joinNetworkNamespace(path: string): void {
  const CLONE_NEWNET = 0x40000000
  const koffi = createRequire(createRequire(import.meta.url).resolve('@kubevol/adapter-linux/package.json'))('koffi') as {
    load(name: string): { func(signature: string): (...args: unknown[]) => number }
    errno(): number
  }
  const setns = koffi.load('libc.so.6').func('int setns(int fd, int nstype)')
  const fd = openSync(path, 'r')
  try {
    if (setns(fd, CLONE_NEWNET) !== 0) throw new Error(`setns(${path}) failed: errno ${koffi.errno()}`)
  } finally {
    closeSync(fd)
  }
}

/** A memory quantity (`128Mi`, `1Gi`, `200M`) in MiB. */
function mebibytes(quantity: string): number {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|k|M|G)?$/.exec(quantity)
  if (!m) throw new Error(`cannot read the memory quantity ${quantity}`)
  const factor: Record<string, number> = { Ki: 1 / 1024, Mi: 1, Gi: 1024, k: 1000 / 1048576, M: 1e6 / 1048576, G: 1e9 / 1048576, '': 1 / 1048576 }
  return Number(m[1]) * (factor[m[2] ?? ''] ?? Number.NaN)
}

/** A CPU quantity (`10m`, `0.5`, `1`) in millicores. */
function millicores(quantity: string): number {
  return quantity.endsWith('m') ? Number(quantity.slice(0, -1)) : Number(quantity) * 1000
}
