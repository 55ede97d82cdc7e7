import { isAscii } from 'node:buffer';
import type { JsonObject } from './message.js';
import { freezeDeep } from './freeze-deep.js';
import { LazyLine, lineOf, RoutedLine, type LineRecord, type SubteeRecord } from './record.js';
import { buildView, NOT_JSON, scanJson, Tape, type Bytes } from './scan.js';
import { StreamScanner } from './stream-scan.js';

let VALUE: PropertyDescriptor;
let viewOfScanned: (rec: ScannedLine) => JsonObject;
let parsedValueOf: (rec: ScannedLine) => JsonObject | undefined;

/** Lines handed to a plugin before their value was parsed: it is frozen through as it is. */
const freezeWhenParsed = new WeakSet<ScannedLine>();

/**
 * A line record whose `value` is parsed only when something reads it. The line was checked
 * by the scanner (it is a JSON object) and the built-in stages read `viewOf(rec)`: the same
 * object built from the scan, with the long strings a transcript shortens left undecoded
 * (see `buildView` for exactly what a view holds). From the object source, the view is the
 * caller's own message object, read and never written on or frozen: `value` is a copy.
 *
 * `value` is an own, enumerable accessor with no setter, so `{ ...rec }` copies a parsed
 * value as it always did; the view is private, so a copy never carries a view of bytes it no
 * longer holds. The record is frozen: a stage that changes a line hands on a new record. Once
 * `value` has been read, `viewOf` returns it, so every stage after reads that one object;
 * handed to a plugin, it is frozen all through as it is parsed (`freezeValueOf`).
 */
export class ScannedLine extends LazyLine implements LineRecord {
  readonly kind = 'line' as const;
  declare readonly value: JsonObject;
  #value: JsonObject | undefined = undefined;
  #view: JsonObject;

  constructor(
    readonly lineNo: number,
    readonly raw: Buffer,
    view: JsonObject,
  ) {
    super();
    this.#view = view;
    Object.defineProperty(this, 'value', VALUE);
    Object.freeze(this);
  }

