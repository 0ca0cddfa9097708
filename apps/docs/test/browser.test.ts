/**
 * The site in a real browser: build it, serve it on localhost, open every page of the sidebar in
 * headless Chromium, and use the playground. Fails on any console error, failed request or broken
 * internal link. Screenshots go to apps/docs/test-artifacts/.
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
  async function open(path: string): Promise<Page> {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
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

  const shot = (page: Page, name: string, fullPage = true) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage })

  it('serves every page with no console error, failed request or broken internal link', async () => {
    const links = new Map<string, string>() // target → first page linking to it
    const timings: string[] = []
    for (const path of pages) {
      const page = await open(path)
      await expect.poll(() => page.locator('.VPContent').count(), { timeout: 10_000 }).toBe(1)
      const hrefs = await page.$$eval('a[href]', (anchors) => anchors.map((a) => (a as HTMLAnchorElement).href))
      for (const href of hrefs) {
        const url = new URL(href)
        if (url.origin === base && !links.has(url.pathname)) links.set(url.pathname, path)
      }
      const started = Date.now()
      await shot(page, `page${path === '/' ? '-home' : path.replace(/\//g, '-')}`, false)
      timings.push(`${path} ${Date.now() - started} ms`)
      await page.close()
    }
    const broken = [...links].filter(([target]) => !builtFile(target)).map(([target, from]) => `${from} links to ${target}, which is not built`)
    expect(broken).toEqual([])
    expect(links.size).toBeGreaterThan(pages.length)
    console.log(timings.join('\n'))
    expect(problems).toEqual([])
  }, 120_000)

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
    await shot(page, 'home-live-mounted', false)
    await page.setViewportSize({ width: 390, height: 844 })
    await shot(page, 'home-live-phone', true)
    await page.locator('[data-testid="hero-live"][data-phase="empty"]').waitFor({ timeout: 20_000 })
    expect(await live.locator('[data-testid="hero-mounted"]').count()).toBe(0)
    await page.close()
    expect(problems).toEqual([])
  })

  it.each(['/concepts/measured', '/concepts/never-does'])('shows %s at a phone width, charts and tables inside the screen', async (path) => {
    const page = await open(path)
    await page.setViewportSize({ width: 390, height: 844 })
    await page.waitForLoadState('networkidle')
    const charts = await page.$$eval('img[data-chart]', (imgs) => imgs.map((i) => ({ loaded: (i as HTMLImageElement).naturalWidth > 0, right: i.getBoundingClientRect().right })))
    for (const chart of charts) expect(chart.loaded && chart.right <= 390).toBe(true)
    expect(charts).toHaveLength(path === '/concepts/measured' ? 5 : 0)
    await shot(page, `phone${path.replace(/\//g, '-')}`)
    await page.close()
    expect(problems).toEqual([])
  })

  it('runs the examples embedded in the concept pages', async () => {
    const page = await open('/concepts/operation-executor')
    const example = page.getByTestId('example-backoff')
    await example.getByTestId('example-run').click()
    await example.locator('[data-testid="example-output"][data-state="done"]').waitFor({ timeout: 20_000 })
    expect(await example.getByTestId('example-output').textContent()).toContain('retry')
    await shot(page, 'example-backoff')
    await page.close()
    expect(problems).toEqual([])
  })
})
