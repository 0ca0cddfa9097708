import { defineConfig } from 'vitepress'
import { LICENSE_LINE, REPOSITORY } from './site.js'
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
    // The repository, in the nav bar of every page; the license in every page's footer (SiteFooter.vue on the
    // pages with a sidebar, where VitePress shows no footer of its own).
    socialLinks: [{ icon: 'github', link: REPOSITORY, ariaLabel: 'kubevol on GitHub' }],
    footer: { message: LICENSE_LINE, copyright: `Source: <a href="${REPOSITORY}">${REPOSITORY.replace('https://', '')}</a>` },
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