  static {
    VALUE = {
      get(this: ScannedLine) {
        if (this.#value !== undefined) return this.#value;
        const value = JSON.parse(lineText(this.raw)) as JsonObject;
        if (freezeWhenParsed.has(this)) freezeDeep(value);
        return (this.#value = value);
      },
      enumerable: true,
    };
    viewOfScanned = (rec) => rec.#value ?? rec.#view;
    parsedValueOf = (rec) => rec.#value;
  }
}

/**
 * Freezes what a record's `value` holds, all through, as the kit hands the record to a plugin's
 * function: a write anywhere in it throws, so a plugin cannot change what the readable views
 * show of a line while its bytes (the `.jsonl`) say otherwise. A line whose value is not parsed
 * yet (a long line, read through its view) is frozen as it is parsed, so a plugin that never
 * reads it still costs nothing; a value is walked once, however many plugins are handed it.
 */
export function freezeValueOf(rec: SubteeRecord): void {
  if (rec.kind === 'quarantine') return;
  const line = rec.kind === 'line' ? lineOf(rec) : null;
  if (!(line instanceof ScannedLine)) return freezeDeep(rec.value);
  const parsed = parsedValueOf(line);
  if (parsed !== undefined) freezeDeep(parsed);
  else freezeWhenParsed.add(line);
}

/**
 * What the built-in stages read of a line: the view a ScannedLine was scanned into, else
 * `value`. Long strings in `message.content` blocks (`thinking`, a tool result's `content`)
 * may be LazyText.
 */
export function viewOf(rec: LineRecord): JsonObject {
  const line = rec instanceof RoutedLine ? lineOf(rec) : rec;
  if (line instanceof ScannedLine) return viewOfScanned(line);
  return line.value;
}

export type Scanned =
  | { ok: true; view: JsonObject; value?: undefined; shallow?: undefined }
  /** `shallow`: the line makes this many containers, too many to parse; `value` is its top-level scalars. */
  | { ok: true; view?: undefined; value: JsonObject; shallow?: number }
  | { ok: false; reason: 'not-json' | 'not-object' | 'truncated' };

/** Scratch space for one line's scan; the view built from it keeps nothing of it. */
const SCRATCH_INTS = 1 << 14;
const scratch = new Tape(SCRATCH_INTS);

/**
 * Lines shorter than this are parsed with `JSON.parse`, longer ones checked by the scanner and
 * read through a view. Up to here the whole value is built faster than a view and what the
 * views then decode of its lazy strings (the transcript shows thinking whole and a tool
 * result's head and tail): on 100 MB of large lines (`bench/gen.ts`, seed 1) whole runs took
 * about 0.1 CPU-s less than with 1 KiB, for the same peak memory. Past it, a line's strings
 * are worth leaving in its bytes (the `tool_use_result` copy of a long tool output, which no
 * built-in stage reads).
 */
export const PARSE_LINE_BYTES = 64 * 1024;

/**
 * classifyLine's verdict, by the scanner; `JSON.parse` decides only what the scanner cannot.
 * A line shorter than `parseBelow` is parsed with `JSON.parse` directly (a `stream_event`
 * token delta's too: its view costs what the parse does). Either way the verdict is the same.
 */
export function scanLine(line: Buffer, terminated: boolean, parseBelow = PARSE_LINE_BYTES): Scanned {
  const plan = planLine(line, parseBelow);
  if (plan === 'not-object') return { ok: false, reason: terminated ? 'not-object' : 'truncated' };
  if (plan === 'parse') return parseWhole(line, terminated);
  scratch.reset(SCRATCH_INTS);
  return fromScan(line, scratch, scanJson(line, 0, line.length, scratch), terminated);
}

/** How `scanLine` judges a line: at once, by `JSON.parse`, or by the scanner. */
export function planLine(line: Buffer, parseBelow = PARSE_LINE_BYTES): 'not-object' | 'parse' | 'scan' {
  let k = 0;
  while (k < line.length && (line[k] === 0x20 || line[k] === 0x09)) k++;
  if (line[k] !== 0x7b) return 'not-object';
  return line.length < parseBelow ? 'parse' : 'scan';
}

/** The verdict of a scan: `at` is what scanJson returned for `line` (tape positions relative to `bytes`). */
export function fromScan(
  line: Buffer,
  tape: Tape,
  at: number,
  terminated: boolean,
  bytes: Buffer = line,
): Scanned {
  if (at >= 0) return { ok: true, view: buildView(bytes as Bytes, tape, at) };
  if (at === NOT_JSON) return { ok: false, reason: terminated ? 'not-json' : 'truncated' };
  return parseBounded(line, terminated);
}

/**
 * How many objects and arrays a line the scanner left undecided may make when parsed whole:
 * `JSON.parse` builds some 60 bytes for each, whatever their nesting, so `[[[…]]]` 8 million
 * deep in 16 MB would take half a gigabyte. Past this a line is read as a line too long to
 * hold is: checked byte by byte, routed by its top-level scalar members, kept byte for byte.
 */
export const PARSE_LIMITS = Object.freeze({
  /** Any line may make this many... */
  containersFloor: 256 * 1024,
  /** ...or one for every this many of its bytes, whichever is more. */
  bytesPerContainer: 16,
});

/**
 * The verdict on a line the scanner left to `JSON.parse` (too deep, or too many values for a
 * tape): parsed whole when what that builds is bounded by the line's size (`PARSE_LIMITS`),
 * else its top-level scalar members only (`shallow`).
 */
export function parseBounded(line: Buffer, terminated: boolean): Scanned {
  const allowed = Math.max(PARSE_LIMITS.containersFloor, line.length / PARSE_LIMITS.bytesPerContainer);
  // Every container takes two bytes at least: a short line cannot make too many.
  if (line.length / 2 <= allowed) return parseWhole(line, terminated);
  const checker = new StreamScanner();
  checker.push(line);
  const verdict = checker.end(terminated);
  if (!verdict.ok) return { ok: false, reason: terminated ? 'not-json' : 'truncated' };
  if (checker.containers <= allowed) return parseWhole(line, terminated);
  return { ok: true, value: verdict.value as JsonObject, shallow: checker.containers };
}

export function parseWhole(line: Buffer, terminated: boolean): Scanned {
  let value: unknown;
  try {
    value = JSON.parse(lineText(line));
  } catch {
    return { ok: false, reason: terminated ? 'not-json' : 'truncated' };
  }
  // A line that starts with `{` and parses is an object.
  return { ok: true, value: value as JsonObject };
}

/**
 * A line's bytes as text, as `toString('utf8')` decodes them. An ASCII line (most are: JSON
 * escapes what it writes beyond ASCII, and Claude Code writes most text as it is) is decoded
 * as Latin-1, which gives the same string without UTF-8's decoding: a loop parsing every line
 * of 200 MB of small lines (`bench/gen.ts`) took 2.26–2.30 s this way against 2.68–3.37 s.
 */
export function lineText(line: Buffer): string {
  const bytes = line as Bytes;
  return isAscii(line) ? bytes.latin1Slice(0, line.length) : bytes.utf8Slice(0, line.length);
}

/** The record of a line `scanLine` accepted, frozen. */
export function scannedRecord(lineNo: number, raw: Buffer, scanned: Scanned & { ok: true }): LineRecord {
  if (scanned.view) return new ScannedLine(lineNo, raw, scanned.view);
  return Object.freeze({ kind: 'line', lineNo, raw, value: scanned.value });
}

/**
 * A line read back that is known to be a JSON object (a channel's file, a replay buffer), as
 * `parseBounded` reads it: whole, or by its top-level scalar members when parsing it whole
 * would build more than its size allows. Throws a SyntaxError when it is not an object.
 */
export function lineValue(line: Buffer): JsonObject {
  const read = parseBounded(line, true);
  if (!read.ok || read.value === undefined)
    throw new SyntaxError(`not a JSON object line (${read.ok ? 'not an object' : read.reason})`);
  return read.value;
}

