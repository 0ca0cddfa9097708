#!/usr/bin/env node
/**
 * The `kubevol` command. `kubevol --help` lists the commands.
 */
import { runCli } from './cli.js'

// `kubevol status | head`: a closed pipe ends the command quietly.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0)
  throw err
})

const code = await runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  isTTY: Boolean(process.stdout.isTTY) && !process.env.NO_COLOR,
  env: process.env,
  cwd: process.cwd(),
})
process.exitCode = code
// A handle left open (a watch, a timer) must not keep a finished command alive.
setTimeout(() => process.exit(code), 200).unref()
