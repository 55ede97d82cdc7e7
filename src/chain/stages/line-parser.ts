import { Duplex } from 'node:stream';
import { withDefaults } from '../../defaults.js';
import { OutputError } from '../../errors.js';
import {
  BATCH_HIGH_WATER_MARK,
  MAX_BATCH_RECORDS,
  type QuarantineReason,
  type RecordBatch,
  type SubteeRecord,
} from '../../model/record.js';
import { requireSession, type Session } from '../../model/session.js';
import { scanLine, scannedRecord } from '../../model/line-view.js';
import { HELD_LINE_BYTES, isBlank, LineSplitter } from '../../model/lines.js';
import { defineBuiltin, BUILTIN_KIT } from '../plugin.js';
import { endSpool, LineSpool, spoolDir } from './line-spool.js';

export const LINE_PARSER_DEFAULTS = Object.freeze({
  /** Longest line held in memory; longer lines are spooled to a file as they stream past. */
  maxLineBytes: HELD_LINE_BYTES,
});

export interface LineParserOptions {
  maxLineBytes?: number;
  /**
   * Where a line too long to hold is spooled: the output folder (a chain passes its files
   * sink's `out`), else the system's temporary folder.
   */
  spoolDir?: string;
  /** The chain's session, shared by every stage (required). */
  session: Session;
}

export { isBlank, LineSplitter } from '../../model/lines.js';

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
 * Backpressure: a write calls back once the next stage has taken what it handed on.
 */
