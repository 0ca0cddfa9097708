/**
 * zod's English messages for zod/mini, which the configuration and the manifests are validated with:
 * the same zod (same checks, same issues) built from functions instead of methods, so the bundle the
 * image runs keeps only what is used (the agent holds about 3 MiB less than with zod's classic API,
 * which brings every method and locale). zod/mini has no messages of its own; this sets the English
 * ones, as importing the classic API did, so an issue reads as before (`Invalid input: expected
 * string, received number`).
 *
 * Imported for its effect by every module that validates (package.json's `sideEffects` names this
 * file, so a bundler keeps it).
 */
import { config } from 'zod/mini'
import en from 'zod/v4/locales/en.js'

config(en())
