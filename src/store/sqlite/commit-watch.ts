// Has anything been committed to the database since the last look? The read
// cache (read-cache.ts) asks before every request, so the answer must be
// exact (a commit by another process, such as `basin credential revoke`, is
// seen by the next request) and cheap.
//
// `PRAGMA data_version` answers it exactly, but each call opens and closes a
// read transaction: two fcntl(2) locks on the -shm file, plus the statement's
// own machinery (~2 µs a request, bench/README.md). The same fact can be read
// without a lock. In WAL mode every connection, in every process, shares the
// wal-index (the -shm file, mapped into memory), and a commit ends by writing
// the wal-index header, whose `iChange` counter "is incremented with each
// transaction" (https://www.sqlite.org/walformat.html, "The WAL-Index
// Header"). So: read the header's first copy (48 bytes) with one pread(2),
// and compare it with the last one seen. A commit that has returned has
// written the header, so the next read sees a different one; a read in the
// middle of a header write sees some changed bytes, so at worst the cache is
// emptied once more than needed, never once too few. (A RESTART or TRUNCATE
// checkpoint rewrites the header too: one more emptying, nothing missed.)
//
// Where that does not apply (not WAL, no -shm file, a header of another
// version), it falls back to `PRAGMA data_version`.

import { closeSync, openSync, readSync } from 'node:fs';
import type Database from 'better-sqlite3';

/** The wal-index header's iVersion this reading of it is written for. */
const WALINDEX_VERSION = 3007000;
const HEADER_BYTES = 48;
const HEADER_WORDS = HEADER_BYTES / 4;

export interface CommitWatch {
  /** True when something was committed since the last call (or this is the first). */
  changed(): boolean;
  close(): void;
}

/** A watch on the database of `reader`, a connection that never writes. */
export function watchCommits(reader: Database.Database): CommitWatch {
  return (
    WalHeaderWatch.open(reader.name, () => new DataVersionWatch(reader)) ??
    new DataVersionWatch(reader)
  );
}

class WalHeaderWatch implements CommitWatch {
  private readonly buf = Buffer.alloc(HEADER_BYTES);
  /** The header as 32-bit words, in the host's byte order, as SQLite writes it. */
  private readonly words = new Int32Array(this.buf.buffer, this.buf.byteOffset, HEADER_WORDS);
  private readonly last = new Int32Array(HEADER_WORDS);
  private first = true;
  /** Set when the header stopped looking like one: the watch asks `data_version` from then on. */
  private replaced: CommitWatch | undefined;

  private constructor(
    private fd: number,
    private readonly fallback: () => CommitWatch,
  ) {}

  static open(dbFile: string, fallback: () => CommitWatch): WalHeaderWatch | undefined {
    let fd: number;
    try {
      fd = openSync(`${dbFile}-shm`, 'r');
    } catch {
      return undefined;
    }
    const watch = new WalHeaderWatch(fd, fallback);
    if (!watch.read()) {
      watch.close();
      return undefined;
    }
    return watch;
  }

  /**
   * Reads the header; false unless it is one: all 48 bytes, iVersion 3007000
   * and isInit 1. Checked on every read, so that a descriptor closed by
   * mistake elsewhere in the process, its number given to another file, can
   * never pass for a header that does not change.
   */
  private read(): boolean {
    let n: number;
    try {
      n = readSync(this.fd, this.buf, 0, HEADER_BYTES, 0);
    } catch {
      return false;
    }
    return n === HEADER_BYTES && this.words[0] === WALINDEX_VERSION && this.buf[12] === 1;
  }

  changed(): boolean {
    if (this.replaced) return this.replaced.changed();
    if (!this.read()) {
      // Not closed: the number may belong to another file now.
      this.fd = -1;
      this.replaced = this.fallback();
      this.replaced.changed();
      return true;
    }
    const { words, last } = this;
    let changed = this.first;
    for (let i = 0; i < HEADER_WORDS; i++) {
      if (words[i] !== last[i]) {
        last[i] = words[i] as number;
        changed = true;
      }
    }
    this.first = false;
    return changed;
  }

  /** Idempotent: closing twice must not close a descriptor the number was given to since. */
  close(): void {
    if (this.fd < 0) return;
    closeSync(this.fd);
    this.fd = -1;
  }
}

class DataVersionWatch implements CommitWatch {
  private readonly statement: Database.Statement;
  private version: unknown = undefined;

  constructor(reader: Database.Database) {
    this.statement = reader.prepare('PRAGMA data_version').pluck();
  }

  changed(): boolean {
    const v = this.statement.get();
    if (v === this.version) return false;
    this.version = v;
    return true;
  }

  close(): void {}
}