export function createLineParser(options: LineParserOptions): Duplex {
  const opts = withDefaults(LINE_PARSER_DEFAULTS, options);
  const run = requireSession(options, 'createLineParser');
  run.stateHeldLineBytes(opts.maxLineBytes);
  let batch: RecordBatch = [];
  const quarantine = (raw: Buffer, lineNo: number, reason: QuarantineReason, final: boolean) => {
    if (final) run.countQuarantined(lineNo);
    batch.push(Object.freeze({ kind: 'quarantine', lineNo, raw, reason, final }));
  };
  let spool: LineSpool | null = null;
  /**
   * The spool write that failed (a full disk): the chunk's bytes after it, and a line begun in
   * them, are still counted as read, and none of their lines is handed on (see `failWrite`).
   */
  let spoolFailure: OutputError | null = null;
  /** After a failed spool write, whether the long line being counted is blank so far. */
  let uncopiedBlank = true;
  const spoolPiece = (piece: Buffer, lineNo: number) => {
    try {
      spool ??= new LineSpool(spoolDir(options.spoolDir), lineNo);
      spool.push(piece);
    } catch (err) {
      if (!(err instanceof OutputError)) throw err;
      spoolFailure = err;
      // The failed piece was read: blank or not, the line is counted as a held one is.
      uncopiedBlank = spool?.blank ?? true;
      // Its file will not be copied now: deleted at once, which leaves room for index.json.
      spool?.discard();
      spool = null;
    }
  };
  const splitter = new LineSplitter(opts.maxLineBytes, {
    line(raw, lineNo, terminated) {
      if (isBlank(raw)) {
        run.countBlankLine();
        return;
      }
      run.countLines();
      if (spoolFailure !== null) return;
      const c = scanLine(raw, terminated);
      if (c.ok && c.shallow !== undefined) {
        run.warn(
          'LINE_TOO_DENSE',
          `line ${lineNo} holds ${c.shallow} objects and arrays, more than a line of ${raw.length} ` +
            'bytes is parsed with: it was routed by its top-level members, byte for byte; ' +
            'transcripts show none of it',
        );
      }
      if (c.ok) batch.push(scannedRecord(lineNo, raw, c));
      else quarantine(raw, lineNo, c.reason, true);
    },
    junkRun(raw, lineNo, lines) {
      run.countLines(lines);
      if (spoolFailure !== null) return;
      run.countQuarantined(lineNo, lines);
      batch.push(junkRunRecord(raw, lineNo, lines));
    },
    overflow(piece, lineNo, final, terminated = true) {
      if (spoolFailure === null) spoolPiece(piece, lineNo);
      if (spoolFailure !== null) {
        uncopiedBlank &&= isBlank(piece);
        if (!final) return;
        if (uncopiedBlank) run.countBlankLine();
        else run.countLines();
        uncopiedBlank = true;
        return;
      }
      if (!final || spool === null) return;
      if (spool.blank) {
        // A blank line is skipped and counted as one, held or spooled: its length changes nothing.
        spool.discard();
        run.countBlankLine();
      } else batch.push(Object.freeze(endSpool(run, spool, lineNo, terminated, opts.maxLineBytes)));
      spool = null;
    },
  });
  /**
   * A spool write failed: the rest of the chunk and a line it leaves unterminated are counted
   * as read (the input's bytes are counted by the chunk), nothing more is handed on (the lines
   * split with the failed one are not written: nothing is, after a failed write), and the
   * parser fails with the write's error.
   */
  const failWrite = (rest: Buffer | null, err: OutputError, cb: (err: Error) => void) => {
    if (rest !== null) splitter.push(rest);
    splitter.end();
    batch = [];
    cb(err);
  };
  const take = (): RecordBatch | undefined => {
    if (batch.length === 0) return undefined;
    const b = batch;
    batch = [];
    return b;
  };
  /**
   * What a write still has to do once the next stage wants more: the rest of a chunk to split,
   * or the write's callback. A chunk of tiny lines is handed on in batches of at most
   * MAX_BATCH_RECORDS, each once the next stage wants more, so records in flight stay bounded
   * whatever the line length.
   */
  let resume: (() => void) | null = null;
  const stream: Duplex = new Duplex({
    writableObjectMode: false,
    readableObjectMode: true,
    readableHighWaterMark: BATCH_HIGH_WATER_MARK,
    write(chunk: Buffer, _enc, cb) {
      // A chunk buffered before a spool write failed, handed over after it: not read.
      if (spoolFailure !== null) return cb(spoolFailure);
      run.countBytes(chunk.length);
      let rest: Buffer | null = chunk;
      const split = () => {
        for (;;) {
          rest = splitter.push(rest!, MAX_BATCH_RECORDS);
          if (spoolFailure !== null) return failWrite(rest, spoolFailure, cb);
          if (rest === null) break;
          const b = take();
          if (b && !stream.push(b)) {
            resume = split;
            return;
          }
        }
        const b = take();
        // The next chunk is taken once this one's records are (as a Transform holds it).
        if (b && !stream.push(b)) resume = () => cb();
        else cb();
      };
      split();
    },
    read() {
      const next = resume;
      resume = null;
      next?.();
    },
    final(cb) {
      splitter.end();
      warnIfAllQuarantined(run);
      const b = take();
      if (b) stream.push(b);
      stream.push(null);
      cb();
    },
    destroy(err, cb) {
      resume = null;
      spool?.discard();
      cb(err);
    },
  });
  return stream;
}

export const lineParserPlugin = defineBuiltin<Omit<LineParserOptions, 'session' | 'spoolDir'>>({
  name: 'line-parser',
  kind: 'stage',
  kit: BUILTIN_KIT,
  options: {
    maxLineBytes: {
      type: 'integer',
      min: 1024,
      default: LINE_PARSER_DEFAULTS.maxLineBytes,
      description:
        'longest line held in memory; longer lines are spooled to a file in --out and routed from there',
    },
  },
  input: () => 'bytes',
  create: (o, ctx) => createLineParser({ ...o, session: ctx.session, spoolDir: ctx.out }),
});

/** A run of junk lines as one quarantine record (see LineSplitter's `junkRun`), frozen. */
function junkRunRecord(raw: Buffer, lineNo: number, lines: number): SubteeRecord {
  return Object.freeze({ kind: 'quarantine', lineNo, raw, reason: 'not-object', final: true, lines });
}

/** At the end of the input: a warning when no line at all was a JSON object. */
function warnIfAllQuarantined(run: Session): void {
  const { lines, quarantined } = run.input;
  if (lines > 0 && quarantined === lines) {
    const what = `none of the ${lines} input lines is a JSON object, all are in the quarantine file`;
    run.warn('INPUT_QUARANTINED', `${what}: is this Claude Code's --output-format stream-json output?`);
  }
}
