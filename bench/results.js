// Each benchmark writes results/<name>.json and results/<name>.md; SUMMARY.md joins the sections.
import { readFileSync } from 'node:fs'
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises'

const dir = new URL('./results/', import.meta.url)
const ORDER = ['kubelet', 'start-up', 'pod-startup', 'node-scale', 'soak', 'reconstruction', 'linux-host', 'linux-scale', 'memory', 'api-load']

export async function writeResult(name, json, markdown) {
  await mkdir(dir, { recursive: true })
  await writeFile(new URL(`${name}.json`, dir), `${JSON.stringify(json, null, 2)}\n`)
  await writeFile(new URL(`${name}.md`, dir), markdown.endsWith('\n') ? markdown : `${markdown}\n`)
  await writeSummary()
}

async function writeSummary() {
  const sections = (await readdir(dir)).filter((f) => f.endsWith('.md') && f !== 'SUMMARY.md')
  sections.sort((a, b) => rank(a) - rank(b))
  const parts = await Promise.all(sections.map((f) => readFile(new URL(f, dir), 'utf8')))
  const text = ['# Benchmark results', '', 'Written by `npm run bench`; each section by its own script in bench/. See bench/README.md for the method.', '', ...parts].join('\n')
  await writeFile(new URL('SUMMARY.md', dir), text)
}

function rank(file) {
  const i = ORDER.indexOf(file.replace(/\.md$/, ''))
  return i < 0 ? ORDER.length : i
}

/**
 * This process's resident memory now and its peak so far (VmRSS, VmHWM in /proc/self/status), in
 * MiB; undefined where there is no /proc. The peak is the kernel's high-water mark for the whole
 * process: in a script that runs several workloads it is the largest of them so far.
 */
export function residentMiB() {
  let text
  try {
    text = readFileSync('/proc/self/status', 'utf8')
  } catch {
    return undefined
  }
  const kib = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1]) / 1024
  return { rss: kib('VmRSS'), peak: kib('VmHWM') }
}
