#!/usr/bin/env node
// The `basin` command (the package's bin). All the work is in run-cli.ts,
// which tests call in process; this file hands it the process: its streams,
// a terminal for status lines when there is one, standard input, and the
// means to run psql.

import { spawn } from 'node:child_process';
import { text } from 'node:stream/consumers';
import { CliFailure } from './command.js';
import { runCli } from './run-cli.js';

process.exitCode = await runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  // A status line only where a person watches: both streams on a terminal.
  ...(process.stdout.isTTY && process.stderr.isTTY ? { statusTerminal: process.stderr } : {}),
  ...(process.stdin.isTTY ? {} : { readStdin: () => text(process.stdin) }),
  exec,
});

/**
 * Runs `file` on this terminal and resolves with its exit status. Ctrl-C is
 * the program's (psql cancels the query), not a reason for basin to die.
 */
function exec(file: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const ignore = () => {};
  process.on('SIGINT', ignore);
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: 'inherit', env });
    child.on('error', (err: NodeJS.ErrnoException) => {
      process.off('SIGINT', ignore);
      reject(
        err.code === 'ENOENT' ? new CliFailure(`${file} is not installed (or not on PATH).`) : err,
      );
    });
    child.on('exit', (code, signal) => {
      process.off('SIGINT', ignore);
      resolve(code ?? (signal ? 128 : 1));
    });
  });
}
