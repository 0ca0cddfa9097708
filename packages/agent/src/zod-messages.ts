/**
 * zod's English messages for zod/mini, which the configuration and the manifests are validated with:
 * the same zod (same checks, same issues) built from functions instead of methods, so the bundle the
 * image runs keeps only what is used (the agent holds about 3 MiB less than with zod's classic API,
 * which brings every method and locale). zod/mini has no messages of its own; this sets the English
 * ones, as importing the classic API did, so an issue reads as before (`Invalid input: expected
 * string, received number`).
 */
import { config } from 'zod/mini'
import en from 'zod/v4/locales/en.js'

let english = false

/**
 * Returns `schema`, having set zod's English messages (once, for the process: zod's configuration is
 * global, as the classic API's import set it). Wrapping each schema, rather than importing this module
 * for its effect, keeps the call in a bundle: the package is marked free of side effects.
 */
export function withEnglishMessages<T>(schema: T): T {
  if (!english) {
    config(en())
    english = true
  }
  return schema
}
