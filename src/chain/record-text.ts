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

/**
 * The record with its line's text rewritten by `rewrite`, whatever its kind: a plugin's
 * helper for masking or replacing text. The same record comes back when nothing changed.
 *
 * - A line: its bytes are the rewritten text and its value that text parsed; when the
 *   rewrite broke the JSON, each string of the value is rewritten instead and the line is
 *   that value serialised (or, too deep to serialise, the rewritten text as it is).
 * - A quarantined line: its bytes rewritten.
 * - A spooled line (too long to hold): copied to a new spool through `rewrite` in windows of
 *   about 1 MiB cut after a `,` or `}`, so a rewrite that never matches across those two
 *   characters sees what it would see whole. A stretch of 4 MiB with neither is cut where it
 *   stands. Its value (top-level scalars) is left as it is.
 */
export function rewriteText<R extends SubteeRecord>(rec: R, rewrite: TextRewrite): R {
  if (rec.kind === 'spooled') return rewriteSpooled(rec, rewrite) as R;
  const text = rec.raw.toString('utf8');
  const changed = rewrite(text);
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

function rewriteSpooled(rec: SpooledRecord, rewrite: TextRewrite): SpooledRecord {
  const out = new LineSpool(dirname(rec.spool.path), rec.lineNo);
  const decoder = new StringDecoder('utf8');
  let text = '';
  let changed = false;
  const emit = (piece: string) => {
    const rewritten = rewrite(piece);
    changed ||= rewritten !== piece;
    out.push(Buffer.from(rewritten));
  };
  try {
    rec.spool.copy((bytes) => {
      text += decoder.write(bytes);
      while (text.length >= WINDOW_CHARS) {
        const cut =
          Math.max(text.lastIndexOf(',', MAX_WINDOW_CHARS), text.lastIndexOf('}', MAX_WINDOW_CHARS)) + 1;
        const at = cut > 0 ? cut : Math.min(text.length, MAX_WINDOW_CHARS);
        if (cut === 0 && text.length < MAX_WINDOW_CHARS) break;
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
