import { describe, expect, it } from 'vitest'
import type { Pod } from '../api/kubernetes.js'
import { containerResourceValue, formatMap, goQuote, podFieldValue } from './downward-api-fields.js'

const pod: Pod = {
  metadata: {
    name: 'web',
    namespace: 'shop',
    uid: 'u-1',
    labels: { tier: 'front', app: 'web', constructor: 'yes' },
    annotations: { 'example.com/Note': 'say "hi"\n' },
  },
  spec: {
    nodeName: 'node-1',
    serviceAccountName: 'builder',
    containers: [
      { name: 'main', resources: { limits: { cpu: '500m', memory: '128Mi' }, requests: { cpu: '250m' } } },
      { name: 'bare' },
    ],
    initContainers: [{ name: 'init', resources: { requests: { 'ephemeral-storage': '1Gi' } } }],
  },
}

describe('podFieldValue', () => {
  it.each([
    { fieldPath: 'metadata.name', value: 'web' },
    { fieldPath: 'metadata.namespace', value: 'shop' },
    { fieldPath: 'metadata.uid', value: 'u-1' },
    { fieldPath: 'metadata.labels', value: 'app="web"\nconstructor="yes"\ntier="front"' },
    { fieldPath: 'metadata.annotations', value: 'example.com/Note="say \\"hi\\"\\n"' },
    { fieldPath: "metadata.labels['tier']", value: 'front' },
    { fieldPath: "metadata.labels['missing']", value: '' },
    { fieldPath: "metadata.labels['constructor']", value: 'yes' },
    { fieldPath: "metadata.annotations['example.com/Note']", value: 'say "hi"\n' },
    { fieldPath: 'spec.nodeName', value: 'node-1' },
    { fieldPath: 'spec.serviceAccountName', value: 'builder' },
  ])('reads $fieldPath', ({ fieldPath, value }) => {
    expect(podFieldValue(pod, fieldPath)).toBe(value)
  })

  it('renders absent maps as empty files and absent prototype keys as ""', () => {
    const bare: Pod = { metadata: { name: 'x' } }
    expect(podFieldValue(bare, 'metadata.labels')).toBe('')
    expect(podFieldValue(bare, "metadata.annotations['toString']")).toBe('')
  })

  it.each([
    { fieldPath: 'status.podIP', error: 'unsupported fieldPath: status.podIP' },
    { fieldPath: 'metadata.generation', error: 'unsupported fieldPath: metadata.generation' },
    { fieldPath: "metadata.name['x']", error: `fieldPath "metadata.name['x']" does not support subscript` },
    { fieldPath: "metadata.labels['-bad-']", error: "invalid key subscript in metadata.labels['-bad-']: name part must consist of alphanumeric characters" },
    { fieldPath: "metadata.labels['a/b/c']", error: "invalid key subscript in metadata.labels['a/b/c']: a qualified name must be" },
    { fieldPath: "metadata.annotations['/x']", error: "invalid key subscript in metadata.annotations['/x']: prefix part must be non-empty" },
  ])('rejects $fieldPath', ({ fieldPath, error }) => {
    expect(() => podFieldValue(pod, fieldPath)).toThrow(error)
  })
})

describe('goQuote and formatMap', () => {
  it.each([
    { name: 'plain text', text: 'abc', quoted: '"abc"' },
    { name: 'quotes and backslashes', text: 'a"b\\c', quoted: '"a\\"b\\\\c"' },
    { name: 'named control characters', text: '\x07\b\f\n\r\t\v', quoted: '"\\a\\b\\f\\n\\r\\t\\v"' },
    { name: 'other control characters', text: '\x01\x7f', quoted: '"\\x01\\x7f"' },
    { name: 'printable unicode', text: 'größe 日本 🚀', quoted: '"größe 日本 🚀"' },
    { name: 'non-printable unicode', text: '\u00a0\u200b\u2028', quoted: '"\\u00a0\\u200b\\u2028"' },
    { name: 'a private use astral character', text: '\u{f0000}', quoted: '"\\U000f0000"' },
  ])('quotes $name as Go does', ({ text, quoted }) => {
    expect(goQuote(text)).toBe(quoted)
  })

  it('sorts keys', () => {
    expect(formatMap({ b: '2', a: '1' })).toBe('a="1"\nb="2"')
  })
})

describe('containerResourceValue', () => {
  const allocatable = { cpu: '4', memory: '8Gi', 'ephemeral-storage': '100Gi' }
  it.each([
    { resource: 'limits.cpu', container: 'main', divisor: undefined, value: '1' },
    { resource: 'limits.cpu', container: 'main', divisor: '1m', value: '500' },
    { resource: 'limits.cpu', container: 'main', divisor: '100m', value: '5' },
    { resource: 'requests.cpu', container: 'main', divisor: '1m', value: '250' },
    { resource: 'limits.memory', container: 'main', divisor: undefined, value: String(128 * 2 ** 20) },
    { resource: 'limits.memory', container: 'main', divisor: '1Mi', value: '128' },
    { resource: 'limits.memory', container: 'main', divisor: '1M', value: '135' },
    { resource: 'requests.memory', container: 'main', divisor: '1Mi', value: '128' },
    { resource: 'limits.cpu', container: 'bare', divisor: undefined, value: '4' },
    { resource: 'limits.memory', container: 'bare', divisor: '1Gi', value: '8' },
    { resource: 'requests.cpu', container: 'bare', divisor: undefined, value: '0' },
    { resource: 'requests.ephemeral-storage', container: 'init', divisor: '1Mi', value: '1024' },
    { resource: 'limits.ephemeral-storage', container: 'init', divisor: '1Gi', value: '100' },
    { resource: 'requests.hugepages-2Mi', container: 'main', divisor: undefined, value: '0' },
  ])('$resource of $container with divisor $divisor is $value', ({ resource, container, divisor, value }) => {
    const selector = { containerName: container, resource, ...(divisor ? { divisor } : {}) }
    expect(containerResourceValue(pod, selector, allocatable)).toBe(value)
  })

  it('rounds up from exact millicores (0.1 + float noise would give 101)', () => {
    const p: Pod = { metadata: {}, spec: { containers: [{ name: 'c', resources: { limits: { cpu: '0.1' } } }] } }
    expect(containerResourceValue(p, { containerName: 'c', resource: 'limits.cpu', divisor: '1m' })).toBe('100')
  })

  it.each([
    { name: 'an unknown container', selector: { containerName: 'nope', resource: 'limits.cpu' }, error: 'container nope not found' },
    { name: 'no container name', selector: { resource: 'limits.cpu' }, error: 'resourceFieldRef "limits.cpu" needs a containerName in a volume' },
    { name: 'an unknown resource', selector: { containerName: 'main', resource: 'limits.gpu' }, error: 'unsupported container resource : limits.gpu' },
    { name: 'a zero divisor', selector: { containerName: 'main', resource: 'limits.cpu', divisor: '0' }, error: 'invalid divisor "0" for limits.cpu' },
    { name: 'a bad divisor', selector: { containerName: 'main', resource: 'limits.cpu', divisor: 'lots' }, error: 'invalid quantity "lots"' },
  ])('rejects $name', ({ selector, error }) => {
    expect(() => containerResourceValue(pod, selector, allocatable)).toThrow(error)
  })

  it('fails on an unset limit when the node allocatable is not known', () => {
    expect(() => containerResourceValue(pod, { containerName: 'bare', resource: 'limits.memory' })).toThrow(
      'limits.memory of container bare is not set and the node allocatable memory is not known',
    )
  })
})
