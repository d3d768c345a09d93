// Reading a file's lines from the end towards the start, one chunk at a time.
// Logs are read newest first and a page is usually small, so reading forwards
// (or whole files) would cost the entire history for the last few lines.
//
// Nothing bounds what a tenant writes into its log directory, so a line is
// held in memory only up to a maximum length: past it, its bytes are passed
// over while its start is looked for, and the line comes out cut to its
// first `maxLineBytes` (read again from the file), with the number of bytes
// left out. Each byte is looked at once, however long the line.

import type { FileHandle } from 'node:fs/promises';
import type { ScanBudget } from './scan-budget.js';

/** Big enough for a few hundred log lines per read, small enough to never matter in memory. */
export const CHUNK_SIZE = 64 * 1024;
const NEWLINE = 0x0a;

export interface Line {
  /** The line, decoded, without its newline; only its first maxLineBytes when `cut` > 0. */
  text: string;
  /** Offset of its first byte in the file. */
  start: number;
  /** Offset just past its newline: reading `[0, end)` again yields this line first. */
  end: number;
  /** Bytes of the line left out of `text`: 0 unless it was longer than maxLineBytes. */
  cut: number;
}

/**
 * Where a backward read stands: the bytes `[0, pos)` are still to be read.
 * With `openEnd`, the bytes read just before, `[pos, openEnd - 1)`, hold no
 * newline and end the line whose newline is at `openEnd - 1`. Without it,
 * whatever follows `pos` up to the next newline before it is read is no
 * line (the end of a file still being written).
 */
export interface ReadPoint {
  pos: number;
  openEnd?: number | undefined;
}

export interface BackwardOptions {
  chunkSize?: number;
  maxLineBytes: number;
  /** Charged with every byte read; reading pauses (see `finished`) once it is spent. */
  budget?: ScanBudget | undefined;
}

/**
 * The complete lines of the region `start` describes, last first, in batches
 * (one per chunk read that ended a line: a promise per line would cost more
 * than the parsing). Splitting on the byte 0x0A is safe in UTF-8: it never
 * occurs inside a multi-byte character. Reading stops if the file shrinks
 * meanwhile (never the case for PostgreSQL's logs).
 */
export class BackwardLines {
  private pos: number;
  /** Offset of the newline that ends the line being gathered; undefined in a file's unended tail. */
  private openNl: number | undefined;
  /** The bytes `[pos, openNl)` in file order, while `held` (at most maxLineBytes of them). */
  private parts: Buffer[] = [];
  private partsLength = 0;
  private held: boolean;
  private readsDone = 0;
  private done = false;
  private readonly chunkSize: number;

  constructor(
    private readonly fh: FileHandle,
    start: ReadPoint,
    private readonly options: BackwardOptions,
  ) {
    this.pos = start.pos;
    this.openNl = start.openEnd === undefined ? undefined : start.openEnd - 1;
    this.held = this.openNl === this.pos;
    this.chunkSize = options.chunkSize ?? CHUNK_SIZE;
  }

  /** Whether every line was returned (as opposed to paused by the budget). */
  get finished(): boolean {
    return this.done;
  }

  /** Where to resume: lines returned so far are behind it. */
  get point(): ReadPoint {
    return { pos: this.pos, openEnd: this.openNl === undefined ? undefined : this.openNl + 1 };
  }

  /**
   * The next lines, last first; undefined when there are none left or the
   * budget is spent (after at least one read of this reader, so that every
   * caller makes progress). Throws an AbortError once the client has gone.
   */
  async next(): Promise<Line[] | undefined> {
    while (!this.done) {
      if (this.pos === 0) {
        this.done = true;
        // What is left starts the file and ends at the first newline.
        return this.openNl === undefined ? undefined : [await this.lineFrom(0, EMPTY)];
      }
      const budget = this.options.budget;
      budget?.checkAborted();
      if (this.readsDone > 0 && budget?.spent) return undefined;
      const size = Math.min(this.chunkSize, this.pos);
      const chunk = Buffer.allocUnsafe(size);
      const { bytesRead } = await this.fh.read(chunk, 0, size, this.pos - size);
      this.readsDone++;
      budget?.charge(size);
      if (bytesRead < size) {
        this.done = true;
        return undefined;
      }
      this.pos -= size;
      const lines = await this.split(chunk);
      if (lines.length > 0) return lines;
    }
    return undefined;
  }

  /** The lines that end in `chunk` (read at this.pos), last first; keeps what is left of the open line. */
  private async split(chunk: Buffer): Promise<Line[]> {
    const lines: Line[] = [];
    let hi = chunk.length; // chunk[0, hi) is not split yet
    let nl = chunk.lastIndexOf(NEWLINE, hi - 1);
    while (nl !== -1) {
      if (this.openNl !== undefined) {
        lines.push(await this.lineFrom(this.pos + nl + 1, chunk.subarray(nl + 1, hi)));
      }
      this.openNl = this.pos + nl;
      this.parts = [];
      this.partsLength = 0;
      this.held = true;
      hi = nl;
      nl = hi > 0 ? chunk.lastIndexOf(NEWLINE, hi - 1) : -1;
    }
    if (this.openNl !== undefined && this.held && hi > 0) {
      if (this.partsLength + hi > this.options.maxLineBytes) {
        this.held = false; // too long to hold: its start is found by reading on, its prefix read again
        this.parts = [];
        this.partsLength = 0;
      } else {
        this.parts.unshift(chunk.subarray(0, hi));
        this.partsLength += hi;
      }
    }
    return lines;
  }

  /** The open line, which starts at `start`; `head` is its first bytes from the chunk in hand. */
  private async lineFrom(start: number, head: Buffer): Promise<Line> {
    const openNl = this.openNl!;
    const length = openNl - start;
    const max = this.options.maxLineBytes;
    const keep = Math.min(length, max);
    let bytes: Buffer;
    if (this.held) {
      bytes = Buffer.concat([head, ...this.parts], head.length + this.partsLength);
    } else {
      bytes = Buffer.allocUnsafe(keep);
      const { bytesRead } = await this.fh.read(bytes, 0, keep, start);
      this.options.budget?.charge(keep);
      bytes = bytes.subarray(0, bytesRead);
    }
    const cut = length - keep;
    const text = cut > 0 ? utf8Prefix(bytes.subarray(0, keep)) : bytes.toString('utf8');
    return { text, start, end: openNl + 1, cut };
  }
}

const EMPTY = Buffer.alloc(0);

/** `bytes` decoded, without the incomplete character a cut may have left at its end. */
export function utf8Prefix(bytes: Buffer): string {
  let end = bytes.length;
  // Back over continuation bytes (10xxxxxx) to the lead byte of the last character.
  let lead = end - 1;
  while (lead >= 0 && lead > end - 4 && (bytes[lead]! & 0xc0) === 0x80) lead--;
  if (lead >= 0) {
    const b = bytes[lead]!;
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    if (end - lead < need) end = lead;
  }
  return bytes.toString('utf8', 0, end);
}

/** The file's first line if it is complete within one chunk; undefined otherwise. */
export async function firstLine(
  fh: FileHandle,
  chunkSize = CHUNK_SIZE,
  budget?: ScanBudget,
): Promise<string | undefined> {
  const buf = Buffer.allocUnsafe(chunkSize);
  const { bytesRead } = await fh.read(buf, 0, chunkSize, 0);
  budget?.charge(bytesRead);
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
