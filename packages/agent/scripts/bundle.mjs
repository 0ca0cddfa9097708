// The agent process as one minified ES module (plus the chunks loaded on demand), for the image:
// `node dist/bundle/main.js` is `node dist/main.js` holding less. Each of the ~200 files the agent
// loads is a module record, its source text and its functions' metadata in V8; zod alone is 450 KB
// of source. Bundled and minified, the agent with no pods peaks about 7 MiB lower (bench/README.md,
// "The agent's fixed cost"). Runs after `tsc -b` (the package's build); reads dist/, writes dist/bundle/.
//
// What stays outside the bundle, loaded from node_modules as before:
// - @kubernetes/client-node: API mode only; its import stays in the API-mode chunk, loaded by
//   agent.ts's dynamic import (static mode never loads it).
// - koffi, @grpc/grpc-js, @grpc/proto-loader: loaded by adapter-linux through createRequire at first
//   use (koffi is a native library; the I/O worker loads it by path).
//
// Files that find things next to themselves (adapter-linux's proto directory, koffi's path for the I/O
// worker) do so through import.meta.url; in the bundle that is rewritten to the file's own URL, taken
// relative to the bundle, so they find what they found before wherever the packages are installed
// side by side (the repository, the image, node_modules/@kubevol).
import { readFile } from 'node:fs/promises'
import { dirname, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const agentDir = fileURLToPath(new URL('..', import.meta.url))
const outdir = `${agentDir}dist/bundle`

// agent's services/host.ts and csi-drivers.ts import adapter-linux through a variable, so that the
// agent runs without it; a bundler leaves such an import alone, and adapter-linux would then load
// its own copy of @kubevol/core beside the bundle's. Here the import is written out, so it is bundled
// (in a chunk of its own, still loaded only for the Linux host or CSI); without adapter-linux
// installed, the bundle fails to build rather than to run.
const ADAPTER_IMPORT = 'await import(specifier)'
let adapterImports = 0

/** @type {import('esbuild').Plugin} */
const sameAsUnbundled = {
  name: 'same-as-unbundled',
  setup(b) {
    b.onLoad({ filter: /[\\/]dist[\\/].*\.js$/ }, async (args) => {
      let text = await readFile(args.path, 'utf8')
      if (text.includes("const specifier = '@kubevol/adapter-linux'") && text.includes(ADAPTER_IMPORT)) {
        text = text.replace(ADAPTER_IMPORT, "await import('@kubevol/adapter-linux')")
        adapterImports++
      }
      if (text.includes('import.meta.url')) {
        const own = relative(outdir, args.path).split('\\').join('/')
        text = text.replaceAll('import.meta.url', `new URL(${JSON.stringify(own)}, import.meta.url).href`)
      }
      return { contents: text, loader: 'js', resolveDir: dirname(args.path) }
    })
  },
}

const result = await build({
  entryPoints: { main: `${agentDir}dist/main.js` },
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  minifyWhitespace: true,
  minifySyntax: true,
  // Stack traces and error messages keep the names of functions and classes (`ZodError`, pino's).
  legalComments: 'none',
  logLevel: 'warning',
  external: ['@kubernetes/client-node', 'koffi', '@grpc/grpc-js', '@grpc/proto-loader'],
  // The CommonJS packages bundled (pino, prom-client, yaml) call require() for node's modules.
  banner: { js: "import { createRequire as __kubevolRequire } from 'node:module'; const require = __kubevolRequire(import.meta.url);" },
  plugins: [sameAsUnbundled],
})

// A warning here is a bundle that differs from the code it was made from (an import dropped as free of
// side effects, a require that cannot be resolved): fail the build instead.
if (result.warnings.length > 0) throw new Error(`the bundle has ${result.warnings.length} warning(s), printed above`)
if (adapterImports !== 2) {
  throw new Error(`expected the 2 imports of @kubevol/adapter-linux through a variable (host.ts, csi-drivers.ts), found ${adapterImports}: update scripts/bundle.mjs`)
}
