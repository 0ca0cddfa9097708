// Writes (default) or checks (`--check`) the API report of every entry point of every published
// package: `packages/<pkg>/api/<entry>.api.md`, made by API Extractor from the built declarations
// (`npm run build` first). A change to a package's public surface shows in review as a change to
// its report; `npm run api` refreshes them, and test/api-reports.test.ts fails when one is stale.
// `--model <dir>` also writes API Extractor's doc model (`<package>.<entry>.api.json`) there, which
// the docs' API reference is generated from.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { CompilerState, Extractor, ExtractorConfig } from '@microsoft/api-extractor'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
export const PACKAGES = ['core', 'adapter-mock', 'adapter-linux', 'agent', 'cli']

/** Every entry point of a package, from its `exports`: `{ subpath, dts, report }`. */
export function entryPoints(pkg) {
  const dir = join(ROOT, 'packages', pkg)
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  return Object.entries(manifest.exports)
    .filter(([subpath]) => subpath !== './package.json')
    .map(([subpath, conditions]) => {
      const entry = subpath === '.' ? 'index' : subpath.slice(2).replaceAll('/', '-')
      return { name: manifest.name, subpath, entry, dts: join(dir, conditions.types), report: `${entry}.api.md` }
    })
}

function configFor(pkg, point, temp, model) {
  const dir = join(ROOT, 'packages', pkg)
  return ExtractorConfig.prepare({
    configObjectFullPath: join(dir, 'api-extractor.json'),
    packageJsonFullPath: join(dir, 'package.json'),
    configObject: {
      projectFolder: dir,
      mainEntryPointFilePath: point.dts,
      // Core is compiled without Node's types (it runs in a browser too), so its names (EventTarget,
      // Node) must not meet Node's globals here either.
      compiler: { overrideTsconfig: { compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2023'], types: pkg === 'core' ? [] : ['node'], skipLibCheck: true } } },
      apiReport: { enabled: true, reportFileName: point.report, reportFolder: join(dir, 'api'), reportTempFolder: temp },
      docModel: model ? { enabled: true, apiJsonFilePath: join(model, `${pkg}.${point.entry}.api.json`) } : { enabled: false },
      dtsRollup: { enabled: false },
      tsdocMetadata: { enabled: false },
      messages: {
        compilerMessageReporting: { default: { logLevel: 'warning' } },
        extractorMessageReporting: {
          default: { logLevel: 'warning' },
          // A type an entry's signatures use but another entry exports (the engine's classes behind
          // VolumeManager's fields, say) is named in the report as a warning line, not a failure.
          'ae-forgotten-export': { logLevel: 'none', addToApiReportFile: true },
          // kubevol does not tag releases (@public/@beta) on each export: the entry point is the tag.
          'ae-missing-release-tag': { logLevel: 'none' },
          'ae-internal-missing-underscore': { logLevel: 'none' },
          // TSDoc coverage is STYLE.md's rule, reviewed in the sources; the report lists the surface.
          'ae-undocumented': { logLevel: 'none', addToApiReportFile: false },
          // A {@link} to a name another entry (or a module's internals) holds: TSDoc text, not surface.
          'ae-unresolved-link': { logLevel: 'none' },
        },
        tsdocMessageReporting: { default: { logLevel: 'none' } },
      },
    },
  })
}

/** Runs API Extractor on every entry; returns the reports that differ from the checked-in ones. */
export function runApiReports({ check = false, model, quiet = false } = {}) {
  const temp = mkdtempSync(join(tmpdir(), 'kubevol-api-'))
  const stale = []
  const problems = []
  try {
    if (model) mkdirSync(model, { recursive: true })
    for (const pkg of PACKAGES) {
      const points = entryPoints(pkg)
      mkdirSync(join(ROOT, 'packages', pkg, 'api'), { recursive: true })
      const configs = points.map((p) => configFor(pkg, p, temp, model))
      // One compiler for the package's entries: each entry point alone would re-read the same program.
      const compilerState = CompilerState.create(configs[0], { additionalEntryPoints: points.map((p) => p.dts) })
      points.forEach((point, i) => {
        const result = Extractor.invoke(configs[i], {
          localBuild: !check,
          compilerState,
          showVerboseMessages: false,
          messageCallback: (message) => {
            if (message.category !== 'console' && (message.logLevel === 'warning' || message.logLevel === 'error')) problems.push(`${pkg}/${point.report}: ${message.text}`)
            message.handled = true
          },
        })
        if (result.apiReportChanged) stale.push(`packages/${pkg}/api/${point.report}`)
        if (!quiet) console.log(`${point.name}${point.subpath === '.' ? '' : point.subpath.slice(1)}: packages/${pkg}/api/${point.report}${result.apiReportChanged ? (check ? ' (stale)' : ' (updated)') : ''}`)
      })
    }
  } finally {
    rmSync(temp, { recursive: true, force: true })
  }
  return { stale, problems }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const check = process.argv.includes('--check')
  const modelAt = process.argv.indexOf('--model')
  const { stale, problems } = runApiReports({ check, model: modelAt > 0 ? process.argv[modelAt + 1] : undefined })
  for (const p of problems) console.error(`warning: ${p}`)
  if (check && stale.length > 0) {
    console.error(`API reports out of date: ${stale.join(', ')}. Run \`npm run build && npm run api\` and commit the reports.`)
    process.exitCode = 1
  }
  if (problems.length > 0) process.exitCode = 1
}
