// The page of an entry point's API reference: `@kubevol/core/testing` → `api-core-testing`.
export const apiPageName = (id) => `api-${id.replace(/^@kubevol\//, '').replaceAll('/', '-')}`
