/**
 * The site in a real browser: build it, serve it on localhost, and in headless Chromium open every
 * page (the home page and every page of the sidebar) at a desktop and a phone width, run every
 * example, play the playground's tour and use its controls, and edit an example and run it again.
 * Fails on any console error, failed request, broken internal link, page wider than the screen, or
 * example that fails. Screenshots go to apps/docs/test-artifacts/.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs'
import { type Server, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { dirname, extname, join, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Browser, type Page, chromium } from 'playwright-core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { sidebar } from '../.vitepress/sidebar.js'

const DOCS = fileURLToPath(new URL('..', import.meta.url))
const DIST = join(DOCS, '.vitepress', 'dist')
const ARTIFACTS = join(DOCS, 'test-artifacts')
const CHROMIUM = '/usr/bin/chromium'
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

const haveChromium = existsSync(CHROMIUM)
if (!haveChromium && !process.env.CI) console.warn(`skipping the docs browser test: ${CHROMIUM} is missing (apt-get install -y chromium)`)
// Under CI a missing browser is a failure, never a skip.
const suite = haveChromium || process.env.CI ? describe : describe.skip

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript',
  '.css': 'text/css',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
}

/** The built file a site path maps to, the way a static host resolves it (`/a` → `/a.html`). */
function builtFile(pathname: string): string | undefined {
  const clean = normalize(decodeURIComponent(pathname)).replace(/^(\.\.[/\\])+/, '')
  const candidates = clean.endsWith('/') ? [join(DIST, clean, 'index.html')] : [join(DIST, clean), join(DIST, `${clean}.html`)]
  return candidates.find((file) => file.startsWith(DIST) && existsSync(file) && statSync(file).isFile())
}

