/**
 * A JSON checker for a line that arrives in pieces and is never held whole: it keeps only a
 * stack of open containers and the state of the token it is in, and captures the top-level
 * object's scalar members (its `type`, `parent_tool_use_id`, `timestamp`…) as they pass, and
 * the tool calls and results among the blocks of its `message.content` (see `ToolBlocks`).
 * It judges exactly as `JSON.parse` would judge the UTF-8 decoded line (see `scanJson`).
 *
 * Hand-written rather than stream-json's tokenizer: the tokenizer builds a token object per
 * value and a string per chunk of every string, which for one multi-gigabyte line is the
 * whole cost; a byte loop over the table below runs at several hundred MB/s (see bench/).
 */
import { cutMarker } from './display.js';
import { BACKSLASH, HEX, QUOTE, SIMPLE_ESCAPE } from './scan.js';

// States outside a token.
const ROOT = 0; // before the top-level value
const VALUE = 1; // a value is expected (after `:` or `,` in an array, or `[`)
const KEY = 2; // a key is expected (after `,` in an object)
const KEY_OR_END = 3; // after `{`
const VALUE_OR_END = 4; // after `[`
const COLON = 5;
const AFTER = 6; // after a value: `,`, `}` or `]`
const DONE = 7; // after the top-level value: whitespace only
// States inside a token.
const STRING = 8;
const ESCAPE = 9;
const UNICODE = 10; // counting four hex digits
const NUMBER = 11;
const LITERAL = 12;
const FAILED = 13;

/** Per byte inside a string: 1 for a plain byte, 0 for `"`, `\` or a control character. */
const PLAIN = new Uint8Array(256);
for (let c = 0x20; c < 256; c++) PLAIN[c] = c === QUOTE || c === BACKSLASH ? 0 : 1;
const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;

/**
 * Number grammar positions: after `-`, after a leading 0, in the integer, after `.`, in the
 * fraction, after `e`, after its sign, in the exponent.
 */
const N_SIGN = 0;
const N_ZERO = 1;
const N_INT = 2;
const N_DOT = 3;
const N_FRAC = 4;
const N_E = 5;
const N_ESIGN = 6;
const N_EXP = 7;

/** Tool blocks of a line's `message.content` kept, at most: a line has one block as Claude Code writes it. */
export const TOOL_BLOCKS_KEPT = 64;
/**
 * A tool block's member longer than this (an id, a name, as JSON text) is read as empty: the
 * call or result is counted as on a held line, its id not kept (see `keep`).
 */
export const BLOCK_MEMBER_BYTES = 1024;
/** What a block member too long to keep is read as: an empty string. */
const TOO_LONG_MEMBER = Buffer.from('""');
/** The members of a content block kept: what names a tool call or result. */
const BLOCK_KEYS = new Set(['type', 'id', 'name', 'tool_use_id', 'is_error']);

/** Where the scanner is in the top-level `message.content`: the depth of each place less one. */
const OUTSIDE = 0;
const IN_MESSAGE = 1; // the top-level `message` object (depth 2)
const IN_CONTENT = 2; // its `content` array (depth 3)
const IN_BLOCK = 3; // one of its objects (depth 4)

/** How many times `captureBytes` a line's top-level members may take together. */
export const MEMBERS_CAPTURED = 4;

/**
 * Captured members by their name's JSON bytes (latin1), in the order of their last occurrence: a
 * name seen again, however spelled, replaces its member, so a line repeating one key a million
 * times keeps one.
 */
type Members = Map<string, Buffer>;

/** A captured key or string's JSON text, parsed (a key's captured bytes are its quoted JSON). */
const nameOf = (json: number[] | null): string | null =>
  json === null ? null : (JSON.parse(Buffer.from(json).toString('utf8')) as string);

/** Members as an object: `__proto__` an own member, as JSON.parse makes it. */
function objectOf(members: Members): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, raw] of members) {
    const name = JSON.parse(Buffer.from(key, 'latin1').toString('utf8')) as string;
    const value: unknown = JSON.parse(raw.toString('utf8'));
    if (name === '__proto__')
      Object.defineProperty(out, name, { value, writable: true, enumerable: true, configurable: true });
    else out[name] = value;
  }
  return out;
}

/**
 * A content block as the value of a line too long to hold shows it: a tool call (its `id` and
 * `name`) or a tool result (its `tool_use_id` and `is_error`), what it carries (the call's
 * `input`, the result's `content`) cut, never read; null for any other block.
 */
