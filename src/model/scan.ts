/**
 * A validating JSON scanner over bytes, and views built from what it records.
 *
 * `JSON.parse` decodes a whole line to a string and builds every value in it; most of a
 * stream-json line's bytes are strings a transcript shows only in part (a thinking block's
 * head and tail, a tool result's first 500 characters) or not at all (the `tool_use_result`
 * copy of a tool's output). The scanner checks the line against the JSON grammar byte by
 * byte, exactly as `JSON.parse` would judge the UTF-8 decoded text (see `scanJson`), and
 * records each value's place on a tape: four integers per value, no strings, no objects.
 * A view is then built from the tape on demand, decoding only what is read; the long
 * strings a transcript shortens stay in the input bytes as `LazyText`.
 */
import { isUtf8 } from 'node:buffer';

export const TAG_OBJECT = 1;
export const TAG_ARRAY = 2;
export const TAG_STRING = 3;
export const TAG_NUMBER = 4;
export const TAG_TRUE = 5;
export const TAG_FALSE = 6;
export const TAG_NULL = 7;
const TAG_MASK = 7;
/** A string with at least one escape sequence. */
export const STRING_ESCAPED = 8;
/** A string with at least one byte of 0x80 or above. */
export const STRING_HIGH = 16;

/**
 * The record of one scan, four integers per value, in document order:
 * - object / array: tag, start byte, index just past its last descendant, member count;
 *   an object's members follow as key (a string entry) and value, pairs in order;
 * - string: tag (with STRING_ESCAPED / STRING_HIGH), first byte after the opening quote,
 *   the closing quote's byte, length in UTF-16 units (exact when the bytes are valid UTF-8);
 * - number: tag, start, end; true / false / null: the tag alone.
 */
export class Tape {
  ints: Int32Array;
  used = 0;

  constructor(capacity = 1024) {
    this.ints = new Int32Array(capacity);
  }

  /** Empties the tape for the next scan; a tape a very large line grew is let go. */
  reset(capacity: number): void {
    this.used = 0;
    if (this.ints.length > capacity * 16) this.ints = new Int32Array(capacity);
  }

  grow(need: number): void {
    let cap = this.ints.length * 2;
    while (cap < need) cap *= 2;
    const next = new Int32Array(cap);
    next.set(this.ints.subarray(0, this.used));
    this.ints = next;
  }
}

/**
 * Node's Buffer has decoding methods without `toString`'s argument checks; they are what
 * `toString` calls, on every Node version subtee supports.
 */
export type Bytes = Buffer & {
  latin1Slice(start: number, end: number): string;
  utf8Slice(start: number, end: number): string;
};

export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
/** Per byte inside a string: UTF-16 units it adds (0 for a continuation byte), or SPECIAL. */
const SPECIAL = 64;
const UNITS = new Uint8Array(256);
/** 1 for a hex digit (in `\uXXXX`), 1 for a character allowed after `\` (the JSON grammar). */
export const HEX = new Uint8Array(256);
export const SIMPLE_ESCAPE = new Uint8Array(256);
for (let c = 0; c < 256; c++) {
  UNITS[c] =
    c < 0x20 || c === QUOTE || c === BACKSLASH ? SPECIAL : c < 0x80 ? 1 : c < 0xc0 ? 0 : c < 0xf0 ? 1 : 2;
}
/** 1 for a byte that ends an ASCII run inside a string: a quote, a backslash, a control or high byte. */
const ASCII_STOP = new Uint8Array(256);
for (let c = 0; c < 256; c++) ASCII_STOP[c] = c < 0x20 || c === QUOTE || c === BACKSLASH || c >= 0x80 ? 1 : 0;
for (const ch of '0123456789abcdefABCDEF') HEX[ch.charCodeAt(0)] = 1;
for (const ch of '"\\/bfnrt') SIMPLE_ESCAPE[ch.charCodeAt(0)] = 1;

class Invalid extends Error {}
const INVALID = new Invalid('not JSON');
const DENSE = new Invalid('too many values');

// The scanner's state lives in module variables: the hot loops read them without a closure.
let b: Buffer = Buffer.alloc(0);
let i = 0;
let n = 0;
let tape: Tape = new Tape(4);
let ints = tape.ints;

