// A command that cannot be carried out: its own module, so that what the
// commands use (login-file.ts) can throw it without importing command.ts,
// which imports them.

/** A command that cannot be carried out: exit 1 with its message, one line. */
export class CliFailure extends Error {}
