// A bounded cache: at most `max` entries, so that a cache fed by what clients
// send (bearer keys, ids) cannot grow without bound. Least recently used
// entries go first, approximately: entries live in two generations of up to
// max/2 each. New and recently used entries are in the young one; when it is
// full, it becomes the old one and the previous old one is dropped whole. A
// hit in the old generation moves the entry back to the young one. So a hit
// on a hot entry is one Map lookup, with no reordering, and an entry used at
// least once per max/2 insertions is never dropped.

export class Lru<K, V> {
  private young = new Map<K, V>();
  private old = new Map<K, V>();
  private readonly half: number;

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 2) throw new Error('an Lru needs a max of at least 2');
    this.half = Math.floor(max / 2);
  }

  get size(): number {
    return this.young.size + this.old.size;
  }

  get(key: K): V | undefined {
    const value = this.young.get(key);
    if (value !== undefined) return value;
    const aged = this.old.get(key);
    if (aged !== undefined) {
      this.old.delete(key);
      this.add(key, aged);
    }
    return aged;
  }

  set(key: K, value: V): void {
    if (this.young.has(key)) {
      this.young.set(key, value);
      return;
    }
    this.old.delete(key);
    this.add(key, value);
  }

  clear(): void {
    this.young.clear();
    this.old.clear();
  }

  private add(key: K, value: V): void {
    if (this.young.size >= this.half) {
      this.old = this.young;
      this.young = new Map();
    }
    this.young.set(key, value);
  }
}