function toolBlock(block: Record<string, unknown>): Record<string, unknown> | null {
  if (block.type === 'tool_use' && typeof block.id === 'string' && typeof block.name === 'string')
    return { type: 'tool_use', id: block.id, name: block.name, input: cutMarker(null) };
  if (block.type === 'tool_result' && typeof block.tool_use_id === 'string') {
    const error = typeof block.is_error === 'boolean' ? { is_error: block.is_error } : {};
    return { type: 'tool_result', tool_use_id: block.tool_use_id, content: cutMarker(null), ...error };
  }
  return null;
}

export type StreamVerdict =
  | { ok: true; value: Record<string, unknown> }
  | { ok: false; reason: 'not-json' | 'not-object' | 'truncated' };

/**
 * Feed the line with `push`, then ask `end()`. Top-level scalar members are captured up to
 * `captureBytes` each (longer strings are left out of the value, as are nested containers),
 * and up to `MEMBERS_CAPTURED` times that together: a member past it is left out too, and so is
 * an earlier one of the same key, which the line no longer holds.
 */
export class StreamScanner {
  private state = ROOT;
  /**
   * Open containers, one bit each (1: an object, 0: an array), innermost at `depth - 1`: a
   * line nested millions deep costs an eighth of a byte a level, not a number.
   */
  private stack = new Uint8Array(64);
  private depth = 0;
  /** Objects and arrays opened so far: what parsing the line whole would build. */
  containers = 0;
  private inKey = false;
  private literal = '';
  private literalAt = 0;
  private hexLeft = 0;
  private numberAt = N_SIGN;
  private notObject = false;
  // Capture of the top-level object's members.
  private key: number[] | null = null;
  private capture: number[] | null = null;
  private capturing = false;
  /** How long the member being captured may be. */
  private captureLimit = 0;
  private readonly members: Members = new Map();
  /** Bytes of the top-level members captured, keys and values. */
  private membersBytes = 0;
  /** Where a captured member goes: the top-level object's, or the block's being read. */
  private into: Members = this.members;
  /** Where in `message.content` the scanner is (OUTSIDE…IN_BLOCK). */
  private zone = OUTSIDE;
  /** The tool blocks of `message.content` so far; the members of the block being read. */
  private tools: Array<Record<string, unknown>> = [];
  private block: Members | null = null;
  /** The last top-level `message` is an object (not one of the scalar members). */
  private messageObject = false;

  constructor(private readonly captureBytes = 64 * 1024) {}

  get failed(): boolean {
    return this.state === FAILED;
  }

  push(bytes: Buffer): void {
    let i = 0;
    const n = bytes.length;
    while (i < n && this.state !== FAILED) {
      const state = this.state;
      if (state === STRING) {
        // The hot loop: a long string is nearly all of a huge line.
        const start = i;
        while (i < n && PLAIN[bytes[i]] === 1) i++;
        if (this.capturing && i > start) this.keep(bytes, start, i);
        if (i === n) return;
        const c = bytes[i];
        if (this.capturing) this.keep(bytes, i, i + 1);
        i++;
        if (c === QUOTE) this.endString();
        else if (c === BACKSLASH) this.state = ESCAPE;
        else this.fail(); // a raw control character
        continue;
      }
      const c = bytes[i];
      if (this.capturing) this.keep(bytes, i, i + 1);
      i++;
      this.step(c);
    }
  }

  /** The verdict once the line has ended. */
  end(terminated = true): StreamVerdict {
    if (this.state === DONE) return { ok: true, value: this.value() };
    if (this.notObject || this.state === ROOT)
      return { ok: false, reason: terminated ? 'not-object' : 'truncated' };
    return { ok: false, reason: terminated ? 'not-json' : 'truncated' };
  }

