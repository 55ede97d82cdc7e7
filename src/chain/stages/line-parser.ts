import { Transform, type TransformCallback } from 'node:stream';
import { withDefaults } from '../../defaults.js';
import { BATCH_HIGH_WATER_MARK, type QuarantineReason, type RecordBatch } from '../../model/record.js';
import { requireSession, type Session } from '../../model/session.js';
import { scanLine, scannedRecord } from '../../model/line-view.js';
import { endSpool, LineSpool, spoolDir } from './huge-line.js';

export const LINE_PARSER_DEFAULTS = Object.freeze({
  /** Longest line held in memory; longer lines are spooled to a file as they stream past. */
  maxLineBytes: 16 * 1024 * 1024,
});

export interface LineParserOptions {
  maxLineBytes?: number;
  /** The chain's session, shared by every stage (required). */
  session: Session;
}

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

  push(chunk: Buffer): void {
    if (this.atStart) chunk = this.stripBom(chunk);
    let start = 0;
    let nl: number;
    while ((nl = chunk.indexOf(LF, start)) !== -1) {
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
    if (start === chunk.length) return;
    const rest = chunk.subarray(start);
    if (this.overflowing) {
      this.sink.overflow(rest, this.lineNo + 1, false);
      return;
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

export type Classified =
  { ok: true; value: Record<string, unknown> } | { ok: false; reason: QuarantineReason };

/** Decides whether a line is a JSON object. Anything else is kept, not parsed further. */
export function classifyLine(line: Buffer, terminated = true): Classified {
  let i = 0;
  while (i < line.length && (line[i] === 0x20 || line[i] === 0x09)) i++;
  if (line[i] !== 0x7b /* { */) return { ok: false, reason: terminated ? 'not-object' : 'truncated' };
  let value: unknown;
  try {
    value = JSON.parse(line.toString('utf8'));
  } catch {
    return { ok: false, reason: terminated ? 'not-json' : 'truncated' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, reason: 'not-object' };
  }
  return { ok: true, value: value as Record<string, unknown> };
}

/**
 * Line parser: bytes in, record batches out (object mode on the readable side only): one
 * batch per input chunk.
 * Never fails on content: a line that is not a JSON object becomes a quarantine record.
 * Backpressure is core Transform's: records are pushed synchronously inside transform().
 */
export function createLineParser(options: LineParserOptions): Transform {
  const opts = withDefaults(LINE_PARSER_DEFAULTS, options);
  const run = requireSession(options, 'createLineParser');
  let batch: RecordBatch = [];
  const quarantine = (raw: Buffer, lineNo: number, reason: QuarantineReason, final: boolean) => {
    if (final) {
      run.input.quarantined++;
      run.quarantineLines.push(lineNo);
    }
    batch.push({ kind: 'quarantine', lineNo, raw, reason, final });
  };
  let spool: LineSpool | null = null;
  const splitter = new LineSplitter(opts.maxLineBytes, {
    line(raw, lineNo, terminated) {
      if (isBlank(raw)) {
        run.input.blankLines++;
        return;
      }
      run.input.lines++;
      const c = scanLine(raw, terminated);
      if (c.ok) batch.push(scannedRecord(lineNo, raw, c));
      else quarantine(raw, lineNo, c.reason, true);
    },
    overflow(piece, lineNo, final, terminated = true) {
      spool ??= new LineSpool(spoolDir(run), lineNo);
      spool.push(piece);
      if (!final) return;
      batch.push(endSpool(run, spool, lineNo, terminated, opts.maxLineBytes));
      spool = null;
    },
  });
  const take = (): RecordBatch | undefined => {
    if (batch.length === 0) return undefined;
    const b = batch;
    batch = [];
    return b;
  };
  return new Transform({
    writableObjectMode: false,
    readableObjectMode: true,
    readableHighWaterMark: BATCH_HIGH_WATER_MARK,
    transform(chunk: Buffer, _enc, cb: TransformCallback) {
      run.input.bytes += chunk.length;
      splitter.push(chunk);
      cb(null, take());
    },
    flush(cb: TransformCallback) {
      splitter.end();
      const { lines, quarantined } = run.input;
      if (lines > 0 && quarantined === lines) {
        const what = `none of the ${lines} input lines is a JSON object, all are in the quarantine file`;
        run.warn('INPUT_QUARANTINED', `${what}: is this Claude Code's --output-format stream-json output?`);
      }
      cb(null, take());
    },
    destroy(err, cb) {
      spool?.discard();
      cb(err);
    },
  });
}
