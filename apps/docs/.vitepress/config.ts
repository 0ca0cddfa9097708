import { defineConfig } from 'vitepress'
import { sidebar } from './sidebar.js'

// Everything the site needs is in the repository: no fonts, scripts or images from elsewhere.
export default defineConfig({
  title: 'kubevol',
  description: "The Kubernetes kubelet's VolumeManager, rebuilt in TypeScript, explained by running it.",
  srcDir: 'pages',
  cleanUrls: false,
  lastUpdated: false,
  head: [['link', { rel: 'icon', type: 'image/svg+xml', href: '/favicon.svg' }]],
  // A broken internal link fails the build.
  ignoreDeadLinks: false,
  themeConfig: {
    nav: [
      { text: 'Getting started', link: '/guide/getting-started' },
      { text: 'Concepts', link: '/concepts/desired-and-actual-state' },
      { text: 'How-to', link: '/howto/run-on-a-node' },
      { text: 'Reference', link: '/reference/cli' },
      { text: 'Playground', link: '/playground' },
    ],
    sidebar,
    search: { provider: 'local' },
    outline: { level: [2, 3] },
  },
  vite: {
    // Use the workspace packages' TypeScript sources directly: the playground needs no build step.
    resolve: { conditions: ['@kubevol/source'] },
    ssr: { resolve: { conditions: ['@kubevol/source'] } },
    // The editor's chunk (the lib files and declarations TypeScript checks an edit against, about
    // 2.8 MB of text) loads only when a reader opens an example's editor.
    build: { chunkSizeWarningLimit: 3000 },
  },
})
