// Reading a file's lines from the end towards the start, one chunk at a time.
// Logs are read newest first and a page is usually small, so reading forwards
// (or whole files) would cost the entire history for the last few lines.

import type { FileHandle } from 'node:fs/promises';

/** Big enough for a few hundred log lines per read, small enough to never matter in memory. */
export const CHUNK_SIZE = 64 * 1024;
const NEWLINE = 0x0a;

export interface Line {
  /** The line, decoded, without its newline. */
  text: string;
  /** Offset of its first byte in the file. */
  start: number;
  /** Offset just past its newline: reading `[0, end)` again yields this line first. */
  end: number;
}

/**
 * The complete lines of the region `[0, end)` of a file, last first, in
 * batches (one per chunk read: a promise per line would cost more than the
 * parsing). Bytes after the region's last newline are a line still being
 * written and are skipped (a region without any newline yields nothing).
 * Splitting on the byte 0x0A is safe in UTF-8: it never occurs inside a
 * multi-byte character. Reading stops if the file shrinks meanwhile (never
 * the case for PostgreSQL's logs).
 */
export async function* linesBackward(
  fh: FileHandle,
  end: number,
  chunkSize = CHUNK_SIZE,
): AsyncGenerator<Line[]> {
  let pos = end; // `buf` holds the bytes [pos, pos + buf.length)
  let buf = Buffer.alloc(0);
  let lineEnd = 0; // buf[0, lineEnd) is not split into lines yet
  let terminated = false; // whether a newline follows buf[lineEnd - 1]
  for (;;) {
    const batch: Line[] = [];
    let nl = lineEnd > 0 ? buf.lastIndexOf(NEWLINE, lineEnd - 1) : -1;
    while (nl !== -1) {
      if (terminated) {
        const text = buf.toString('utf8', nl + 1, lineEnd);
        batch.push({ text, start: pos + nl + 1, end: pos + lineEnd + 1 });
      }
      terminated = true;
      lineEnd = nl;
      nl = lineEnd > 0 ? buf.lastIndexOf(NEWLINE, lineEnd - 1) : -1;
    }
    if (batch.length > 0) yield batch;
    if (pos === 0) break;
    const size = Math.min(chunkSize, pos);
    const chunk = Buffer.allocUnsafe(size);
    const { bytesRead } = await fh.read(chunk, 0, size, pos - size);
    if (bytesRead < size) return;
    pos -= size;
    buf = lineEnd === 0 ? chunk : Buffer.concat([chunk, buf.subarray(0, lineEnd)]);
    lineEnd += size;
  }
  // What is left starts the file and ends before the first newline.
  if (terminated) yield [{ text: buf.toString('utf8', 0, lineEnd), start: 0, end: lineEnd + 1 }];
}

/** The file's first line if it is complete within one chunk; undefined otherwise. */
export async function firstLine(
  fh: FileHandle,
  chunkSize = CHUNK_SIZE,
): Promise<string | undefined> {
  const buf = Buffer.allocUnsafe(chunkSize);
  const { bytesRead } = await fh.read(buf, 0, chunkSize, 0);
  const nl = buf.subarray(0, bytesRead).indexOf(NEWLINE);
  return nl === -1 ? undefined : buf.toString('utf8', 0, nl);
}

/** Whether `offset` is a line boundary: the start of the file or just past a newline. */
export async function isLineBoundary(fh: FileHandle, offset: number): Promise<boolean> {
  if (offset === 0) return true;
  const byte = Buffer.alloc(1);
  const { bytesRead } = await fh.read(byte, 0, 1, offset - 1);
  return bytesRead === 1 && byte[0] === NEWLINE;
}
