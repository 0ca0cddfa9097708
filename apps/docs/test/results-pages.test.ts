/**
 * The pages drawn from recorded results cannot drift from them: what scripts/generate-results-pages.mjs
 * writes now, from bench/results/*.json and test/hostile-node/results.json, is what the site holds, and
 * each chart names the figures it was drawn from.
 */
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
// @ts-expect-error: a plain .mjs script, no declarations
import { resultsPages } from '../scripts/generate-results-pages.mjs'

const DOCS = fileURLToPath(new URL('..', import.meta.url))
const REPO = join(DOCS, '..', '..')
const files = (await resultsPages()) as Map<string, string>
const bench = (name: string) => JSON.parse(readFileSync(join(REPO, 'bench', 'results', `${name}.json`), 'utf8'))
const chart = (id: string) => files.get(`pages/public/charts/${id}.svg`) ?? ''
const desc = (svg: string) => /<desc>([\s\S]*?)<\/desc>/.exec(svg)?.[1] ?? ''

describe('the pages drawn from recorded results', () => {
  it.each([...files.keys()])('%s is as the generator writes it from the current results (run `npm run generate -w @kubevol/docs`)', (path) => {
    const file = join(DOCS, path)
    expect(existsSync(file), `${path} is missing`).toBe(true)
    expect(readFileSync(file, 'utf8')).toBe(files.get(path))
  })

  it('draws every chart the measured page shows, each an SVG with a title', () => {
    const page = files.get('pages/concepts/measured.md') ?? ''
    const shown = [...page.matchAll(/\]\(\/charts\/([\w-]+)\.svg\)/g)].map((m) => m[1])
    expect(shown).toEqual(['kubelet', 'pod-startup', 'idle-cpu', 'converge', 'linux-host', 'csi'])
    for (const id of shown) expect(chart(id!)).toMatch(/^<svg [^>]*><title>[^<]+<\/title><desc>drawn from bench\/results\//)
  })

  it('names, in each chart, the figures it was drawn from', () => {
    // The kubelet's own VolumeManager against kubevol: both medians of every row, and the page says which is which.
    const side = bench('kubelet')
    expect(side.rows.length).toBeGreaterThan(0)
    for (const [i, row] of side.rows.entries()) {
      expect(desc(chart('kubelet'))).toContain(`bench/results/kubelet.json rows[${i}].kubelet.median (${row.id}) = ${row.kubelet.median}`)
      expect(desc(chart('kubelet'))).toContain(`bench/results/kubelet.json rows[${i}].kubevol.median (${row.id}) = ${row.kubevol.median}`)
    }
    expect(chart('kubelet')).toContain('kubelet v1.32')
    const startup = bench('pod-startup')
    for (const [i, row] of startup.results.entries()) expect(desc(chart('pod-startup'))).toContain(`bench/results/pod-startup.json results[${i}].p99Ms (${row.variant}, ${row.mode}) = ${row.p99Ms}`)
    const scale = bench('node-scale')
    for (const [i, row] of scale.idle.entries()) expect(desc(chart('idle-cpu'))).toMatch(new RegExp(`idle\\[${i}\\]\\.cpuPercent \\([^)]*, ${row.volumes} volumes\\) = ${row.cpuPercent}`))
    for (const row of scale.converge) expect(desc(chart('converge'))).toContain(`= ${row.seconds}`)
    expect(desc(chart('linux-host'))).toContain(`bench/results/linux-host.json managed.total = ${bench('linux-host').managed.total}`)
    // Medians and p99s, as the table beside it: never a mean of the rounds.
    expect(desc(chart('csi'))).toContain(`bench/results/csi.json managed.medianMs = ${bench('csi').managed.medianMs}`)
    expect(desc(chart('csi'))).toContain(`bench/results/csi.json raw.p99Ms = ${bench('csi').raw.p99Ms}`)
    expect(desc(chart('csi'))).not.toMatch(/totalMs|kubevolMs/)
    expect(chart('csi')).toMatch(/<title>[^<]*median and p99 of \d+/)
  })

  it('says on the measured page which machine each figure comes from', () => {
    const page = files.get('pages/concepts/measured.md') ?? ''
    expect(page.match(/^\*\*Machine\.\*\* .*Node v\d+/gm)).toHaveLength(6)
    expect(page).toContain(bench('pod-startup').machine.date)
    expect(page).toContain(bench('kubelet').machine.date)
    // pollingCompat is kubevol on the kubelet's schedule, never presented as the kubelet itself.
    expect(page).toMatch(/`pollingCompat: true`[^.]*: kubevol's code on the kubelet's schedule, not the kubelet/)
  })

  it('shows on the safety page every attack of the recorded hostile-node run, with its outcome and date', () => {
    const results = JSON.parse(readFileSync(join(REPO, 'test', 'hostile-node', 'results.json'), 'utf8'))
    const page = files.get('pages/concepts/never-does.md') ?? ''
    expect(results.attacks.length).toBeGreaterThan(0)
    for (const attack of results.attacks) {
      const row = page.split('\n').find((line) => line.includes(`[\`${attack.id}\`]`))
      expect(row, attack.id).toBeDefined()
      expect(row).toContain(attack.outcome === 'pass' ? `✓ held (${results.date.slice(0, 10)})` : '✗ **failed**')
    }
    expect(page).toContain(`**Last recorded run:** ${results.date}`)
    expect(page).toContain('](./kubelet-fidelity.md)')
  })
})