  private step(c: number): void {
    switch (this.state) {
      case ESCAPE:
        if (c === 0x75) {
          this.hexLeft = 4;
          this.state = UNICODE;
        } else if (SIMPLE_ESCAPE[c] === 1) {
          this.state = STRING;
        } else {
          this.fail();
        }
        return;
      case UNICODE:
        if (HEX[c] !== 1) return this.fail();
        if (--this.hexLeft === 0) this.state = STRING;
        return;
      case NUMBER:
        if (this.number(c)) return;
        if (this.capturing) this.capture!.pop(); // the byte that ended the number is not part of it
        this.endScalar();
        return this.step(c);
      case LITERAL:
        if (c !== this.literal.charCodeAt(this.literalAt)) return this.fail();
        if (++this.literalAt === this.literal.length) this.endScalar();
        return;
      case ROOT:
        if (c === 0x20 || c === 0x09) return; // as classifyLine: a line may start with spaces and tabs
        if (c !== 0x7b) {
          this.notObject = true;
          return this.fail();
        }
        this.open(c);
        this.state = KEY_OR_END;
        return;
      case DONE:
        if (!isSpace(c)) this.fail();
        return;
      case KEY_OR_END:
      case KEY:
        if (isSpace(c)) return;
        if (c === 0x7d && this.state === KEY_OR_END) return this.close();
        if (c !== QUOTE) return this.fail();
        this.inKey = true;
        if (this.depth === 1 || this.zoneKeys()) {
          this.key = [];
          this.capture = this.key;
          this.capturing = true;
          this.captureLimit = this.depth === 1 ? this.captureBytes : BLOCK_MEMBER_BYTES;
          this.capture.push(c);
        }
        this.state = STRING;
        return;
      case COLON:
        if (isSpace(c)) return;
        if (c !== 0x3a) return this.fail();
        this.state = VALUE;
        return;
      case VALUE:
      case VALUE_OR_END:
        if (isSpace(c)) return;
        if (c === 0x5d && this.state === VALUE_OR_END) return this.close();
        return this.startValue(c);
      case AFTER: {
        if (isSpace(c)) return;
        const inObject = this.innermostIsObject();
        if (c === 0x2c) {
          this.state = inObject ? KEY : VALUE;
          return;
        }
        if ((c === 0x7d && inObject) || (c === 0x5d && !inObject)) return this.close();
        return this.fail();
      }
    }
  }

  /** True where a key is read for `message.content`: in `message`, and in a block being kept. */
  private zoneKeys(): boolean {
    return (
      (this.zone === IN_MESSAGE && this.depth === 2) ||
      (this.zone === IN_BLOCK && this.depth === 4 && this.block !== null)
    );
  }

  private startValue(c: number): void {
    const top = this.depth === 1 && this.key !== null;
    const inBlock =
      this.zone === IN_BLOCK && this.depth === 4 && this.block !== null && BLOCK_KEYS.has(nameOf(this.key)!);
    // A later `content` of the message is its own, as JSON.parse keeps the last.
    if (this.zone === IN_MESSAGE && this.depth === 2 && nameOf(this.key) === 'content') this.tools = [];
    if (c === 0x7b || c === 0x5b) {
      this.enter(c);
      this.key = null; // nested containers are not captured
      this.open(c);
      this.state = c === 0x7b ? KEY_OR_END : VALUE_OR_END;
      return;
    }
    if (top || inBlock) {
      this.capture = [c];
      this.capturing = true;
      this.captureLimit = top ? this.captureBytes : BLOCK_MEMBER_BYTES;
      this.into = top ? this.members : this.block!;
    } else {
      this.key = null;
    }
    if (c === QUOTE) {
      this.inKey = false;
      this.state = STRING;
    } else if (c === 0x74 || c === 0x66 || c === 0x6e) {
      this.literal = c === 0x74 ? 'true' : c === 0x66 ? 'false' : 'null';
      this.literalAt = 1;
      this.state = LITERAL;
    } else if (c === 0x2d || isDigit(c)) {
      this.numberAt = c === 0x2d ? N_SIGN : c === 0x30 ? N_ZERO : N_INT;
      this.state = NUMBER;
    } else {
      this.fail();
    }
  }

  /** One more byte of a number; false when the byte is not part of it. */
  private number(c: number): boolean {
    switch (this.numberAt) {
      case N_SIGN:
        if (!isDigit(c)) return (this.fail(), true);
        this.numberAt = c === 0x30 ? N_ZERO : N_INT;
        return true;
      case N_ZERO:
      case N_INT:
        if (this.numberAt === N_INT && isDigit(c)) return true;
        if (c === 0x2e) return ((this.numberAt = N_DOT), true);
        if (c === 0x65 || c === 0x45) return ((this.numberAt = N_E), true);
        return false;
      case N_DOT:
        if (!isDigit(c)) return (this.fail(), true);
        this.numberAt = N_FRAC;
        return true;
      case N_FRAC:
        if (isDigit(c)) return true;
        if (c === 0x65 || c === 0x45) return ((this.numberAt = N_E), true);
        return false;
      case N_E:
        if (c === 0x2b || c === 0x2d) return ((this.numberAt = N_ESIGN), true);
        if (!isDigit(c)) return (this.fail(), true);
        this.numberAt = N_EXP;
        return true;
      case N_ESIGN:
        if (!isDigit(c)) return (this.fail(), true);
        this.numberAt = N_EXP;
        return true;
      default:
        return isDigit(c);
    }
  }