let budget = 0;
/** Past this many values in one line the scanner lets JSON.parse decide (4 integers a value). */
const MAX_TAPE_INTS = 1 << 22;
let depth = 0;
/**
 * Past this nesting the scanner lets JSON.parse decide: the scan and the view built from it
 * recurse once a level, and how deep a stack goes differs between threads, so the limit is
 * a number, the same on every thread, not a stack overflow.
 */
export const MAX_SCAN_DEPTH = 256;

function entry(tag: number, x: number, y: number, z: number): number {
  let at = tape.used;
  if (at + 4 > ints.length) {
    if (at + 4 > budget) throw DENSE;
    tape.grow(at + 4);
    ints = tape.ints;
  }
  ints[at] = tag;
  ints[at + 1] = x;
  ints[at + 2] = y;
  ints[at + 3] = z;
  tape.used = at + 4;
  return at;
}

function skipSpace(): void {
  while (i < n) {
    const c = b[i];
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
    else return;
  }
}

function scanString(): void {
  const start = ++i;
  const buf = b;
  const end = n;
  let j = start;
  let units = 0;
  let high = 0;
  let escaped = 0;
  for (;;) {
    // ASCII runs are the common case: one unit a byte, nothing to add up.
    const from = j;
    while (j < end && ASCII_STOP[buf[j]] === 0) j++;
    units += j - from;
    if (j >= end) throw INVALID;
    const c = buf[j];
    if (c === QUOTE) break;
    if (c >= 0x80) {
      high = STRING_HIGH;
      while (j < end && buf[j] >= 0x80) units += UNITS[buf[j++]];
      continue;
    }
    if (c !== BACKSLASH) throw INVALID; // a raw control character
    escaped = STRING_ESCAPED;
    const d = buf[j + 1];
    if (d === 0x75) {
      if (j + 5 >= end || (HEX[buf[j + 2]] & HEX[buf[j + 3]] & HEX[buf[j + 4]] & HEX[buf[j + 5]]) === 0)
        throw INVALID;
      j += 6;
    } else if (SIMPLE_ESCAPE[d] === 1) {
      j += 2;
    } else {
      throw INVALID;
    }
    units++;
  }
  entry(TAG_STRING | escaped | high, start, j, units);
  i = j + 1;
}

function digits(): void {
  const c = b[i];
  if (!(c >= 0x30 && c <= 0x39)) throw INVALID;
  i++;
  while (i < n && b[i] >= 0x30 && b[i] <= 0x39) i++;
}

function scanNumber(): void {
  const start = i;
  if (b[i] === 0x2d) i++;
  if (b[i] === 0x30) i++;
  else if (b[i] >= 0x31 && b[i] <= 0x39) digits();
  else throw INVALID;
  if (b[i] === 0x2e) {
    i++;
    digits();
  }
  if (b[i] === 0x65 || b[i] === 0x45) {
    i++;
    if (b[i] === 0x2b || b[i] === 0x2d) i++;
    digits();
  }
  entry(TAG_NUMBER, start, i, 0);
}

function literal(word: string, tag: number): void {
  for (let k = 0; k < word.length; k++) if (b[i + k] !== word.charCodeAt(k)) throw INVALID;
  entry(tag, i, i + word.length, 0);
  i += word.length;
}

function scanObject(): void {
  if (++depth > MAX_SCAN_DEPTH) throw DENSE;
  const at = entry(TAG_OBJECT, i, 0, 0);
  i++;
  skipSpace();
  let count = 0;
  if (b[i] === 0x7d) {
    i++;
  } else {
    for (;;) {
      skipSpace();
      if (b[i] !== QUOTE) throw INVALID;
      scanString();
      skipSpace();
      if (b[i] !== 0x3a) throw INVALID;
      i++;
      scanValue();
      count++;
      skipSpace();
      const c = b[i++];
      if (c === 0x2c) continue;
      if (c === 0x7d) break;
      throw INVALID;
    }
  }
  ints[at + 2] = tape.used;
  ints[at + 3] = count;
  depth--;
}

