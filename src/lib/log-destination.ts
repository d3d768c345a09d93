// Where the server's log lines go: a pino destination that keeps lines in
// memory and writes them with one asynchronous write (in libuv's threadpool,
// off the event loop) once a chunk of `minLength` bytes is full, or every
// `flushIntervalMs` when traffic is low. So a request pays for copying its
// line into a buffer, never for a system call, and a slow consumer of stdout
// (a full pipe) blocks a threadpool thread, not the requests.
//
// What a line costs, measured (bench/README.md, service-get): at one access
// line per request, the destination is the largest part of what Basin adds to
// a polled GET. So:
// - Each line is encoded once, straight into a chunk (`Buffer.write` into a
//   preallocated Buffer): no array of strings joined and converted again
//   (~0.25 µs a line less). pino.destination({ sync: false }) (sonic-boom),
//   measured first, kept one growing string, took its UTF-8 length on every
//   line and converted each write to a Buffer a second time.
// - Chunks are reused once written: a fresh large Buffer per write is an
//   allocation outside V8's heap, which the garbage collector then has to
//   account for (it showed as ~0.15 µs a line).
// - Chunks are large (256 KiB by default, logger.ts), because handing a write
//   to the threadpool and back costs ~35-40 µs of CPU on the development VM
//   (waking a thread, then the event loop: 47 µs of CPU for an asynchronous
//   write of 16 KiB against 11 µs for the same write done synchronously):
//   ~0.16 µs a line at 64 KiB, ~0.04 at 256 KiB (a second of lines at
//   ~1,100 requests/s). Writing synchronously would spare it, but a write
//   to a file can wait for the disk (dirty page throttling while PostgreSQL
//   checkpoints on the same disk), and then every request would wait too.
//   Chunks that filled while a write was under way go out together in the
//   next one (writev).
//
// Failures: a partial write writes the rest; EAGAIN (a non-blocking pipe
// that is full) retries after a pause; any other error (the reader went away:
// EPIPE, a closed fd) drops what is buffered and every later line, since a
// logger cannot report its own failure anywhere but stderr, once.

import { writev, writevSync } from 'node:fs';

export interface LogDestinationOptions {
  /** The file descriptor lines go to (1: stdout). */
  fd: number;
  /** Bytes of a chunk: a write happens when one is full. */
  minLength: number;
  /** Longest time a line waits when fewer than minLength bytes are held. */
  flushIntervalMs: number;
  /** Bytes held at most while writes cannot keep up; lines beyond are dropped and counted. */
  maxLength?: number;
}

const RETRY_MS = 50;
const SYNC_PATIENCE_MS = 2_000;
const PAUSE = new Int32Array(new SharedArrayBuffer(4));
/** Written-out chunks kept for reuse: one being filled while one is written, and a spare. */
const SPARE_CHUNKS = 2;

export class LogDestination {
  /** The chunk lines are copied into, and how much of it is used. */
  private chunk: Buffer;
  private used = 0;
  /** Filled chunks (the used part of each) waiting for the write under way to finish. */
  private ready: Buffer[] = [];
  /** Bytes held: in `ready` and in `chunk`. */
  private held = 0;
  /** The buffers an asynchronous write has under way (what is left of them). */
  private inFlight: Buffer[] | null = null;
  private readonly spare: Buffer[] = [];
  /** The chunks' memory, to tell them from other Buffers (which may share a pool). */
  private readonly chunks = new WeakSet<ArrayBufferLike>();
  private failed = false;
  private dropped = 0;
  private waiters: (() => void)[] = [];
  private readonly timer: NodeJS.Timeout;
  private readonly maxLength: number;

  constructor(private readonly o: LogDestinationOptions) {
    this.maxLength = o.maxLength ?? 64 * 1024 * 1024;
    this.chunk = this.newChunk();
    this.timer = setInterval(() => this.writeOut(true), o.flushIntervalMs);
    this.timer.unref();
  }

