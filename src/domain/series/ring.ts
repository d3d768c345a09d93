// A fixed-capacity ring of rows of numbers (a time first), oldest first:
// typed arrays, so a series costs its capacity in bytes and nothing more,
// however long Basin runs.

export class Ring {
  private readonly data: Float64Array;
  private start = 0;
  private count = 0;

  constructor(
    readonly capacity: number,
    readonly stride: number,
  ) {
    this.data = new Float64Array(capacity * stride);
  }

  get length(): number {
    return this.count;
  }

  get bytes(): number {
    return this.data.byteLength;
  }

  /** Appends a row, dropping the oldest when full. */
  push(row: ArrayLike<number>): void {
    this.data.set(row, this.nextSlot() * this.stride);
    this.advance();
  }

  /** Appends a (time, value) row without making an array (the raw tier's every sample). */
  push2(t: number, v: number): void {
    const at = this.nextSlot() * this.stride;
    this.data[at] = t;
    this.data[at + 1] = v;
    this.advance();
  }

  private nextSlot(): number {
    return (this.start + this.count) % this.capacity;
  }

  private advance(): void {
    if (this.count < this.capacity) this.count++;
    else this.start = (this.start + 1) % this.capacity;
  }

  /** Field `field` of the i-th row, oldest first. */
  at(i: number, field: number): number {
    return this.data[((this.start + i) % this.capacity) * this.stride + field]!;
  }

  /** Drops rows from the front while their time (field 0) is before `t`. */
  dropBefore(t: number): void {
    while (this.count > 0 && this.at(0, 0) < t) {
      this.start = (this.start + 1) % this.capacity;
      this.count--;
    }
  }

  /** The index of the first row whose time is at or after `t` (length when none). */
  firstAtOrAfter(t: number): number {
    let lo = 0;
    let hi = this.count;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.at(mid, 0) < t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
