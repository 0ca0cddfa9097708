// The examples are compiled, not only run: a type error in an example (or in the playground engine)
// fails the test suite, as it would fail a reader who copies it.
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { expect, it } from 'vitest'

const DOCS = fileURLToPath(new URL('..', import.meta.url))

it('the examples, the playground engine and the tests type-check', () => {
  const configFile = join(DOCS, 'tsconfig.json')
  const { config } = ts.readConfigFile(configFile, ts.sys.readFile)
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, DOCS)
  const program = ts.createProgram(parsed.fileNames, parsed.options)
  const problems = ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file && d.start !== undefined ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: ` : ''
    return `${where}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`
  })
  expect(parsed.fileNames.some((f) => f.includes('/examples/'))).toBe(true)
  expect(problems).toEqual([])
})