  /** pino calls this with each line (newline included). */
  write(line: string): boolean {
    if (this.failed) return false;
    if (this.held > this.maxLength) {
      this.dropped++;
      return false;
    }
    // At most 3 bytes of UTF-8 per UTF-16 unit: when the line may not fit, a
    // new chunk (a line longer than a chunk is a Buffer of its own).
    const most = line.length * 3;
    if (most > this.chunk.length - this.used) {
      this.seal();
      if (most > this.chunk.length) {
        const own = Buffer.from(line, 'utf8');
        this.ready.push(own);
        this.held += own.length;
        if (this.inFlight === null) this.writeOut(false);
        return true;
      }
    }
    const n = this.chunk.write(line, this.used);
    this.used += n;
    this.held += n;
    if (this.ready.length > 0 && this.inFlight === null) this.writeOut(false);
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
            if (this.inFlight === null) this.writeOut(true);
          });
    if (done) void flushed.then(done);
    return flushed;
  }

  /**
   * Writes what is held, synchronously: for the process's last moments,
   * when the event loop will not run again (and pino calls it after every
   * `fatal` line). Only when no write is under way: one in the threadpool
   * cannot be waited for here, and may have written part of its chunk, so
   * writing what follows it now would put lines out of order (the rest of the
   * chunk after them). Then the lines stay held for flush(), which waits for
   * it and is used wherever the loop still runs (shutdown, fatal errors).
   */
  flushSync(): void {
    if (this.failed || this.held === 0 || this.inFlight !== null) return;
    let bufs = this.take(true);
    // A full non-blocking pipe: wait for its reader, but not for ever.
    const deadline = Date.now() + SYNC_PATIENCE_MS;
    while (bufs.length > 0) {
      try {
        bufs = skip(bufs, writevSync(this.o.fd, bufs));
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

  /** The used part of the chunk joins `ready`; lines go to a fresh (or reused) chunk from now on. */
  private seal(): void {
    if (this.used === 0) return;
    this.ready.push(this.chunk.subarray(0, this.used));
    this.chunk = this.spare.pop() ?? this.newChunk();
    this.used = 0;
  }

  private newChunk(): Buffer {
    const chunk = Buffer.allocUnsafeSlow(this.o.minLength);
    this.chunks.add(chunk.buffer);
    return chunk;
  }

  /**
   * What is held, in order, with the note of dropped lines first: the full
   * chunks, and with `all` the chunk being filled too.
   */
  private take(all: boolean): Buffer[] {
    if (all) this.seal();
    const out = this.ready;
    this.ready = [];
    this.held = this.used;
    if (this.dropped > 0) {
      const note = `{"level":40,"time":${Date.now()},"msg":"log lines dropped: writes could not keep up","dropped":${this.dropped}}\n`;
      this.dropped = 0;
      out.unshift(Buffer.from(note, 'utf8'));
    }
    return out;
  }

  /** Starts a write of the full chunks, or with `all` of everything held. */
  private writeOut(all: boolean): void {
    if (this.inFlight !== null || this.failed) return;
    if (this.held === 0) {
      this.settle();
      return;
    }
    const bufs = this.take(all);
    if (bufs.length > 0) this.send(bufs);
  }

  private send(bufs: Buffer[]): void {
    this.inFlight = bufs;
    writev(this.o.fd, bufs, null, (err, n) => {
      this.inFlight = null;
      if (err) {
        if (err.code === 'EAGAIN') {
          setTimeout(() => this.send(bufs), RETRY_MS).unref();
          this.inFlight = bufs;
          return;
        }
        this.fail(err);
        return;
      }
      const rest = skip(bufs, n);
      if (rest.length > 0) {
        this.send(rest);
        return;
      }
      this.recycle(bufs);
      if (this.waiters.length > 0) this.writeOut(true);
      else if (this.ready.length > 0) this.writeOut(false);
    });
  }

  /**
   * Chunks whose write is done go back to the spares. A chunk is written once
   * (what a partial write left is a view that starts within it: not taken back).
   */
  private recycle(bufs: Buffer[]): void {
    for (const b of bufs) {
      if (this.spare.length >= SPARE_CHUNKS) return;
      if (b.byteOffset === 0 && this.chunks.has(b.buffer)) {
        this.spare.push(Buffer.from(b.buffer, 0, this.o.minLength));
      }
    }
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
    this.ready = [];
    this.used = 0;
    this.held = 0;
    clearInterval(this.timer);
    process.stderr.write(`basin: writing the log failed, logging stops: ${String(err)}\n`);
    this.settle();
  }
}

/** What is left of `bufs` after the first `n` bytes were written. */
function skip(bufs: Buffer[], n: number): Buffer[] {
  let i = 0;
  while (i < bufs.length && n >= (bufs[i] as Buffer).length) n -= (bufs[i++] as Buffer).length;
  if (i === bufs.length) return [];
  const rest = bufs.slice(i);
  rest[0] = (rest[0] as Buffer).subarray(n);
  return rest;
}
