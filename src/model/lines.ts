/**
 * Longest line held in memory by default. A longer line is handed on in pieces: the line
 * parser spools it, and readers of a `.jsonl` file (the projection's replay, the report) skip
 * past it the same way instead of holding it.
 */
export const HELD_LINE_BYTES = 16 * 1024 * 1024;

const LF = 0x0a;
const CR = 0x0d;

/**
 * Splits bytes into lines without decoding them. 0x0A never occurs inside a multi-byte UTF-8
 * sequence, so splitting bytes first is safe for any chunking; a partial line is kept as a
 * list of chunk views and joined once, which keeps long lines linear (split2 re-splits its
 * whole tail on every chunk). A line past `maxLineBytes` is not held: its bytes are handed
 * on in pieces as they arrive, so memory stays bounded by the limit.
 */
export class LineSplitter {
  private parts: Buffer[] = [];
  private partsBytes = 0;
  private overflowing = false;
  private lineNo = 0;
  private atStart = true;

  constructor(
    private readonly maxLineBytes: number,
    private readonly sink: {
      line(raw: Buffer, lineNo: number, terminated: boolean): void;
      /** `terminated`: the final piece ended at a newline, not with the input. */
      overflow(piece: Buffer, lineNo: number, final: boolean, terminated?: boolean): void;
    },
  ) {}

  /**
   * Splits `chunk`, or its first `maxLines` lines: then the bytes not yet split are handed
   * back, to be pushed next (a chunk of tiny lines need not become all its records at once).
   * Null when the whole chunk was taken.
   */
  push(chunk: Buffer, maxLines = Infinity): Buffer | null {
    if (this.atStart) chunk = this.stripBom(chunk);
    let start = 0;
    let nl: number;
    let count = 0;
    while ((nl = chunk.indexOf(LF, start)) !== -1) {
      if (count++ === maxLines) return chunk.subarray(start);
      this.lineNo++;
      const tail = chunk.subarray(start, nl);
      if (this.overflowing) {
        this.overflowing = false;
        this.sink.overflow(stripCr(tail), this.lineNo, true);
      } else if (this.partsBytes === 0) {
        this.sink.line(stripCr(tail), this.lineNo, true);
      } else {
        this.parts.push(tail);
        const line = Buffer.concat(this.parts, this.partsBytes + tail.length);
        this.parts = [];
        this.partsBytes = 0;
        this.sink.line(stripCr(line), this.lineNo, true);
      }
      start = nl + 1;
    }
    if (start === chunk.length) return null;
    const rest = chunk.subarray(start);
    if (this.overflowing) {
      this.sink.overflow(rest, this.lineNo + 1, false);
      return null;
    }
    this.parts.push(rest);
    this.partsBytes += rest.length;
    if (this.partsBytes > this.maxLineBytes) {
      this.overflowing = true;
      // Piece by piece: joining them first would hold the line twice.
      const parts = this.parts;
      this.parts = [];
      this.partsBytes = 0;
      for (const part of parts) this.sink.overflow(part, this.lineNo + 1, false);
    }
    return null;
  }

  /** At end of input: an unterminated last line is handed on as such. */
  end(): void {
    if (this.overflowing) {
      this.overflowing = false;
      this.sink.overflow(Buffer.alloc(0), ++this.lineNo, true, false);
    } else if (this.partsBytes > 0) {
      const line = Buffer.concat(this.parts, this.partsBytes);
      this.parts = [];
      this.partsBytes = 0;
      this.sink.line(line, ++this.lineNo, false);
    }
  }

  /** A BOM can only start the stream, and may itself arrive split over chunks. */
  private stripBom(chunk: Buffer): Buffer {
    const pending = this.partsBytes > 0 ? Buffer.concat([...this.parts, chunk]) : chunk;
    const bom = [0xef, 0xbb, 0xbf];
    for (let i = 0; i < Math.min(3, pending.length); i++) {
      if (pending[i] !== bom[i]) {
        this.atStart = false;
        if (this.partsBytes > 0) this.resetParts();
        return pending;
      }
    }
    if (pending.length < 3) {
      // Not yet decidable: hold the bytes until the next chunk.
      this.parts = [pending];
      this.partsBytes = pending.length;
      return Buffer.alloc(0);
    }
    this.atStart = false;
    if (this.partsBytes > 0) this.resetParts();
    return pending.subarray(3);
  }

  private resetParts(): void {
    this.parts = [];
    this.partsBytes = 0;
  }

  /** Bytes held for an unfinished line (for tests and memory accounting). */
  get heldBytes(): number {
    return this.partsBytes;
  }
}

function stripCr(line: Buffer): Buffer {
  return line.length > 0 && line[line.length - 1] === CR ? line.subarray(0, line.length - 1) : line;
}

export function isBlank(line: Buffer): boolean {
  for (let i = 0; i < line.length; i++) {
    const b = line[i];
    if (b !== 0x20 && b !== 0x09 && b !== CR) return false;
  }
  return true;
}
