// The logger interface Basin code uses (Fastify's pino logger fits it, and
// tests pass a silent one), and the server's logger: pino's JSON lines,
// buffered in memory and written asynchronously (log-destination.ts). Never
// log secrets: keys, passwords, verifiers, Authorization or Cookie headers.
//
// Why buffered and asynchronous: pino's default destination makes one
// write(2) per line, synchronously, on the request's path; with an access
// line per request that was most of what logging cost. The price of a buffer
// is that lines sit in memory for a moment, so it is written out on every way
// out: flush() when the server stops, exitOnFatalErrors() for uncaught
// exceptions and unhandled rejections, and a synchronous write in the
// process's `exit` handler as the last resort.

import { type DestinationStream, type Logger as PinoLogger, pino } from 'pino';
import { LogDestination } from './log-destination.js';

export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

export const silentLogger: Logger = {
  info() {},
  warn() {},
  error() {},
  debug() {},
};

/** Header and field paths that pino replaces with "[Redacted]" wherever they are logged. */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["proxy-authorization"]',
  'headers.authorization',
  'headers.cookie',
  'headers["proxy-authorization"]',
  'password',
  'secret',
];

export interface ServerLogOptions {
  level: string;
  /** File descriptor to write to; 1 (stdout) by default. */
  fd?: number;
  /** Bytes written at once (a chunk, log-destination.ts): fewer, larger writes. */
  minLength?: number;
  /** Longest time a line waits in the buffer when traffic is low. */
  flushIntervalMs?: number;
}

export interface ServerLog {
  logger: PinoLogger;
  /** Writes out what is buffered; resolves once it is written. */
  flush(): Promise<void>;
  /** Writes out what is buffered, synchronously: for the last moments of the process. */
  flushSync(): void;
}

/** The server's logger: JSON lines to `fd` through a buffered, asynchronous destination. */
export function createServerLog(options: ServerLogOptions): ServerLog {
  const destination = new LogDestination({
    fd: options.fd ?? 1,
    minLength: options.minLength ?? 256 * 1024,
    flushIntervalMs: options.flushIntervalMs ?? 1000,
  });
  const logger = pino({ level: options.level, redact: REDACTED_PATHS }, destination);
  // The last resort: whatever way the process ends, what is held is written.
  process.on('exit', () => destination.flushSync());
  return {
    logger,
    flush: () => destination.flush(),
    flushSync: () => destination.flushSync(),
  };
}

/**
 * An uncaught exception or unhandled rejection ends the process (its state is
 * unknown), but not silently: the error is logged at `fatal`, and everything
 * buffered before it is written out first. The event loop still runs in these
 * handlers, so the flush waits for a write already under way (a synchronous
 * flush cannot: it would leave that write behind); if the flush has not
 * finished within `graceMs`, what is left is written synchronously, unless
 * that write is still under way (a reader that stopped reading): then what
 * follows it is lost rather than written out of order (log-destination.ts).
 */
export function exitOnFatalErrors(log: ServerLog, graceMs = 2000): void {
  let exiting = false;
  const fatal = (what: string, err: unknown) => {
    log.logger.fatal({ err }, what);
    if (exiting) return;
    exiting = true;
    process.exitCode = 1;
    const exit = () => {
      log.flushSync();
      process.exit(1);
    };
    setTimeout(exit, graceMs);
    void log.flush().then(exit);
  };
  process.on('uncaughtException', (err) => fatal('uncaught exception', err));
  process.on('unhandledRejection', (reason) => fatal('unhandled rejection', reason));
}

/** A pino logger on any stream (tests capture lines this way). */
export function createStreamLog(level: string, stream: DestinationStream): PinoLogger {
  return pino({ level, redact: REDACTED_PATHS }, stream);
}