  private endString(): void {
    if (this.inKey) {
      this.inKey = false;
      this.capturing = false;
      this.state = COLON;
      return;
    }
    this.endScalar();
  }

  private endScalar(): void {
    if (this.state === FAILED) return;
    if (this.capturing && this.key && this.capture) {
      // Keyed by the name, however the line spells it (`"id"`, `"\u0069d"`): one member a name.
      const name = Buffer.from(JSON.stringify(nameOf(this.key))).toString('latin1');
      this.keepMember(name, Buffer.from(this.capture));
      // A later top-level `message` is the line's, as JSON.parse keeps the last.
      if (this.into === this.members && nameOf(this.key) === 'message') {
        this.tools = [];
        this.messageObject = false;
      }
    }
    this.capturing = false;
    this.capture = null;
    this.key = null;
    this.state = this.depth === 0 ? DONE : AFTER;
  }

  /** A captured member, in place of an earlier one of its key; at the top, within the bound. */
  private keepMember(key: string, value: Buffer): void {
    const into = this.into;
    const before = into.get(key);
    into.delete(key);
    if (into !== this.members) {
      into.set(key, value);
      return;
    }
    if (before !== undefined) this.membersBytes -= key.length + before.length;
    if (this.membersBytes + key.length + value.length > MEMBERS_CAPTURED * this.captureBytes) return;
    into.set(key, value);
    this.membersBytes += key.length + value.length;
  }

  private open(c: number): void {
    const byte = this.depth >> 3;
    if (byte === this.stack.length) {
      const grown = new Uint8Array(this.stack.length * 2);
      grown.set(this.stack);
      this.stack = grown;
    }
    const bit = 1 << (this.depth & 7);
    if (c === 0x7b) this.stack[byte] |= bit;
    else this.stack[byte] &= ~bit;
    this.depth++;
    this.containers++;
  }

  private innermostIsObject(): boolean {
    const at = this.depth - 1;
    return (this.stack[at >> 3] & (1 << (at & 7))) !== 0;
  }

  /** A container opens (`c`) as the value of `this.key`: into `message.content` or a block of it. */
  private enter(c: number): void {
    if (this.depth === 1 && c === 0x7b && nameOf(this.key) === 'message') {
      this.zone = IN_MESSAGE;
      this.tools = []; // a later `message` is the line's, as JSON.parse keeps the last
      this.messageObject = true;
    } else if (this.zone === IN_MESSAGE && this.depth === 2 && c === 0x5b && nameOf(this.key) === 'content') {
      this.zone = IN_CONTENT;
    } else if (this.zone === IN_CONTENT && this.depth === 3 && c === 0x7b) {
      this.zone = IN_BLOCK;
      this.block = this.tools.length < TOOL_BLOCKS_KEPT ? new Map() : null;
    }
  }

  /** The container at `this.depth` closes: out of a block, `content` or `message`. */
  private leave(): void {
    if (this.zone === OUTSIDE || this.depth !== this.zone + 1) return;
    if (this.zone === IN_BLOCK && this.block !== null) {
      const tool = toolBlock(objectOf(this.block));
      if (tool) this.tools.push(tool);
      this.block = null;
    }
    this.zone--;
  }

  private close(): void {
    this.leave();
    this.depth--;
    this.key = null;
    this.state = this.depth === 0 ? DONE : AFTER;
  }

  private keep(bytes: Buffer, from: number, to: number): void {
    const into = this.capture!;
    if (into.length + (to - from) > this.captureLimit) {
      // Too long to keep: a top-level member is left out of the value; a block's is read as
      // empty, so the block still counts (a tool call whose id is longer than any CLI makes).
      if (into !== this.key && this.key !== null && this.block !== null && this.into === this.block)
        this.block.set(Buffer.from(JSON.stringify(nameOf(this.key))).toString('latin1'), TOO_LONG_MEMBER);
      this.capturing = false;
      this.key = null;
      this.capture = null;
      return;
    }
    for (let k = from; k < to; k++) into.push(bytes[k]);
  }

  private fail(): void {
    this.state = FAILED;
  }

  /**
   * The top-level scalar members, and when `message.content` has tool calls or results, a
   * `message` holding those alone as `content` (see `toolBlock`).
   */
  private value(): Record<string, unknown> {
    const out = objectOf(this.members);
    // An earlier scalar `message` is not the line's.
    if (this.messageObject) delete out.message;
    if (this.tools.length > 0) out.message = { content: this.tools };
    return out;
  }
}
