// A cluster's system identifier: the random 64-bit number initdb gives it,
// which every WAL segment repeats (the long header of its first page) and
// which PostgreSQL, pgBackRest and pg_rewind compare before they use WAL or
// a backup with a cluster (docs/decisions.md, Backups and forks: the
// identifier). Every node cloned from the template had the template's, so
// WAL or a backup of one service looked like another's to all of them.
// Now each service gets its own before its first start: its data directory
// is patched, here, in place:
//
// - global/pg_control: the identifier is the first field of
//   ControlFileData (8 bytes), whose CRC-32C (over the bytes before its
//   `crc` field) is recomputed. Where `crc` lies depends on the build, so
//   it is found in the file itself: the one 4-aligned offset where the CRC
//   of the bytes before it is the value stored there.
// - pg_wal/*: each segment whose first page carries a long header with the
//   old identifier (XLogLongPageHeaderData.xlp_sysid, at offset 24) gets
//   the new one. The page header has no checksum of its own (the records'
//   CRCs do not cover it), and only that first page's header names the
//   identifier.
//
// Both in the byte order of the host, as PostgreSQL writes them. The files
// are opened through safe-dir.ts: the data directory may be a fork's,
// restored by its OS user.

import { randomBytes } from 'node:crypto';
import { endianness } from 'node:os';
import { chmod, readFile, rename, writeFile, type FileHandle } from 'node:fs/promises';
import type { SafeDir } from '../host/files/safe-dir.js';
import { UnsafeFileError } from '../host/files/safe-fs.js';

/** PG_CONTROL_FILE_SIZE: the control file is padded to one page. */
const CONTROL_FILE_SIZE = 8192;
/** sizeof(ControlFileData) is ~300 bytes; its `crc` lies well before this. */
const MAX_CRC_OFFSET = 1024;
/** XLogLongPageHeaderData: xlp_info at 2 (XLP_LONG_HEADER = 0x0002), xlp_sysid at 24. */
const XLP_INFO = 2;
const XLP_LONG_HEADER = 0x0002;
const XLP_SYSID = 24;
const WAL_SEGMENT = /^[0-9A-F]{24}$/;

const LE = endianness() === 'LE';

/** The identifier of `buf` at `offset`, as pg_controldata prints it (decimal). */
export function readId(buf: Buffer, offset = 0): string {
  return (LE ? buf.readBigUInt64LE(offset) : buf.readBigUInt64BE(offset)).toString();
}

/** Writes identifier `id` (decimal) into `buf` at `offset`. */
export function writeId(buf: Buffer, id: string, offset = 0): void {
  if (LE) buf.writeBigUInt64LE(BigInt(id), offset);
  else buf.writeBigUInt64BE(BigInt(id), offset);
}

/** The 8 bytes of identifier `id` as they lie in a file. */
export function idBytes(id: string): Buffer {
  const buf = Buffer.alloc(8);
  writeId(buf, id);
  return buf;
}

/**
 * A new identifier, in the shape initdb gives them (the seconds since the
 * epoch in its high 32 bits, so that pg_controldata shows a plausible
 * one), with 32 random bits below: two services made in the same second
 * share an identifier with odds of one in four billion.
 */
export function newSystemId(nowMs = Date.now()): string {
  const seconds = BigInt(Math.floor(nowMs / 1000)) & 0xffffffffn;
  const low = BigInt(randomBytes(4).readUInt32BE(0));
  const id = (seconds << 32n) | low;
  return (id === 0n ? 1n : id).toString();
}

/** CRC-32C (Castagnoli), as PostgreSQL's pg_crc32c: reflected, initial and final XOR 0xFFFFFFFF. */
export function crc32c(buf: Buffer, end = buf.length): number {
  let crc = 0xffffffff;
  for (let i = 0; i < end; i++) crc = (CRC_TABLE[(crc ^ buf[i]!) & 0xff]! ^ (crc >>> 8)) >>> 0;
  return (crc ^ 0xffffffff) >>> 0;
}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (0x82f63b78 ^ (c >>> 1)) >>> 0 : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/**
 * Where the control file's `crc` field lies: the first 4-aligned offset
 * past the identifier at which the CRC-32C of the bytes before it is the
 * value stored there; undefined when there is none (not a control file,
 * or a torn one).
 */
export function controlCrcOffset(control: Buffer): number | undefined {
  const limit = Math.min(MAX_CRC_OFFSET, control.length - 4);
  // One pass: the running CRC of the prefix, compared at every aligned offset.
  let crc = 0xffffffff;
  for (let i = 0; i <= limit; i++) {
    if (i >= 8 && i % 4 === 0) {
      const stored = LE ? control.readUInt32LE(i) : control.readUInt32BE(i);
      if ((crc ^ 0xffffffff) >>> 0 === stored) return i;
    }
    crc = (CRC_TABLE[(crc ^ control[i]!) & 0xff]! ^ (crc >>> 8)) >>> 0;
  }
  return undefined;
}

