/** A channel's lines held packed in memory, for a late reader to replay. */

/** The first chunk's bytes; each next chunk is twice the last, up to CHUNK_BYTES. */
const FIRST_CHUNK_BYTES = 256;
/** The largest chunk, unless one line needs more (it then has a chunk of its own size). */
const CHUNK_BYTES = 64 * 1024;
/**
 * What holding lines costs beside their bytes and their column, in bytes: the object and its
 * arrays (PACK_BYTES), and each chunk's Buffer object and its place in the list (CHUNK_OBJECT_BYTES).
 * Measured on Node 22 (test/projection-memory.test.ts holds the heap to what is counted).
 */
export const PACK_BYTES = 560;
export const CHUNK_OBJECT_BYTES = 280;

/**
 * Lines packed into a few chunks of bytes, each line's end in one column: 4 bytes a line beside
 * its own, where a Buffer per line costs about a hundred. `bytes` is what the lines really hold
 * (chunks and column at their whole size, unused room included), the figure the projection's
 * `maxBufferedBytes` counts.
 */
export class PackedLines {
  private readonly chunks: Buffer[] = [];
  /** The index of each chunk's first line. */
  private readonly firsts: number[] = [];
  /** Per line, where it ends in its chunk. */
  private ends = new Uint32Array(16);
  /** Bytes used of the last chunk. */
  private used = 0;
  private count = 0;
  /** The bytes held (none counted before the first line). */
  bytes = 0;

  get length(): number {
    return this.count;
  }

  /** Adds a line; returns how many bytes that added to `bytes`. */
  push(line: Buffer): number {
    const before = this.bytes;
    const at = this.count++;
    if (at === 0) this.bytes += PACK_BYTES + this.ends.byteLength;
    if (at === this.ends.length) {
      const bigger = new Uint32Array(this.ends.length * 2);
      bigger.set(this.ends);
      this.bytes += bigger.byteLength - this.ends.byteLength;
      this.ends = bigger;
    }
    let chunk = this.chunks.at(-1);
    if (chunk === undefined || this.used + line.length > chunk.length) {
      const next = chunk === undefined ? FIRST_CHUNK_BYTES : Math.min(CHUNK_BYTES, chunk.length * 2);
      // Its own memory, not a slice of Node's shared pool: what it holds is what it frees.
      chunk = Buffer.allocUnsafeSlow(Math.max(line.length, next));
      this.chunks.push(chunk);
      this.firsts.push(at);
      this.used = 0;
      this.bytes += chunk.length + CHUNK_OBJECT_BYTES;
    }
    line.copy(chunk, this.used);
    this.used += line.length;
    this.ends[at] = this.used;
    return this.bytes - before;
  }

  /** Line `at`'s bytes: a view into its chunk, valid as long as the lines are. */
  line(at: number): Buffer {
    if (!(at >= 0 && at < this.count)) throw new RangeError(`no line ${at} of ${this.count}`);
    let lo = 0;
    let hi = this.firsts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.firsts[mid] <= at) lo = mid;
      else hi = mid - 1;
    }
    const start = at === this.firsts[lo] ? 0 : this.ends[at - 1];
    return this.chunks[lo].subarray(start, this.ends[at]);
  }
}