function scanArray(): void {
  if (++depth > MAX_SCAN_DEPTH) throw DENSE;
  const at = entry(TAG_ARRAY, i, 0, 0);
  i++;
  skipSpace();
  let count = 0;
  if (b[i] === 0x5d) {
    i++;
  } else {
    for (;;) {
      scanValue();
      count++;
      skipSpace();
      const c = b[i++];
      if (c === 0x2c) continue;
      if (c === 0x5d) break;
      throw INVALID;
    }
  }
  ints[at + 2] = tape.used;
  ints[at + 3] = count;
  depth--;
}

function scanValue(): void {
  skipSpace();
  const c = b[i];
  if (c === QUOTE) scanString();
  else if (c === 0x7b) scanObject();
  else if (c === 0x5b) scanArray();
  else if (c === 0x74) literal('true', TAG_TRUE);
  else if (c === 0x66) literal('false', TAG_FALSE);
  else if (c === 0x6e) literal('null', TAG_NULL);
  else scanNumber();
}

/** What `scanJson` found. `UNDECIDED`: too deep or too many values for the scanner; ask `JSON.parse`. */
export const NOT_JSON = -1;
export const UNDECIDED = -2;

/**
 * Scans `buf[start, end)` as one JSON text whose value is an object, appending its entries
 * to `into`. Returns the tape index of the object, NOT_JSON, or UNDECIDED.
 *
 * The verdict is `JSON.parse(buf.toString('utf8', start, end))`'s: the grammar of RFC 8259,
 * whitespace of space, tab, CR and LF only, no control character inside a string, only the
 * escapes `\" \\ \/ \b \f \n \r \t \uXXXX`. Bytes that are not valid UTF-8 are accepted inside
 * strings and nowhere else, as their decoding to U+FFFD would be.
 */
export function scanJson(buf: Buffer, start: number, end: number, into: Tape): number {
  b = buf;
  i = start;
  n = end;
  tape = into;
  ints = into.ints;
  const mark = into.used;
  // A line of many tiny values (`[0,0,0,…]`) would need a tape larger than the line itself;
  // JSON.parse judges those.
  budget = mark + Math.min(MAX_TAPE_INTS, Math.max(4096, (end - start) >> 1));
  depth = 0;
  try {
    skipSpace();
    if (b[i] !== 0x7b) return NOT_JSON;
    scanObject();
    skipSpace();
    if (i !== n) {
      into.used = mark;
      return NOT_JSON;
    }
    return mark;
  } catch (err) {
    into.used = mark;
    if (err === INVALID) return NOT_JSON;
    if (err === DENSE) return UNDECIDED;
    throw err;
  } finally {
    b = EMPTY;
  }
}
const EMPTY = Buffer.alloc(0);

// ── Views ────────────────────

/**
 * A JSON string left in the input bytes: its length is known, its text is decoded only as
 * far as it is read (`slice`), or whole on `toString()`. Built only for well-formed UTF-8,
 * so every length and slice is exactly the decoded string's.
 */
export class LazyText {
  private decoded: string | undefined;

  constructor(
    private readonly buf: Bytes,
    private readonly start: number,
    private readonly end: number,
    /** Length in UTF-16 units, as `String.prototype.length` counts. */
    readonly length: number,
    private readonly escaped: boolean,
  ) {}

  toString(): string {
    return (this.decoded ??= this.decode(this.start, this.end));
  }

  toJSON(): string {
    return this.toString();
  }

  /**
   * `String.prototype.slice`. A head or a tail is decoded from a window of bytes sized by
   * the string's average bytes per unit, widened until it holds enough; anything else
   * decodes the whole string.
   */
  slice(from = 0, to = this.length): string {
    const len = this.length;
    from = from < 0 ? Math.max(len + from, 0) : Math.min(from, len);
    to = to < 0 ? Math.max(len + to, 0) : Math.min(to, len);
    if (from >= to) return '';
    if (this.decoded !== undefined) return this.decoded.slice(from, to);
    // ASCII: one byte per unit.
    if (len === this.end - this.start) return this.buf.latin1Slice(this.start + from, this.start + to);
    if (from === 0) return this.head(to) ?? this.toString().slice(0, to);
    if (to === len) return this.tail(len - from) ?? this.toString().slice(from);
    return this.toString().slice(from, to);
  }

