import type { Theme } from 'vitepress'
import DefaultTheme from 'vitepress/theme'
import Layout from './Layout.vue'
import Playground from './Playground.vue'
import RunExample from './RunExample.vue'
import './style.css'

export default {
  extends: DefaultTheme,
  // The home page's hero shows the engine running (HeroLive), not a picture of it.
  Layout,
  enhanceApp({ app }) {
    app.component('Playground', Playground)
    app.component('RunExample', RunExample)
  },
} satisfies Theme
