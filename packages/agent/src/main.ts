#!/usr/bin/env node
/**
 * The kubevol agent process: `node dist/main.js --mode=static --pod-manifest-path=/etc/kubevol/manifests`.
 * See `--help` for every option.
 */
import { runAgentProcess } from './process.js'

void runAgentProcess({ argv: process.argv.slice(2), env: process.env })