/**
 * `control` (a whole pg_control) with identifier `id` and its CRC made
 * anew; throws when its CRC cannot be found (then it is left alone).
 */
export function withSystemId(control: Buffer, id: string): Buffer {
  const at = controlCrcOffset(control);
  if (at === undefined) throw new Error('global/pg_control: no valid CRC (not a control file)');
  const out = Buffer.from(control);
  writeId(out, id);
  const crc = crc32c(out, at);
  if (LE) out.writeUInt32LE(crc, at);
  else out.writeUInt32BE(crc, at);
  return out;
}

/**
 * The control file of the data directory `pgdata` (8 KiB), checked against
 * its CRC; throws an UnsafeFileError when it is no control file.
 */
export async function readControlFile(pgdata: SafeDir): Promise<Buffer> {
  const control = await readControl(pgdata);
  if (controlCrcOffset(control) === undefined) {
    throw new UnsafeFileError(pgdata.show('global/pg_control'), 'not a valid control file');
  }
  return control;
}

/** The identifier in the control file of the data directory `pgdata` (see readControlFile). */
export async function readSystemId(pgdata: SafeDir): Promise<string> {
  return readId(await readControlFile(pgdata));
}

/**
 * Gives the data directory `pgdata` (stopped, and nobody's but Basin's to
 * change meanwhile) identifier `id`: its control file, and every WAL
 * segment in pg_wal that names the identifier it had. Returns that old
 * identifier.
 */
export async function setSystemId(pgdata: SafeDir, id: string): Promise<string> {
  const global = await pgdata.dir('global');
  let old: string;
  try {
    const fh = await global.fileForUpdate('pg_control');
    try {
      const control = await readExactly(fh, CONTROL_FILE_SIZE, global.show('pg_control'));
      old = readId(control);
      if (old === id) return old;
      await writeAt(fh, withSystemId(control, id), 0);
      // The control file is what the record (recordSystemId) is checked
      // against: on disk before the record says so.
      await fh.datasync();
    } finally {
      await fh.close();
    }
  } finally {
    await global.close();
  }
  await setSegmentsId(pgdata, old, id);
  return old;
}

/** Rewrites the identifier of the WAL segments in pg_wal that carry `from`; returns how many. */
export async function setSegmentsId(pgdata: SafeDir, from: string, to: string): Promise<number> {
  const wal = await pgdata.dir('pg_wal');
  let patched = 0;
  try {
    const old = idBytes(from);
    const next = idBytes(to);
    for (const name of (await wal.names()).filter((n) => WAL_SEGMENT.test(n))) {
      const fh = await wal.fileForUpdate(name);
      try {
        const head = Buffer.alloc(XLP_SYSID + 8);
        const { bytesRead } = await fh.read(head, 0, head.length, 0);
        const info = LE ? head.readUInt16LE(XLP_INFO) : head.readUInt16BE(XLP_INFO);
        const long = bytesRead === head.length && (info & XLP_LONG_HEADER) !== 0;
        if (!long || !head.subarray(XLP_SYSID).equals(old)) continue;
        await writeAt(fh, next, XLP_SYSID);
        patched++;
      } finally {
        await fh.close();
      }
    }
  } finally {
    await wal.close();
  }
  return patched;
}

async function readControl(pgdata: SafeDir): Promise<Buffer> {
  const global = await pgdata.dir('global');
  try {
    const fh = await global.file('pg_control');
    try {
      return await readExactly(fh, CONTROL_FILE_SIZE, global.show('pg_control'));
    } finally {
      await fh.close();
    }
  } finally {
    await global.close();
  }
}

async function readExactly(fh: FileHandle, size: number, shown: string): Promise<Buffer> {
  const buf = Buffer.alloc(size);
  const { bytesRead } = await fh.read(buf, 0, size, 0);
  if (bytesRead !== size) throw new UnsafeFileError(shown, `not ${size} bytes long`);
  return buf;
}

async function writeAt(fh: FileHandle, buf: Buffer, position: number): Promise<void> {
  const { bytesWritten } = await fh.write(buf, 0, buf.length, position);
  if (bytesWritten !== buf.length) throw new Error('short write');
}

/**
 * Records `id` as service `file`'s identifier (Layout.systemIdFile: root's,
 * 0600, beside its nodes, never in a file its OS user can change), written
 * aside and renamed.
 */
export async function recordSystemId(file: string, id: string): Promise<void> {
  const tmp = `${file}.tmp`;
  await writeFile(tmp, `${id}\n`, { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, file);
}

/** The identifier recorded in `file`; undefined for a service made before identifiers were recorded. */
export async function recordedSystemId(file: string): Promise<string | undefined> {
  try {
    const text = (await readFile(file, 'utf8')).trim();
    return /^\d{1,20}$/.test(text) ? text : undefined;
  } catch {
    return undefined;
  }
}
