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
// emptied once more than needed, never once too few. Checkpoints do not
// touch the header (only the checkpoint-info block after it).
//
// Where that does not apply (not WAL, no -shm file, a header of another
// version), it falls back to `PRAGMA data_version`.

import { closeSync, openSync, readSync } from 'node:fs';
import { endianness } from 'node:os';
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
  return WalHeaderWatch.open(reader.name) ?? new DataVersionWatch(reader);
}

class WalHeaderWatch implements CommitWatch {
  private readonly buf = Buffer.alloc(HEADER_BYTES);
  private readonly words = new Int32Array(this.buf.buffer, this.buf.byteOffset, HEADER_WORDS);
  private readonly last = new Int32Array(HEADER_WORDS);
  private first = true;

  private constructor(private readonly fd: number) {}

  static open(dbFile: string): WalHeaderWatch | undefined {
    let fd: number;
    try {
      fd = openSync(`${dbFile}-shm`, 'r');
    } catch {
      return undefined;
    }
    const watch = new WalHeaderWatch(fd);
    // iVersion (bytes 0-3) and isInit (byte 12); the header is in the host's byte order.
    const read = readSync(fd, watch.buf, 0, HEADER_BYTES, 0);
    const version = endianness() === 'LE' ? watch.buf.readUInt32LE(0) : watch.buf.readUInt32BE(0);
    if (read !== HEADER_BYTES || version !== WALINDEX_VERSION || watch.buf[12] !== 1) {
      closeSync(fd);
      return undefined;
    }
    return watch;
  }

  changed(): boolean {
    readSync(this.fd, this.buf, 0, HEADER_BYTES, 0);
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

  close(): void {
    closeSync(this.fd);
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