  /** The first `units` units, or null when the bytes near a cut cannot be judged cheaply. */
  private head(units: number): string | null {
    const perUnit = (this.end - this.start) / this.length;
    for (let bytes = Math.ceil(units * perUnit * 1.1) + 16; ; bytes *= 2) {
      if (this.start + bytes >= this.end) return this.toString().slice(0, units);
      const cut = this.boundaryAt(this.start + bytes);
      if (cut < 0) return null;
      const text = this.decode(this.start, cut);
      if (text.length >= units) return text.slice(0, units);
    }
  }

  /** The last `units` units, or null when the bytes near a cut cannot be judged cheaply. */
  private tail(units: number): string | null {
    const perUnit = (this.end - this.start) / this.length;
    for (let bytes = Math.ceil(units * perUnit * 1.1) + 16; ; bytes *= 2) {
      if (this.end - bytes <= this.start) return this.toString().slice(this.length - units);
      const cut = this.boundaryAt(this.end - bytes);
      if (cut < 0) return null;
      const text = this.decode(cut, this.end);
      if (text.length >= units) return text.slice(text.length - units);
    }
  }

  /**
   * The character or escape boundary at or before byte `p`: not inside a UTF-8 sequence, not
   * inside an escape. -1 on a run of backslashes too long to count cheaply.
   */
  private boundaryAt(p: number): number {
    const buf = this.buf;
    while (p > this.start && (buf[p] & 0xc0) === 0x80) p--;
    if (!this.escaped) return p;
    for (let q = p - 1; q >= Math.max(this.start, p - 5); q--) {
      if (buf[q] !== BACKSLASH) continue;
      // A backslash starts an escape when the run of backslashes before it is even.
      let run = 0;
      while (q - run - 1 >= this.start && buf[q - run - 1] === BACKSLASH) if (++run > 64) return -1;
      if (run % 2 === 1) continue;
      const width = buf[q + 1] === 0x75 ? 6 : 2;
      return q + width > p ? q : p;
    }
    return p;
  }

  private decode(from: number, to: number): string {
    const backslash = this.escaped ? this.buf.indexOf(BACKSLASH, from) : -1;
    if (backslash === -1 || backslash >= to) return this.buf.utf8Slice(from, to);
    return JSON.parse(`"${this.buf.utf8Slice(from, to)}"`) as string;
  }
}

export const isText = (value: unknown): value is string | LazyText =>
  typeof value === 'string' || value instanceof LazyText;

/** Strings shorter than this are decoded as they are reached; they are not worth a LazyText. */
export const LAZY_TEXT_BYTES = 1024;
/**
 * Where a value sits. Long strings stay lazy in two places only: a content block's
 * `thinking` or `content` (`message.content[*]`), and anywhere in the top-level
 * `tool_use_result` (the CLI's copy of a tool's output, which no built-in stage reads).
 */
const MESSAGE = 1;
const MESSAGE_MEMBER = 2;
const CONTENT_ITEM = 3;
const BLOCK_MEMBER = 4;
const ANYWHERE = 5;

let cursor = 0;

/**
 * Short ASCII strings repeat from line to line (keys, types, ids of the session): a small
 * direct-mapped cache hands back the same string instead of decoding a new one, which also
 * spares V8 internalizing each key again.
 */
const SHORT = 40;
const short: Array<string | undefined> = new Array(1024).fill(undefined);

function decodeString(buf: Bytes, tag: number, start: number, end: number): string {
  if (tag & STRING_ESCAPED) return JSON.parse(buf.utf8Slice(start - 1, end + 1)) as string;
  if (tag & STRING_HIGH) return buf.utf8Slice(start, end);
  const len = end - start;
  if (len > SHORT) return buf.latin1Slice(start, end);
  if (len === 0) return '';
  const slot = (len * 31 + buf[start] * 7 + buf[end - 1] * 13 + buf[start + (len >> 1)] * 3) & 1023;
  const hit = short[slot];
  if (hit !== undefined && hit.length === len) {
    let k = 0;
    while (k < len && hit.charCodeAt(k) === buf[start + k]) k++;
    if (k === len) return hit;
  }
  const str = buf.latin1Slice(start, end);
  short[slot] = str;
  return str;
}

