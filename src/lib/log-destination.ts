// Where the server's log lines go: a pino destination that keeps lines in
// memory and writes them with one asynchronous write (in libuv's threadpool,
// off the event loop) once `minLength` bytes are waiting, or every
// `flushIntervalMs` when traffic is low. So a request pays for appending its
// line to an array, never for a system call, and a slow consumer of stdout
// (a full pipe) blocks a threadpool thread, not the requests.
//
// pino.destination({ sync: false, minLength }) (sonic-boom) does the same job,
// and was measured first: it keeps the buffer as one growing string and
// takes its UTF-8 length on every line (`Buffer.byteLength` of up to 16 KB),
// then converts the written string to a Buffer a second time when a write
// completes; at one access line per request that cost ~2 µs of CPU a line,
// against ~1 µs here (bench/README.md). This class does the minimum: an
// array of lines and a running count of UTF-16 units (the same as bytes for
// the ASCII of log lines; only used to decide when to write), joined and
// encoded once per write.
//
// Failures: a partial write writes the rest; EAGAIN (a non-blocking pipe
// that is full) retries after a pause; any other error (the reader went away:
// EPIPE, a closed fd) drops what is buffered and every later line, since a
// logger cannot report its own failure anywhere but stderr, once.

import { write, writeSync } from 'node:fs';

export interface LogDestinationOptions {
  /** The file descriptor lines go to (1: stdout). */
  fd: number;
  /** Bytes (roughly) held before a write. */
  minLength: number;
  /** Longest time a line waits when fewer than minLength bytes are held. */
  flushIntervalMs: number;
  /** Bytes held at most while writes cannot keep up; lines beyond are dropped and counted. */
  maxLength?: number;
}

const RETRY_MS = 50;
const SYNC_PATIENCE_MS = 2_000;
const PAUSE = new Int32Array(new SharedArrayBuffer(4));

export class LogDestination {
  private lines: string[] = [];
  private held = 0;
  /** The buffer an asynchronous write has under way, and how much of it is written. */
  private inFlight: Buffer | null = null;
  private failed = false;
  private dropped = 0;
  private waiters: (() => void)[] = [];
  private readonly timer: NodeJS.Timeout;
  private readonly maxLength: number;

  constructor(private readonly o: LogDestinationOptions) {
    this.maxLength = o.maxLength ?? 64 * 1024 * 1024;
    this.timer = setInterval(() => this.writeOut(), o.flushIntervalMs);
    this.timer.unref();
  }

  /** pino calls this with each line (newline included). */
  write(line: string): boolean {
    if (this.failed) return false;
    if (this.held > this.maxLength) {
      this.dropped++;
      return false;
    }
    this.lines.push(line);
    this.held += line.length;
    if (this.held >= this.o.minLength && this.inFlight === null) this.writeOut();
    return true;
  }

  /**
   * Resolves once every line written so far has been written out (or writing
   * failed). `done`: for pino's logger.flush(cb), which calls it this way.
   */
  flush(done?: () => void): Promise<void> {
    const flushed =
      this.inFlight === null && this.held === 0
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            this.waiters.push(resolve);
            if (this.inFlight === null) this.writeOut();
          });
    if (done) void flushed.then(done);
    return flushed;
  }

  /**
   * Writes what is held, synchronously: for the process's last moments,
   * when the event loop will not run again. A write already under way in the
   * threadpool cannot be waited for here; flush() can, and is used wherever
   * the loop still runs (shutdown, fatal errors).
   */
  flushSync(): void {
    if (this.failed || this.held === 0) return;
    let buf = this.take();
    // A full non-blocking pipe: wait for its reader, but not for ever.
    const deadline = Date.now() + SYNC_PATIENCE_MS;
    while (buf.length > 0) {
      try {
        buf = buf.subarray(writeSync(this.o.fd, buf));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EAGAIN' && Date.now() < deadline) {
          Atomics.wait(PAUSE, 0, 0, 10);
          continue;
        }
        this.fail(err);
        return;
      }
    }
  }

  private take(): Buffer {
    const data = this.lines.length === 1 ? (this.lines[0] as string) : this.lines.join('');
    this.lines = [];
    this.held = 0;
    if (this.dropped > 0) {
      const note = `{"level":40,"time":${Date.now()},"msg":"log lines dropped: writes could not keep up","dropped":${this.dropped}}\n`;
      this.dropped = 0;
      return Buffer.from(note + data, 'utf8');
    }
    return Buffer.from(data, 'utf8');
  }

  private writeOut(): void {
    if (this.inFlight !== null || this.failed) return;
    if (this.held === 0) {
      this.settle();
      return;
    }
    this.send(this.take());
  }

  private send(buf: Buffer): void {
    this.inFlight = buf;
    write(this.o.fd, buf, 0, buf.length, null, (err, n) => {
      this.inFlight = null;
      if (err) {
        if (err.code === 'EAGAIN') {
          setTimeout(() => this.send(buf), RETRY_MS).unref();
          this.inFlight = buf;
          return;
        }
        this.fail(err);
        return;
      }
      if (n < buf.length) {
        this.send(buf.subarray(n));
        return;
      }
      if (this.held >= this.o.minLength || this.waiters.length > 0) this.writeOut();
    });
  }

  /** Resolves the flush() promises once nothing is held or under way. */
  private settle(): void {
    if (this.inFlight !== null || this.held > 0) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  private fail(err: unknown): void {
    this.failed = true;
    this.lines = [];
    this.held = 0;
    clearInterval(this.timer);
    process.stderr.write(`basin: writing the log failed, logging stops: ${String(err)}\n`);
    this.settle();
  }
}
