import { constants } from 'node:buffer';

/**
 * A value as JSON text, what JSON.stringify gives, at any depth. JSON.stringify recurses once a
 * level and overflows the stack some 5,000 levels down; the stream chooses how deep a value is,
 * so past that the text is written by a loop with its own stack. A text too long for a string
 * is JSON.stringify's RangeError, not retried.
 */
export function jsonText(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch (err) {
    // A cycle or a BigInt is a TypeError, as it would be below: only depth is handled here.
    if (!(err instanceof RangeError) || !/call stack/i.test(err.message)) throw err;
  }
  return jsonTextByLoop(value);
}

type Frame =
  | { value: readonly unknown[]; keys: null; length: number; at: number; wrote: boolean }
  | { value: Record<string, unknown>; keys: string[]; length: number; at: number; wrote: boolean };

/** Pieces gathered before they are joined into one: the list stays short whatever the value. */
const PIECES_PER_CHUNK = 4096;

/** `[object Number]` and its kin: a boxed primitive from any realm, written as its primitive. */
const BOXED = new Set(['[object Number]', '[object String]', '[object Boolean]', '[object BigInt]']);

/**
 * JSON.stringify as a loop: `toJSON`, and what JSON has no text for, as JSON.stringify treats
 * them. Its pieces are joined as they come, and a text longer than a string can be is refused
 * as JSON.stringify refuses it (RangeError), before it is all held.
 */
export function jsonTextByLoop(root: unknown): string | undefined {
  const chunks: string[] = [];
  let parts: string[] = [];
  let chars = 0;
  const stack: Frame[] = [];
  const onStack = new Set<object>();
  const push = (piece: string) => {
    parts.push(piece);
    chars += piece.length;
  };
  /** Writes a scalar, or opens a container; false when the value has no JSON text (undefined, a function). */
  const write = (raw: unknown, key: string | number): boolean => {
    let value = raw;
    if (typeof value === 'number') {
      push(Number.isFinite(value) ? String(value) : 'null');
      return true;
    }
    if (value !== null && (typeof value === 'object' || typeof value === 'bigint')) {
      const toJSON = (value as { toJSON?: unknown }).toJSON;
      if (typeof toJSON === 'function') value = toJSON.call(value, String(key));
    }
    if (value === null || typeof value !== 'object' || BOXED.has(Object.prototype.toString.call(value))) {
      // A boxed BigInt throws here, as JSON.stringify throws for it.
      const text = JSON.stringify(value);
      if (text === undefined) return false;
      push(text);
      return true;
    }
    if (onStack.has(value)) throw new TypeError('Converting circular structure to JSON');
    onStack.add(value);
    if (Array.isArray(value)) {
      push('[');
      stack.push({ value, keys: null, length: value.length, at: 0, wrote: false });
    } else {
      push('{');
      const keys = Object.keys(value);
      stack.push({ value: value as Record<string, unknown>, keys, length: keys.length, at: 0, wrote: false });
    }
    return true;
  };
  if (!write(root, '')) return undefined;
  while (stack.length > 0) {
    if (chars > constants.MAX_STRING_LENGTH) throw new RangeError('Invalid string length');
    if (parts.length >= PIECES_PER_CHUNK) {
      chunks.push(parts.join(''));
      parts = [];
    }
    const top = stack[stack.length - 1];
    if (top.at === top.length) {
      push(top.keys === null ? ']' : '}');
      onStack.delete(top.value);
      stack.pop();
      continue;
    }
    const at = top.at++;
    if (top.keys === null) {
      if (at > 0) push(',');
      // An element with no JSON text is `null`, as JSON.stringify writes it.
      if (!write(top.value[at], at)) push('null');
      continue;
    }
    const key = top.keys[at];
    const before = parts.length;
    const beforeChars = chars;
    push(`${top.wrote ? ',' : ''}${JSON.stringify(key)}:`);
    // A member with no JSON text is left out, its key with it.
    if (write(top.value[key], key)) top.wrote = true;
    else {
      parts.length = before;
      chars = beforeChars;
    }
  }
  chunks.push(parts.join(''));
  return chunks.join('');
}
