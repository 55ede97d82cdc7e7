import { dirname } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import type { JsonObject } from '../model/message.js';
import type { LineRecord, SpooledRecord, SubteeRecord } from '../model/record.js';
import { LineSpool } from './stages/line-spool.js';

/** A rewrite of a line's text: the same text when nothing is to change. */
export type TextRewrite = (text: string) => string;

/** Text of a spooled line rewritten at a time (the window grows to the next `,` or `}`). */
const WINDOW_CHARS = 1 << 20;
const MAX_WINDOW_CHARS = 1 << 22;

/** How rewriteText reads a line besides its text as it stands. */
export interface RewriteOptions {
  /**
   * `rewrite` also sees, first, each JSON string of the line that holds an escape (`\n`,
   * `\t`, `\"`, `\u00e9`) as it decodes, so what it looks for is found as it reads in the
   * text a view shows, whatever escape stands before or inside it. A string it changes is
   * written back as JSON.stringify escapes it; the rest of the line keeps its bytes. (A string
   * without an escape reads the same in the line's text, where `rewrite` sees it next.)
   */
  decodeStrings?: boolean;
}

/**
 * The record with its line's text rewritten by `rewrite`, whatever its kind: a plugin's
 * helper for masking or replacing text. The same record comes back when nothing changed.
 * `rewrite` sees the line's JSON text as it stands, escapes and all, and with
 * `decodeStrings` each string with an escape decoded before that (see RewriteOptions).
 *
 * - A line: its bytes are the rewritten text and its value that text parsed; when the
 *   rewrite broke the JSON, each string of the value is rewritten instead and the line is
 *   that value serialised (or, too deep to serialise, the rewritten text as it is).
 * - A quarantined line: its bytes rewritten (with `decodeStrings`, what reads as a JSON
 *   string with an escape in them first).
 * - A spooled line (too long to hold): copied to a new spool through `rewrite` in windows
 *   of about 1 MiB cut after a `,` or `}`, so a rewrite that never matches across those two
 *   characters sees what it would see whole (a string cut by a window is decoded in its
 *   pieces). A stretch of 4 MiB with neither is cut where it stands, never inside an escape.
 *   Its value (top-level scalars) is left as it is.
 */
export function rewriteText<R extends SubteeRecord>(
  rec: R,
  rewrite: TextRewrite,
  options: RewriteOptions = {},
): R {
  const decode = options.decodeStrings === true;
  if (rec.kind === 'spooled') return rewriteSpooled(rec, rewrite, decode) as R;
  const text = rec.raw.toString('utf8');
  const decoded = decode && text.includes('\\') ? rewriteEscapedStrings(text, rewrite).text : text;
  const changed = rewrite(decoded);
  if (changed === text) return rec;
  if (rec.kind === 'quarantine') return { ...rec, raw: Buffer.from(changed) };
  return rewriteLine(rec as LineRecord, changed, rewrite) as R;
}

function rewriteLine(rec: LineRecord, changed: string, rewrite: TextRewrite): LineRecord {
  try {
    return { ...rec, value: JSON.parse(changed), raw: Buffer.from(changed) };
  } catch {
    const value = mapStrings(rec.value, rewrite) as JsonObject;
    let json: string;
    try {
      json = JSON.stringify(value);
    } catch {
      // Too deep for JSON.stringify: the line keeps its own bytes, rewritten.
      json = changed;
    }
    return { ...rec, value, raw: Buffer.from(json) };
  }
}

/**
 * A deep copy of a parsed value with each string rewritten. A loop with its own stack, not
 * recursion: the stream chooses how deep a value is.
 */
export function mapStrings(root: unknown, rewrite: TextRewrite): unknown {
  const pending: Array<[object, object]> = [];
  const copyOf = (value: unknown): unknown => {
    if (typeof value === 'string') return rewrite(value);
    if (value === null || typeof value !== 'object') return value;
    const copy = Array.isArray(value) ? [] : {};
    pending.push([value, copy]);
    return copy;
  };
  const top = copyOf(root);
  for (let next = pending.pop(); next; next = pending.pop()) {
    const [source, copy] = next;
    for (const [key, value] of Object.entries(source)) {
      // A data property even for a key named `__proto__`, as JSON.parse makes it.
      const property = { value: copyOf(value), writable: true, enumerable: true, configurable: true };
      Object.defineProperty(copy, key, property);
    }
  }
  return top;
}