/** Builds the value at tape index `at`; leaves `cursor` just past it. */
function build(buf: Bytes, t: Int32Array, at: number, where: number, key: string): unknown {
  const tag = t[at];
  switch (tag & TAG_MASK) {
    case TAG_STRING: {
      cursor = at + 4;
      const start = t[at + 1];
      const end = t[at + 2];
      const lazyHere =
        where === ANYWHERE || (where === BLOCK_MEMBER && (key === 'thinking' || key === 'content'));
      if (lazyHere && end - start >= LAZY_TEXT_BYTES) {
        if (!(tag & STRING_HIGH) || isUtf8(buf.subarray(start, end))) {
          return new LazyText(buf, start, end, t[at + 3], (tag & STRING_ESCAPED) !== 0);
        }
      }
      return decodeString(buf, tag, start, end);
    }
    case TAG_NUMBER:
      cursor = at + 4;
      return +buf.latin1Slice(t[at + 1], t[at + 2]);
    case TAG_TRUE:
      cursor = at + 4;
      return true;
    case TAG_FALSE:
      cursor = at + 4;
      return false;
    case TAG_NULL:
      cursor = at + 4;
      return null;
    case TAG_ARRAY: {
      const count = t[at + 3];
      const out: unknown[] = new Array(count);
      const inner =
        where === ANYWHERE ? ANYWHERE : where === MESSAGE_MEMBER && key === 'content' ? CONTENT_ITEM : 0;
      let k = at + 4;
      for (let m = 0; m < count; m++) {
        out[m] = build(buf, t, k, inner, '');
        k = cursor;
      }
      cursor = t[at + 2];
      return out;
    }
    default: {
      const count = t[at + 3];
      const out: Record<string, unknown> = {};
      const inner =
        where === ANYWHERE
          ? ANYWHERE
          : where === MESSAGE
            ? MESSAGE_MEMBER
            : where === CONTENT_ITEM
              ? BLOCK_MEMBER
              : 0;
      let k = at + 4;
      for (let m = 0; m < count; m++) {
        const name = decodeString(buf, t[k], t[k + 1], t[k + 2]);
        const value = build(buf, t, k + 4, inner, name);
        k = cursor;
        if (name === '__proto__')
          Object.defineProperty(out, name, { value, writable: true, enumerable: true, configurable: true });
        else out[name] = value;
      }
      cursor = t[at + 2];
      return out;
    }
  }
}

/** Line types whose content the built-in stages read. */
const INTERPRETED: ReadonlySet<string> = new Set(['assistant', 'user', 'system', 'result']);

/**
 * The view of the object at tape index `at`, the whole of `buf`:
 * - a line whose top-level `type` is a string other than assistant, user, system or result
 *   (a `stream_event` token delta, a type subtee does not know) holds its top-level scalars
 *   only, and a `stream_event` its `event`'s `type` and `usage` too: no built-in
 *   stage reads further into such a line, and building its nested objects cost more than the
 *   rest of its routing;
 * - any other line equals what `JSON.parse` returns for the same bytes, except that strings
 *   of LAZY_TEXT_BYTES or more are LazyText where no built-in stage needs them whole: a
 *   content block's `thinking` or `content` in `message.content`, and anything in the
 *   top-level `tool_use_result`. (No property is lazy: accessors defined per object gave
 *   each view its own hidden class, which kept input chunks alive until a full GC.)
 */
export function buildView(buf: Bytes, from: Tape, at: number): Record<string, unknown> {
  const t = from.ints;
  const count = t[at + 3];
  let type: string | undefined;
  for (let m = 0, k = at + 4; m < count; m++) {
    if (isKey(buf, t, k, 'type'))
      type =
        (t[k + 4] & TAG_MASK) === TAG_STRING ? decodeString(buf, t[k + 4], t[k + 5], t[k + 6]) : undefined;
    k = next(t, k + 4);
  }
  if (type !== undefined && !INTERPRETED.has(type)) return head(buf, t, at, type === 'stream_event');
  const out: Record<string, unknown> = {};
  let k = at + 4;
  for (let m = 0; m < count; m++) {
    const name = decodeString(buf, t[k], t[k + 1], t[k + 2]);
    const value = build(
      buf,
      t,
      k + 4,
      name === 'message' ? MESSAGE : name === 'tool_use_result' ? ANYWHERE : 0,
      name,
    );
    if (name === '__proto__')
      Object.defineProperty(out, name, { value, writable: true, enumerable: true, configurable: true });
    else out[name] = value;
    k = cursor;
  }
  return out;
}

