import { expect, it } from 'vitest'
import * as api from './index.js'

it('keeps its public names', () => {
  expect(Object.keys(api).sort()).toMatchSnapshot()
})
