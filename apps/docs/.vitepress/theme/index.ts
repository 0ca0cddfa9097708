import type { Theme } from 'vitepress'
import DefaultTheme from 'vitepress/theme'
import Playground from './Playground.vue'
import RunExample from './RunExample.vue'
import './style.css'

export default {
  extends: DefaultTheme,
  enhanceApp({ app }) {
    app.component('Playground', Playground)
    app.component('RunExample', RunExample)
  },
} satisfies Theme