/**
 * The top-level scalars of the object at `at`; nested containers are left out, except a
 * stream event's `event`, as `eventHead` reads it.
 */
function head(buf: Bytes, t: Int32Array, at: number, withEvent = false): Record<string, unknown> {
  const count = t[at + 3];
  const out: Record<string, unknown> = {};
  for (let m = 0, k = at + 4; m < count; m++) {
    const v = k + 4;
    const tag = t[v] & TAG_MASK;
    if (withEvent && tag === TAG_OBJECT && isKey(buf, t, k, 'event')) {
      out.event = eventHead(buf, t, v);
    } else if (tag !== TAG_OBJECT && tag !== TAG_ARRAY) {
      const name = decodeString(buf, t[k], t[k + 1], t[k + 2]);
      const value = build(buf, t, v, 0, name);
      if (name === '__proto__')
        Object.defineProperty(out, name, { value, writable: true, enumerable: true, configurable: true });
      else out[name] = value;
    }
    k = next(t, v);
  }
  return out;
}

/**
 * A stream event as the built-in stages read it: its `type` (`message_start`, `message_stop`
 * tell the idle watchdog where a streamed message is) and its `usage` scalars (a
 * `message_delta`'s final `output_tokens`, which the cost ledger reads); nothing else is
 * decoded, as most stream events are token deltas nobody reads in the view.
 */
function eventHead(buf: Bytes, t: Int32Array, at: number): Record<string, unknown> {
  const count = t[at + 3];
  const out: Record<string, unknown> = {};
  for (let m = 0, k = at + 4; m < count; m++) {
    const v = k + 4;
    const tag = t[v] & TAG_MASK;
    if (tag === TAG_STRING && isKey(buf, t, k, 'type'))
      out.type = decodeString(buf, t[v], t[v + 1], t[v + 2]);
    else if (tag === TAG_OBJECT && isKey(buf, t, k, 'usage')) out.usage = head(buf, t, v);
    k = next(t, v);
  }
  return out;
}

/**
 * A whole document read from a scan of it, a part at a time, so a large document (index.json
 * of 10,000 channels) is never one object graph at once: the tape indexes of the members of
 * the object at `at` and of the elements of an array, and the value at an index, built as
 * `JSON.parse` builds it.
 */
export function membersAt(buf: Buffer, from: Tape, at: number): Array<[key: string, at: number]> {
  const t = from.ints;
  const members: Array<[string, number]> = [];
  for (let m = 0, k = at + 4, count = t[at + 3]; m < count; m++, k = next(t, k + 4))
    members.push([decodeString(buf as Bytes, t[k], t[k + 1], t[k + 2]), k + 4]);
  return members;
}

/** The tape indexes of the array's elements; null when the value at `at` is not an array. */
export function elementsAt(from: Tape, at: number): number[] | null {
  const t = from.ints;
  if ((t[at] & TAG_MASK) !== TAG_ARRAY) return null;
  const elements: number[] = [];
  for (let e = 0, k = at + 4, count = t[at + 3]; e < count; e++, k = next(t, k)) elements.push(k);
  return elements;
}

export function valueAt(buf: Buffer, from: Tape, at: number): unknown {
  return build(buf as Bytes, from.ints, at, 0, '');
}

/** The tape index just past the value at `at`. */
function next(t: Int32Array, at: number): number {
  const tag = t[at] & TAG_MASK;
  return tag === TAG_OBJECT || tag === TAG_ARRAY ? t[at + 2] : at + 4;
}

/** Whether the string entry at `k` is the ASCII key `name`, without decoding it. */
function isKey(buf: Buffer, t: Int32Array, k: number, name: string): boolean {
  const start = t[k + 1];
  if (t[k + 2] - start !== name.length)
    return (t[k] & STRING_ESCAPED) !== 0 && decodeString(buf as Bytes, t[k], start, t[k + 2]) === name;
  for (let j = 0; j < name.length; j++) if (buf[start + j] !== name.charCodeAt(j)) return false;
  return true;
}