/**
 * `text` with each JSON string in it that holds an escape rewritten as it decodes, the rest
 * as it stands. `inString`: the text starts inside a string (a window of a longer line); the
 * answer says whether it ends inside one. A string that does not decode (an escape JSON does
 * not have, a raw control character) is left as it stands.
 */
export function rewriteEscapedStrings(
  text: string,
  rewrite: TextRewrite,
  inString = false,
): { text: string; inString: boolean } {
  let out = '';
  let kept = -1;
  let at = 0;
  for (;;) {
    if (!inString) {
      const quote = text.indexOf('"', at);
      if (quote === -1) break;
      at = quote + 1;
      inString = true;
    }
    const start = at;
    let end = -1;
    let escaped = false;
    QUOTE_OR_ESCAPE.lastIndex = start;
    for (let m = QUOTE_OR_ESCAPE.exec(text); m !== null; m = QUOTE_OR_ESCAPE.exec(text)) {
      if (m[0] === '"') {
        end = m.index;
        break;
      }
      escaped = true;
      QUOTE_OR_ESCAPE.lastIndex = m.index + 2;
    }
    const stop = end === -1 ? text.length : end;
    const decoded = escaped ? decodeJsonString(text.slice(start, stop)) : null;
    if (decoded !== null) {
      const rewritten = rewrite(decoded);
      if (rewritten !== decoded) {
        out += text.slice(Math.max(kept, 0), start) + JSON.stringify(rewritten).slice(1, -1);
        kept = stop;
      }
    }
    if (end === -1) break;
    at = end + 1;
    inString = false;
  }
  return { text: kept === -1 ? text : out + text.slice(kept), inString };
}

const QUOTE_OR_ESCAPE = /["\\]/g;

/** A JSON string's text between its quotes, decoded; null when it is not JSON. */
function decodeJsonString(content: string): string | null {
  try {
    return JSON.parse(`"${content}"`) as string;
  } catch {
    return null;
  }
}

/**
 * Where to cut `text` at or before `at` so no escape (`\n`, `\u00e9`) is split: `at`, or the
 * start of the escape it would fall inside.
 */
function cutOutsideEscape(text: string, at: number): number {
  for (let k = at - 1; k >= Math.max(0, at - 6); k--) {
    if (text[k] !== '\\') continue;
    let run = 1;
    while (k - run >= 0 && text[k - run] === '\\') run++;
    // An even run is escaped backslashes, whole; an odd one ends with an escape's start.
    if (run % 2 === 0) return at;
    return k + (text[k + 1] === 'u' ? 6 : 2) > at ? k : at;
  }
  return at;
}

function rewriteSpooled(rec: SpooledRecord, rewrite: TextRewrite, decode: boolean): SpooledRecord {
  const out = new LineSpool(dirname(rec.spool.path), rec.lineNo);
  const decoder = new StringDecoder('utf8');
  let text = '';
  let changed = false;
  let inString = false;
  const emit = (piece: string) => {
    let rewritten = piece;
    if (decode) ({ text: rewritten, inString } = rewriteEscapedStrings(piece, rewrite, inString));
    rewritten = rewrite(rewritten);
    changed ||= rewritten !== piece;
    out.push(Buffer.from(rewritten));
  };
  try {
    rec.spool.copy((bytes) => {
      text += decoder.write(bytes);
      while (text.length >= WINDOW_CHARS) {
        const cut =
          Math.max(text.lastIndexOf(',', MAX_WINDOW_CHARS), text.lastIndexOf('}', MAX_WINDOW_CHARS)) + 1;
        if (cut === 0 && text.length < MAX_WINDOW_CHARS) break;
        const at = cut > 0 ? cut : cutOutsideEscape(text, MAX_WINDOW_CHARS);
        emit(text.slice(0, at));
        text = text.slice(at);
      }
    });
    emit(text + decoder.end());
  } catch (err) {
    out.discard();
    throw err;
  }
  if (!changed) {
    out.discard();
    return rec;
  }
  const next = out.finish(true);
  rec.spool.release();
  return { ...next, channel: rec.channel, events: rec.events };
}