function serve(): Promise<Server> {
  const server = createServer((req, res) => {
    const file = builtFile(new URL(req.url ?? '/', 'http://localhost').pathname)
    if (!file) {
      res.writeHead(404).end('not found')
      return
    }
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file))
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

function run(command: string, args: readonly string[]): void {
  const result = spawnSync(command, args, { cwd: DOCS, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } })
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (${result.status}):\n${result.stdout}\n${result.stderr}`)
}

const pages = ['/', ...sidebar.flatMap((group) => group.items.map((item) => item.link))]
/** The examples each page runs (`<RunExample name="…">` in its Markdown), by page. */
const runExamples = new Map(
  pages.flatMap((path) => {
    const file = join(DOCS, 'pages', path === '/' ? 'index.md' : `${path}.md`)
    const names = existsSync(file) ? [...readFileSync(file, 'utf8').matchAll(/<RunExample name="([^"]+)"/g)].map((m) => m[1] as string) : []
    return names.length > 0 ? [[path, names] as const] : []
  }),
)

suite('the docs site in Chromium', () => {
  let server: Server
  let browser: Browser
  let base: string
  const problems: string[] = []
  beforeEach(() => {
    problems.length = 0
  })

  beforeAll(async () => {
    if (!haveChromium) throw new Error(`${CHROMIUM} is missing: CI must install chromium (apt-get install -y chromium)`)
    mkdirSync(ARTIFACTS, { recursive: true })
    run(process.execPath, ['scripts/generate-reference.mjs'])
    run(process.execPath, ['scripts/generate-results-pages.mjs'])
    const vitepress = join(dirname(fileURLToPath(import.meta.resolve('vitepress/package.json'))), 'bin', 'vitepress.js')
    run(process.execPath, [vitepress, 'build'])
    server = await serve()
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })
  })

  afterAll(async () => {
    await browser?.close()
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)))
  })

  /** A page that records console errors, uncaught exceptions and failed requests into `problems`. */
  async function open(path: string, viewport: { width: number; height: number } = { width: 1280, height: 900 }): Promise<Page> {
    const page = await browser.newPage({ viewport: { width: viewport.width, height: viewport.height } })
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`${path}: console error: ${message.text()}`)
    })
    page.on('pageerror', (error) => problems.push(`${path}: uncaught: ${error.message}`))
    page.on('requestfailed', (request) => problems.push(`${path}: request failed: ${request.url()} ${request.failure()?.errorText ?? ''}`))
    page.on('response', (response) => {
      if (response.status() >= 400) problems.push(`${path}: HTTP ${response.status()} for ${response.url()}`)
    })
    const response = await page.goto(`${base}${path}`, { waitUntil: 'load' })
    expect(response?.status(), path).toBe(200)
    return page
  }

  /**
   * What sticks out of the text column: a block of the page's content whose box passes the column's
   * edge, or a code block hiding part of a line past it. At a phone width VitePress draws code blocks
   * from one screen edge to the other, by design: they may reach the screen's edges, no further.
   */
  async function outsideTheColumn(page: Page): Promise<string[]> {
    return page.evaluate(() => {
      const doc = document.querySelector('.vp-doc')
      if (!doc) return []
      const column = doc.getBoundingClientRect()
      const screen = document.documentElement.clientWidth
      const found: string[] = []
      const name = (el: Element) => `${el.tagName.toLowerCase()}${el.className && typeof el.className === 'string' ? `.${el.className.split(' ')[0]}` : ''}`
      for (const el of Array.from(doc.children)) {
        const box = el.getBoundingClientRect()
        if (box.width === 0) continue
        const codeBlock = /\blanguage-/.test(String(el.className))
        const [left, right] = codeBlock && screen < 640 ? [0, screen] : [column.left, column.right]
        if (box.left < left - 1 || box.right > right + 1) found.push(`${name(el)} spans ${Math.round(box.left)}–${Math.round(box.right)} px, the column ${Math.round(left)}–${Math.round(right)}`)
      }
      for (const pre of Array.from(doc.querySelectorAll('pre'))) {
        if (pre.scrollWidth > pre.clientWidth + 1) found.push(`a code block hides ${pre.scrollWidth - pre.clientWidth} px of its lines: "${(pre.textContent ?? '').slice(0, 40)}…"`)
      }
      return found
    })
  }

  /**
   * Each chart's text as the reader sees it: its size on the screen (the SVG's font size times the
   * scale it is drawn at), whether it is cut off at the chart's edge, and whether it was shortened
   * with an ellipsis. The SVG is drawn inline at the size the page shows the image.
   */
  async function chartText(page: Page): Promise<{ chart: string; text: string; px: number; clipped: boolean }[]> {
    return page.evaluate(async () => {
      const found: { chart: string; text: string; px: number; clipped: boolean }[] = []
      for (const img of Array.from(document.querySelectorAll<HTMLImageElement>('img[data-chart]'))) {
        const svgText = await (await fetch(img.src)).text()
        const holder = document.createElement('div')
        holder.style.cssText = `position:absolute;left:0;top:0;width:${img.getBoundingClientRect().width}px`
        holder.innerHTML = svgText
        document.body.append(holder)
        const svg = holder.querySelector('svg') as SVGSVGElement
        svg.style.width = '100%'
        svg.style.height = 'auto'
        const box = svg.getBoundingClientRect()
        for (const t of Array.from(svg.querySelectorAll('text'))) {
          const text = t.textContent ?? ''
          if (!text.trim()) continue
          const b = t.getBoundingClientRect()
          const px = parseFloat(getComputedStyle(t).fontSize) * (t.getScreenCTM()?.a ?? 1)
          const clipped = b.left < box.left - 1 || b.right > box.right + 1 || b.top < box.top - 1 || b.bottom > box.bottom + 1 || text.endsWith('…')
          found.push({ chart: img.dataset.chart ?? '', text, px: Math.round(px * 10) / 10, clipped })
        }
        holder.remove()
      }
      return found
    })
  }

  const shot = (page: Page, name: string, fullPage = true) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage })

  const VIEWPORTS = [
    { name: 'desktop', width: 1280, height: 900 },
    { name: 'phone', width: 390, height: 844 },
  ] as const

  it.each(VIEWPORTS)('serves every page at a $name width with no console error, failed request, broken internal link or sideways scroll', async (viewport) => {
    const links = new Map<string, string>() // target → first page linking to it
    const wide: string[] = []
    const timings: string[] = []
    for (const path of pages) {
      const page = await open(path, viewport)
      await expect.poll(() => page.locator('.VPContent').count(), { timeout: 10_000 }).toBe(1)
      const hrefs = await page.$$eval('a[href]', (anchors) => anchors.map((a) => (a as HTMLAnchorElement).href))
      for (const href of hrefs) {
        const url = new URL(href)
        if (url.origin === base && !links.has(url.pathname)) links.set(url.pathname, path)
      }
      // Wide content (a table, a diagram, the timeline) scrolls inside itself, never the page.
      const scrollWidth = await page.evaluate(() => document.documentElement.scrollWidth)
      if (scrollWidth > viewport.width) wide.push(`${path} is ${scrollWidth} px wide`)
      for (const problem of await outsideTheColumn(page)) wide.push(`${path}: ${problem}`)
      const started = Date.now()
      await shot(page, `page${path === '/' ? '-home' : path.replace(/\//g, '-')}-${viewport.name}`, false)
      timings.push(`${path} ${Date.now() - started} ms`)
      await page.close()
    }
    const broken = [...links].filter(([target]) => !builtFile(target)).map(([target, from]) => `${from} links to ${target}, which is not built`)
    expect(broken).toEqual([])
    expect(wide).toEqual([])
    expect(links.size).toBeGreaterThan(pages.length)
    console.log(`${viewport.name}:\n${timings.join('\n')}`)
    expect(problems).toEqual([])
  }, 180_000)

  it('runs every example of every page, and each prints its output', async () => {
    expect([...runExamples.values()].flat().length).toBeGreaterThanOrEqual(10)
    for (const [path, names] of runExamples) {
      const page = await open(path)
      expect(await page.locator('.kv-example').count(), path).toBe(names.length)
      for (const name of names) {
        const example = page.getByTestId(`example-${name}`)
        await example.getByTestId('example-run').click()
        const output = example.getByTestId('example-output')
        await example.locator('[data-testid="example-output"]:is([data-state="done"], [data-state="failed"])').waitFor({ timeout: 30_000 })
        expect(`${path} ${name}: ${await output.getAttribute('data-state')}`).toBe(`${path} ${name}: done`)
        expect((await output.textContent())?.trim().length ?? 0).toBeGreaterThan(0)
      }
      await page.close()
    }
    expect(problems).toEqual([])
  }, 180_000)

  it('runs the playground: a pod mounts, a fault fails a step, the retry mounts it, a crash is survived', async () => {
    const page = await open('/playground')
    await page.getByTestId('add-pod').waitFor({ timeout: 20_000 })
    await shot(page, 'playground-0-empty')

    // A pod with a disk, an emptyDir and a configMap (the defaults) plus a secret.
    await page.getByTestId('pod-name').fill('web')
    await page.getByTestId('kind-secret').check()
    await page.getByTestId('add-pod').click()
    await page.locator('[data-testid="pod-web"][data-ready="true"]').waitFor({ timeout: 20_000 })
    const mounted = page.getByTestId('mounted').locator('tbody tr[data-state="mounted"]')
    await expect.poll(() => mounted.count()).toBe(4)
    await expect.poll(() => page.getByTestId('attached').textContent()).toContain('disk-1')
    await expect.poll(() => page.getByTestId('host-mounts').textContent()).toContain('pods/')
    await shot(page, 'playground-1-pod-mounted')

    // The next setUp fails: a pod with a scratch volume fails once, then mounts on the retry.
    await page.getByTestId('fault-step').selectOption('setUp')
    await page.getByTestId('fault-mode').selectOption('fail-once')
    await page.getByTestId('inject-fault').click()
    await page.getByTestId('pod-name').fill('db')
    for (const kind of ['disk', 'emptyDir', 'configMap', 'secret']) await page.getByTestId(`kind-${kind}`).uncheck()
    await page.getByTestId('kind-scratch').check()
    await page.getByTestId('add-pod').click()
    const timeline = page.getByTestId('timeline')
    await timeline.locator('[data-kind="error"]', { hasText: 'injected: setUp' }).waitFor({ timeout: 10_000 })
    await page.locator('[data-testid="pod-db"][data-ready="true"]').waitFor({ timeout: 10_000 })
    const text = await timeline.textContent()
    expect(text).toMatch(/✗ volume_mount db\/scratch/)
    expect(text).toMatch(/✓ volume_mount db\/scratch/)
    await shot(page, 'playground-2-fault-and-retry')

    // Crash and restart: the new manager reconstructs, and both pods keep their volumes.
    await page.getByTestId('crash-restart').click()
    await expect.poll(() => page.getByTestId('restarts').textContent()).toContain('1')
    await page.locator('[data-testid="pod-web"][data-ready="true"]').waitFor({ timeout: 20_000 })
    await page.locator('[data-testid="pod-db"][data-ready="true"]').waitFor({ timeout: 20_000 })
    await shot(page, 'playground-3-after-restart')

    // Deleting the pods unmounts everything and detaches the disk.
    await page.getByTestId('remove-web').click()
    await page.getByTestId('remove-db').click()
    await page.getByTestId('pods').waitFor({ state: 'detached', timeout: 20_000 })
    await expect.poll(() => page.getByTestId('mounted').count(), { timeout: 20_000 }).toBe(0)
    await expect.poll(() => page.getByTestId('attached').count(), { timeout: 20_000 }).toBe(0)
    await shot(page, 'playground-4-empty-again')
    await page.close()
    expect(problems).toEqual([])
  })

  it('shows the engine live on the home page: a pod added, its volumes converging, the operations, the tear-down', async () => {
    const page = await open('/')
    const live = page.getByTestId('hero-live')
    await live.waitFor({ timeout: 20_000 })
    await page.locator('[data-testid="hero-live"][data-phase="mounted"]').waitFor({ timeout: 20_000 })
    await expect.poll(() => live.locator('[data-testid="hero-mounted"][data-state="mounted"]').count()).toBe(3)
    expect(await page.getByTestId('hero-operations').textContent()).toMatch(/volume_mount web-1\//)
    // Each operation once: its end replaces its start, so nothing shows running beside its own "done".
    for (let i = 0; i < 10; i++) {
      const lines = await page.getByTestId('hero-operations').locator('div').allTextContents()
      const ops = lines.map((l) => l.slice(2).replace(/ (in|after) \d+ ms[\s\S]*$/, ''))
      expect(new Set(ops).size, lines.join('\n')).toBe(ops.length)
      await page.waitForTimeout(300)
    }
    await shot(page, 'home-live-mounted', false)
    await page.setViewportSize({ width: 390, height: 844 })
    await shot(page, 'home-live-phone', true)
    await page.locator('[data-testid="hero-live"][data-phase="empty"]').waitFor({ timeout: 20_000 })
    expect(await live.locator('[data-testid="hero-mounted"]').count()).toBe(0)
    await page.close()
    expect(problems).toEqual([])
  })

  it.each(VIEWPORTS)('shows the charts at a $name width with every label 10 px or more, none cut off, each inside the screen', async (viewport) => {
    const page = await open('/concepts/measured', viewport)
    await page.waitForLoadState('networkidle')
    const charts = await page.$$eval('img[data-chart]', (imgs) =>
      imgs.map((i) => ({ loaded: (i as HTMLImageElement).naturalWidth > 0, right: (i.parentElement ?? i).getBoundingClientRect().right })),
    )
    expect(charts).toHaveLength(6)
    for (const chart of charts) expect(chart.loaded && chart.right <= viewport.width).toBe(true)
    const text = await chartText(page)
    expect(text.length).toBeGreaterThan(50)
    expect(text.filter((t) => t.px < 10 || t.clipped)).toEqual([])
    expect(await outsideTheColumn(page)).toEqual([])
    await shot(page, `charts-${viewport.name}`)
    await page.close()
    expect(problems).toEqual([])
  })

  it('shows /concepts/never-does at a phone width, tables inside the screen', async () => {
    const page = await open('/concepts/never-does', { width: 390, height: 844 })
    await page.waitForLoadState('networkidle')
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
    expect(await outsideTheColumn(page)).toEqual([])
    await shot(page, 'phone-concepts-never-does')
    await page.close()
    expect(problems).toEqual([])
  })

  it('starts the playground with its controls on the first screen, at a desktop and a phone width', async () => {
    for (const viewport of VIEWPORTS) {
      const page = await open('/playground', viewport)
      const add = page.getByTestId('add-pod')
      await add.waitFor({ timeout: 20_000 })
      const box = await add.boundingBox()
      expect(box && box.y + box.height <= viewport.height, `${viewport.name}: the Add pod button at ${box?.y}`).toBe(true)
      await page.close()
    }
    expect(problems).toEqual([])
  })

  it('gives every page the repository and the license', async () => {
    for (const path of ['/', '/guide/getting-started', '/playground', '/reference/cli']) {
      const page = await open(path)
      const footer = path === '/' ? page.locator('.VPFooter') : page.getByTestId('site-footer')
      await footer.waitFor({ timeout: 10_000 })
      expect(await footer.textContent(), path).toMatch(/Apache License 2\.0/)
      expect(await footer.locator('a[href="https://github.com/kubevol/kubevol/blob/main/LICENSE"]').count(), path).toBe(1)
      expect(await page.locator('a[href="https://github.com/kubevol/kubevol"]').count(), path).toBeGreaterThan(0)
      await page.close()
    }
    expect(problems).toEqual([])
  })

  it('plays the playground tour to the end, drawing the operations, the backoff, the uncertain mount and each volume\'s timeline', async () => {
    const page = await open('/playground')
    await page.getByTestId('play-tour').waitFor({ timeout: 20_000 })
    const picture = page.getByTestId('reconcile-picture')
    const timeline = page.getByTestId('volume-timeline')
    // Watched from the start: a failed setUp waiting for its retry, then an uncertain mount.
    const backingOff = picture.locator('[data-testid="flow-row"][data-flow="backing-off"][data-operation="volume_mount"]').waitFor({ timeout: 60_000 })
    const uncertain = picture.locator('[data-testid="flow-row"][data-actual="uncertain"]').waitFor({ timeout: 60_000 })
    await page.getByTestId('play-tour').click()
    await backingOff
    expect(await picture.textContent()).toMatch(/volume_mount failed(, try \d)?: retry in \d\.\d s/)
    await shot(page, 'tour-1-backing-off')
    await uncertain
    await shot(page, 'tour-2-uncertain')
    await page.locator('[data-testid="tour"][data-state="done"]').waitFor({ timeout: 90_000 })
    expect(await page.locator('[data-testid="tour-step"][data-state="done"]').count()).toBe(5)
    expect(await page.locator('[data-testid="tour"]').textContent()).toMatch(/converged in \d+\.\d s/)

    // The timeline: the disk's lane has attach, device mount and setup; db's lane three failures,
    // three hatched waits with their measured length, and the mount that succeeded.
    const disk = timeline.locator('[data-testid="lane"][data-label="disk-1"]')
    for (const kind of ['attach', 'device mount', 'setup', 'device unmount', 'detach']) {
      expect(await disk.locator(`[data-testid="span"][data-level="step"][data-kind="${kind}"]`).count(), kind).toBeGreaterThan(0)
    }
    const db = timeline.locator('[data-testid="lane"][data-label="db/scratch"]')
    expect(await db.locator('[data-testid="span"][data-level="operation"][data-kind="mount"][data-failed="true"]').count()).toBe(3)
    expect(await db.locator('[data-testid="span"][data-level="operation"][data-kind="mount"][data-attempt="4"][data-failed="false"]').count()).toBe(1)
    const waits = await db.locator('.kv-tl-gap-label').allTextContents()
    expect(waits.map((w) => Math.round(Number(/([\d.]+) s/.exec(w)?.[1]) * 2) / 2)).toEqual([0.5, 1, 2])
    // Everything deleted: nothing desired, nothing left in the actual state.
    await expect.poll(() => picture.locator('[data-testid="flow-row"]').count()).toBe(0)
    await shot(page, 'tour-3-done')
    await page.setViewportSize({ width: 390, height: 844 })
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
    await shot(page, 'tour-4-done-phone')
    await page.close()
    expect(problems).toEqual([])
  }, 150_000)

  it('edits an example in the page: TypeScript loads at the first edit, the type checker flags a wrong step, an edit runs with its own output, long lines wrap, and a reset restores the original', async () => {
    const original = readFileSync(join(DOCS, 'examples', 'backoff.ts'), 'utf8')
    const page = await open('/concepts/operation-executor')
    const typescriptLoads: string[] = []
    page.on('request', (request) => {
      if (/\/typescript[^/]*\.js(\?|$)/.test(new URL(request.url()).pathname)) typescriptLoads.push(request.url())
    })
    const example = page.getByTestId('example-backoff')
    const check = example.getByTestId('example-check')
    const output = example.getByTestId('example-output')
    await example.getByTestId('example-edit').click()
    // Opening the editor loads no TypeScript: it comes with the first edit.
    await example.locator('.cm-content').waitFor({ timeout: 20_000 })
    expect(await check.getAttribute('data-state')).toBe('off')
    expect(await check.textContent()).toBe('types are checked against the packages from your first edit on')
    expect(typescriptLoads).toEqual([])

    /** Replaces the editor's text the way a reader would: select all, then type. */
    const type = async (text: string): Promise<void> => {
      await example.locator('.cm-content').click()
      await page.keyboard.press('Control+A')
      await page.keyboard.insertText(text)
    }

    // A step name that does not exist: the checker says so, on its line, with the packages' type.
    const wrongStep = original.replace("h.plugin.fail('setUp'", "h.plugin.fail('setup'")
    expect(wrongStep).not.toBe(original)
    await type(wrongStep)
    await example.locator('[data-testid="example-check"][data-state="done"][data-problems="1"]').waitFor({ timeout: 60_000 })
    expect(typescriptLoads).toHaveLength(1)
    expect(await check.textContent()).toMatch(/TypeScript 5\.\d+\.\d+: 1 type error/)
    const line = wrongStep.split('\n').findIndex((l) => l.includes("fail('setup'")) + 1
    expect(await example.getByTestId('example-problems').textContent()).toContain(`line ${line}: Argument of type '"setup"' is not assignable to parameter of type 'FakeStep'`)
    expect(await example.locator('.cm-lintRange-error').count()).toBeGreaterThan(0)
    await shot(page, 'example-edit-type-error')

    // Two failures instead of four, and a comment longer than the editor: it runs and prints two retries.
    const twoFailures = original.replace('times: 4,', 'times: 2,').replace('export async function run() {', `export async function run() {\n  // ${'a long line that must wrap, not be cut off '.repeat(8)}`)
    expect(twoFailures).not.toContain('times: 4,')
    await type(twoFailures)
    await example.locator('[data-testid="example-check"][data-state="done"][data-problems="0"]').waitFor({ timeout: 30_000 })
    await example.getByTestId('example-run').click()
    await example.locator('[data-testid="example-output"][data-state="done"][data-edited="true"]').waitFor({ timeout: 30_000 })
    const edited = (await output.textContent()) ?? ''
    expect(edited.match(/retry \d+ ms after the failure/g)).toHaveLength(2)
    expect(edited).toMatch(/mounted$/)

    // Long lines wrap at a phone width: the editor never scrolls sideways, so nothing is hidden.
    await page.setViewportSize({ width: 390, height: 844 })
    const scroller = example.locator('.cm-scroller')
    await expect.poll(() => scroller.evaluate((e) => e.scrollWidth - e.clientWidth)).toBeLessThanOrEqual(0)
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
    await shot(page, 'example-edit-phone')
    await page.setViewportSize({ width: 1280, height: 900 })

    // A run-time failure is shown as one, with its phase.
    await type("export async function run() {\n  throw new RangeError('no such disk')\n}\n")
    await example.getByTestId('example-run').click()
    await example.locator('[data-testid="example-output"][data-state="failed"]').waitFor({ timeout: 30_000 })
    expect(await output.textContent()).toBe('failed (run): run() threw RangeError: no such disk')

    // Back to the original: the reset button goes, and the example prints its four retries again.
    await example.getByTestId('example-reset').click()
    await example.getByTestId('example-reset').waitFor({ state: 'detached' })
    await example.getByTestId('example-run').click()
    await example.locator('[data-testid="example-output"][data-state="done"][data-edited="false"]').waitFor({ timeout: 30_000 })
    expect((await output.textContent())?.match(/retry \d+ ms after the failure/g)).toHaveLength(4)
    await page.close()
    expect(problems).toEqual([])
  }, 150_000)
})
