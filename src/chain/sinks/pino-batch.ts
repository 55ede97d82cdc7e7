import type { DestinationStream } from 'pino';
import { needsTerminalSafeJson, terminalSafeJson } from '../../views/escape.js';

/**
 * Bytes handed to the destination at most at a time (a longer line goes on its own): below
 * glibc's mmap threshold, so the buffer is reused memory rather than fresh pages.
 */
const PIECE_BYTES = 96 * 1024;

/** Buffer's own encoder, which `write` calls after checking its arguments. */
type Utf8Write = { utf8Write(text: string, offset: number): number };

/**
 * A destination for pino that encodes the lines of one batch of records into a few large
 * buffers and hands those to the real destination: a synchronous destination otherwise makes
 * one system call per event, which cost more than building the events. A line is encoded as
 * it comes, into the piece being filled (joining the lines into one string first, then
 * encoding it, cost a tenth of a small-line run with `--pino`); a full piece is written at
 * once, and the sink flushes at the end of every batch, so a line is written as soon as its
 * record has passed, and memory is bounded by a piece. (sonic-boom's own `minLength`
 * buffering re-measures its whole buffer on every write, which is quadratic in the buffer.)
 * The destination takes bytes (`contentMode: 'buffer'`): given text, it measures each
 * piece's UTF-8 length twice before writing it. A piece handed on is never written into
 * again: the destination may keep it until a full pipe takes it.
 */
export function batchLines(dest: { write(data: Buffer): boolean }): {
  stream: DestinationStream;
  flush(): void;
} {
  let piece: Buffer | null = null;
  let used = 0;
  const flush = () => {
    if (piece !== null && used > 0) dest.write(piece.subarray(0, used));
    piece = null;
    used = 0;
  };
  return {
    stream: {
      write(line: string) {
        // At most three bytes per UTF-16 unit.
        const most = line.length * 3;
        if (piece !== null && used + most > piece.length) flush();
        if (most > PIECE_BYTES) {
          dest.write(Buffer.from(line, 'utf8'));
          return true;
        }
        piece ??= Buffer.allocUnsafe(PIECE_BYTES);
        used += (piece as Buffer & Utf8Write).utf8Write(line, used);
        return true;
      },
    },
    flush,
  };
}

/** pino's numbers for the levels the sink logs at. */
export const PINO_LEVELS = Object.freeze({ info: 30, warn: 40, error: 50 });

const NODE_MAJOR = Number(process.versions.node.split('.')[0]);

/** Keys as pinoString renders them: the sink logs a few dozen keys, again on every line. */
const KEY_TEXT = new Map<string, string>();
const KEY_TEXT_MAX = 256;

function keyText(key: string): string {
  let text = KEY_TEXT.get(key);
  if (text === undefined) {
    text = pinoString(key);
    if (KEY_TEXT.size < KEY_TEXT_MAX) KEY_TEXT.set(key, text);
  }
  return text;
}

/**
 * Values of the fields that name who and what (a channel id, an agent, a tool), rendered once
 * while they repeat: every event of a channel names it again. Forgotten all at once when full.
 */
const NAMING_KEYS: ReadonlySet<string> = new Set([
  'kind',
  'channel',
  'parent',
  'agent',
  'role',
  'tool',
  'status',
]);
const NAME_TEXT = new Map<string, string>();
const NAME_TEXT_MAX = 4096;

function nameText(value: string): string {
  let text = NAME_TEXT.get(value);
  if (text === undefined) {
    text = pinoString(value);
    if (NAME_TEXT.size >= NAME_TEXT_MAX) NAME_TEXT.clear();
    NAME_TEXT.set(value, text);
  }
  return text;
}

/**
 * A string as pino writes it (its `asString`): short strings without a control character
 * are quoted with only `"` and `\` escaped, everything else is `JSON.stringify`'s (always, on
 * Node 25 and later). The two differ only for a lone surrogate in a short string. Unlike
 * pino, JSON_TERMINAL_UNSAFE characters and the second `#` of a `##[` are written as `\uXXXX`
 * escapes (terminalSafeJson): the same JSON value, nothing a terminal or a job log acts on. One
 * test of the regular expression and one plain search clear most strings (asking
 * `Buffer.byteLength` first whether a string is ASCII cost more on strings that are not).
 */
function pinoString(str: string): string {
  if (needsTerminalSafeJson(str)) return terminalSafeJson(JSON.stringify(str));
  if (NODE_MAJOR >= 25 || str.length > 100) return JSON.stringify(str);
  let result = '';
  let last = 0;
  let found = false;
  let point = 255;
  for (let i = 0; i < str.length && point >= 32; i++) {
    point = str.charCodeAt(i);
    if (point === 34 || point === 92) {
      result += str.slice(last, i) + '\\';
      last = i;
      found = true;
    }
  }
  result = found ? result + str.slice(last) : str;
  return point < 32 ? JSON.stringify(str) : `"${result}"`;
}

/**
 * One pino log line, rendered here rather than by a logger: the bytes pino writes for
 * `logger[level](fields, msg)` with `base: null`, `messageKey: 'msg'` and this `time`
 * (`{"level":…,"time":"…",` the fields in order, undefined ones left out, `"msg":…}` and a
 * newline), but for what terminalSafeJson writes as `\uXXXX` escapes (pinoString). A
 * logger call costs as much again as the line itself: it re-walks the fields, checks hooks
 * and mixins, and writes each line on its own.
 */
export function pinoLine(level: number, time: string, fields: Record<string, unknown>, msg: string): string {
  let line = `{"level":${level},"time":"${time}"`;
  for (const key in fields) {
    if (!Object.prototype.hasOwnProperty.call(fields, key)) continue;
    let value: unknown = fields[key];
    let text: string | undefined;
    switch (typeof value) {
      case 'undefined':
      case 'function':
        continue;
      case 'number':
        text = Number.isFinite(value) ? String(value) : 'null';
        break;
      case 'boolean':
        text = String(value);
        break;
      case 'string':
        text = NAMING_KEYS.has(key) ? nameText(value as string) : pinoString(value as string);
        break;
      default:
        value = JSON.stringify(value);
        if (value === undefined) continue;
        text = needsTerminalSafeJson(value as string)
          ? terminalSafeJson(value as string)
          : (value as string);
    }
    line += `,${keyText(key)}:${text}`;
  }
  return `${line},"msg":${pinoString(msg)}}\n`;
}
