import type { Transform } from 'node:stream';
import {
  createBatchTransform,
  definePlugin,
  LineSpool,
  type RecordBatch,
  type SpooledRecord,
  type SubteeRecord,
} from '../../src/index.js';
import { dirname } from 'node:path';
import { StringDecoder } from 'node:string_decoder';

export const MASK = '[REDACTED]';

/**
 * Credentials that show up in agent transcripts: provider API keys, tokens of code hosts and
 * chat tools, cloud access keys, Authorization headers, and `password=`/`"api_key": "…"`
 * style assignments. The mask has no quote or backslash, so a masked JSON line stays valid.
 */
export const SECRET_PATTERNS: readonly RegExp[] = [
  /sk-ant-[A-Za-z0-9_-]{16,}/g,
  /\bsk-(?:proj-|live-|test-)?[A-Za-z0-9_-]{20,}/g,
  /\bgh[pousr]_[A-Za-z0-9]{30,}/g,
  /\bgithub_pat_[A-Za-z0-9_]{30,}/g,
  /\bglpat-[A-Za-z0-9_-]{20,}/g,
  /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g,
  /\bxox[abprs]-[A-Za-z0-9-]{10,}/g,
  /\bAIza[0-9A-Za-z_-]{35}\b/g,
  /\bnpm_[A-Za-z0-9]{36}\b/g,
  /\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}/g,
];

// Keeps the scheme or key name, masks the value.
const KEEP_PREFIX: readonly RegExp[] = [
  /(\b(?:Bearer|Basic|Token)\s+)[A-Za-z0-9._~+/-]{16,}=*/gi,
  /((?:api[_-]?key|secret|password|passwd|access[_-]?token|auth[_-]?token)\\?"?\s*[:=]\s*\\?"?)[^"\s\\,}]{8,}/gi,
];

// A cheap first look, so lines with nothing secret-like skip the full pass.
const HINT =
  /sk-|gh[pousr]_|github_pat_|glpat-|AKIA|ASIA|xox[abprs]-|AIza|npm_|eyJ|bearer|basic|token|api[_-]?key|secret|passw/i;

export function redact(text: string): string {
  if (!HINT.test(text)) return text;
  let out = text;
  for (const re of SECRET_PATTERNS) out = out.replace(re, MASK);
  for (const re of KEEP_PREFIX) out = out.replace(re, (_m, prefix: string) => prefix + MASK);
  return out;
}

/**
 * A redacted deep copy of a parsed value. A loop with its own stack, not recursion: the
 * stream chooses how deep a value is.
 */
function redactValue(root: unknown): unknown {
  const emptyCopy = (value: object): object => (Array.isArray(value) ? [] : {});
  const copyOf = (value: unknown): unknown => {
    if (typeof value === 'string') return redact(value);
    if (value === null || typeof value !== 'object') return value;
    const copy = emptyCopy(value);
    pending.push([value, copy]);
    return copy;
  };
  const pending: Array<[object, object]> = [];
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

export function redactRecord(rec: SubteeRecord): SubteeRecord {
  if (rec.kind === 'spooled') return redactSpooled(rec);
  const text = rec.raw.toString('utf8');
  const masked = redact(text);
  if (masked === text) return rec;
  if (rec.kind === 'quarantine') return { ...rec, raw: Buffer.from(masked) };
  try {
    return { ...rec, value: JSON.parse(masked), raw: Buffer.from(masked) };
  } catch {
    const value = redactValue(rec.value) as Record<string, unknown>;
    let json: string;
    try {
      json = JSON.stringify(value);
    } catch {
      // Too deep for JSON.stringify: the line keeps its own bytes, its secrets masked.
      json = masked;
    }
    return { ...rec, value, raw: Buffer.from(json) };
  }
}

/** Text of a spooled line redacted at a time (the window grows to the next `,` or `}`). */
const WINDOW_CHARS = 1 << 20;
const MAX_WINDOW_CHARS = 1 << 22;

/**
 * A line too long to hold, redacted as it is copied to a new spool. It is cut after a `,`
 * or `}`: no pattern above can match either, so a secret never straddles a cut and `\b`
 * sees the same neighbour. A stretch longer than MAX_WINDOW_CHARS with neither is cut
 * where it stands, and a secret crossing that cut is masked only in part.
 */
export function redactSpooled(rec: SpooledRecord): SpooledRecord {
  const out = new LineSpool(dirname(rec.spool.path), rec.lineNo);
  const decoder = new StringDecoder('utf8');
  let text = '';
  let changed = false;
  const emit = (piece: string) => {
    const masked = redact(piece);
    changed ||= masked !== piece;
    out.push(Buffer.from(masked));
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

/**
 * A stage that masks secrets in every record before any sink sees it: the raw line (so the
 * `.jsonl` files and the quarantine hold the masked text) and the parsed value (so readable
 * transcripts, stdout and pino do). Put it right after the line parser. `--stdout raw`
 * copies input before any stage and is not masked.
 */
export function createRedactSecrets(): Transform {
  return createBatchTransform({
    transformBatch: (batch: RecordBatch) => batch.map(redactRecord),
  });
}

export default definePlugin<Record<string, never>>({
  name: 'redact-secrets',
  kind: 'stage',
  kit: '^0.1.0',
  options: {},
  create: () => createRedactSecrets(),
});
