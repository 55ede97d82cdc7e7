/**
 * Longest line held in memory by default. A longer line is handed on in pieces: the line
 * parser spools it, and readers of a `.jsonl` file (the projection's replay, the report) skip
 * past it the same way instead of holding it.
 */
export const HELD_LINE_BYTES = 16 * 1024 * 1024;

const LF = 0x0a;
const CR = 0x0d;

/**
 * Junk runs: consecutive lines that cannot hold a JSON object are handed on as one piece of
 * at most JUNK_RUN_BYTES, each line at most JUNK_LINE_BYTES. A record per one-byte line cost
 * more than everything else done with it (45 million lines were 45 million records).
 */
export const JUNK_RUN_BYTES = 16 * 1024;
const JUNK_LINE_BYTES = 256;

/**
 * A line starting with this byte is not blank and cannot be a JSON object (an object starts
 * with `{` after spaces or tabs), whatever follows.
 */
const startsJunk = (byte: number) =>
  byte !== 0x7b && byte !== 0x20 && byte !== 0x09 && byte !== CR && byte !== LF;

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
  /**
   * A CR that ended the last piece of a long line handed on: held back, as it is the CR before
   * the newline when the next piece is the line's empty end (the line loses exactly one CR,
   * as a short line does).
   */
  private heldCr = false;
  private lineNo = 0;
  private atStart = true;
  /** The run `junkRunEnd` found last: its line count and the newline after it. */
  private runLines = 0;
  private runEnd = 0;

  constructor(
    private readonly maxLineBytes: number,
    private readonly sink: {
      line(raw: Buffer, lineNo: number, terminated: boolean): void;
      /**
       * The pieces of a long line are its bytes, as `raw` is a short line's: the one CR before
       * its newline left out. `terminated`: the final piece ended at a newline, not with the input.
       */
      overflow(piece: Buffer, lineNo: number, final: boolean, terminated?: boolean): void;
      /**
       * Two or more consecutive newline-terminated lines, none ending in CR, each starting
       * with a byte that cannot start a JSON object or a blank line: `raw` is their bytes
       * joined by their newlines (without the last), from line `lineNo` on. Without this
       * callback every line goes to `line`.
       */
      junkRun?(raw: Buffer, lineNo: number, lines: number): void;
    },
  ) {}

  /**
   * Splits `chunk`, or its first `maxLines` lines (each line of a junk run counted): then the
   * bytes not yet split are handed back, to be pushed next (a chunk of tiny lines need not
   * become all its records at once). Null when the whole chunk was taken.
   */
  push(chunk: Buffer, maxLines = Infinity): Buffer | null {
    if (this.atStart) chunk = this.stripBom(chunk);
    let start = 0;
    let nl: number;
    let lines = 0;
    while ((nl = chunk.indexOf(LF, start)) !== -1) {
      if (lines++ === maxLines) return chunk.subarray(start);
      this.lineNo++;
      if (this.overflowing) {
        this.overflowing = false;
        this.overflowPiece(chunk.subarray(start, nl), this.lineNo, true);
      } else if (this.partsBytes > 0) {
        this.parts.push(chunk.subarray(start, nl));
        const lineBytes = this.partsBytes + nl - start;
        const parts = this.parts;
        this.resetParts();
        if (lineBytes > this.maxLineBytes) this.overflowWhole(parts);
        else this.sink.line(stripCr(Buffer.concat(parts, lineBytes)), this.lineNo, true);
      } else if (nl - start > this.maxLineBytes) {
        this.overflowWhole([chunk.subarray(start, nl)]);
      } else if (
        this.sink.junkRun &&
        startsJunk(chunk[start]) &&
        this.junkRunEnd(chunk, start, nl, maxLines - lines + 1) !== nl
      ) {
        const first = this.lineNo;
        this.lineNo += this.runLines - 1;
        lines += this.runLines - 1;
        nl = this.runEnd;
        this.sink.junkRun(chunk.subarray(start, nl), first, this.runLines);
      } else {
        this.sink.line(stripCr(chunk.subarray(start, nl)), this.lineNo, true);
      }
      start = nl + 1;
    }
    if (start === chunk.length) return null;
    const rest = chunk.subarray(start);
    if (this.overflowing) {
      this.overflowPiece(rest, this.lineNo + 1, false);
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
      for (const part of parts) this.overflowPiece(part, this.lineNo + 1, false);
    }
    return null;
  }

  /**
   * Where the junk run that starts with the line `start`..`nl` ends (the newline after its
   * last line, at most `maxLines` lines on): `nl` itself when the next line cannot join it.
   * Lines are looked at byte by byte, which for lines this short costs less than a search
   * call per line.
   */
  private junkRunEnd(chunk: Buffer, start: number, nl: number, maxLines: number): number {
    if (nl - start > JUNK_LINE_BYTES || chunk[nl - 1] === CR) return nl;
    const limit = Math.min(chunk.length, start + JUNK_RUN_BYTES);
    this.runLines = 1;
    let end = nl;
    let pos = nl + 1;
    while (pos < limit && this.runLines < maxLines && startsJunk(chunk[pos])) {
      const lineLimit = Math.min(limit, pos + JUNK_LINE_BYTES + 1);
      let i = pos + 1;
      while (i < lineLimit && chunk[i] !== LF) i++;
      if (i === lineLimit || chunk[i - 1] === CR) break;
      end = i;
      pos = i + 1;
      this.runLines++;
    }
    this.runEnd = end;
    return end;
  }

  /**
   * A line past `maxLineBytes` whose end is already here goes the way of one that is not:
   * what a line becomes must not depend on where the chunks of the input end.
   */
  private overflowWhole(pieces: Buffer[]): void {
    const last = pieces.length - 1;
    for (let k = 0; k < last; k++) this.overflowPiece(pieces[k], this.lineNo, false);
    this.overflowPiece(pieces[last], this.lineNo, true);
  }

  /**
   * Hands on a piece of a long line, the one CR before its newline left out wherever the
   * pieces split (`x\r` + `\n`, `x\r` + `\r\n`, `x\r\r\n`): a piece's last CR is held
   * until the next piece shows whether the newline follows it.
   */
  private overflowPiece(piece: Buffer, lineNo: number, final: boolean, terminated = true): void {
    if (this.heldCr) {
      this.heldCr = false;
      // The held CR was the last byte before the newline: it is the one left out.
      if (final && terminated && piece.length === 0) {
        this.sink.overflow(piece, lineNo, true);
        return;
      }
      this.sink.overflow(Buffer.from([CR]), lineNo, false);
    }
    if (final) {
      this.sink.overflow(terminated ? stripCr(piece) : piece, lineNo, true, terminated);
      return;
    }
    if (piece.length > 0 && piece[piece.length - 1] === CR) {
      this.heldCr = true;
      piece = piece.subarray(0, piece.length - 1);
    }
    if (piece.length > 0) this.sink.overflow(piece, lineNo, false);
  }

  /** At end of input: an unterminated last line is handed on as such. */
  end(): void {
    if (this.overflowing) {
      this.overflowing = false;
      this.overflowPiece(Buffer.alloc(0), ++this.lineNo, true, false);
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
