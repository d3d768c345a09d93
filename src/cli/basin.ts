#!/usr/bin/env node
// The `basin` administration command (the package's bin). All the work is in
// run-cli.ts, which tests call in process.

import { runCli } from './run-cli.js';

process.exitCode = await runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
});
