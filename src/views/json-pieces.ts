/**
 * `JSON.stringify(value, null, 2)` handed out in pieces, so a large document (the index of
 * 10,000 channels) is written without ever being one string. The outer `levels` of plain
 * objects and arrays are walked here, with a stack of fixed depth (never deeper than
 * `levels`, whatever the data holds); everything below them is one `JSON.stringify` call per
 * member. The pieces joined equal `JSON.stringify(value, null, 2)` exactly, for any value
 * JSON.stringify accepts, except that a `toJSON` method of a member written whole is called
 * with the key `'0'` rather than its member's name (no value subtee writes has one).
 */

import { isPlainObject } from '../model/message.js';

const INDENT = '  ';

/**
 * An array whose members are made only as they are written: `jsonPieces` walks it as an
 * array, asking for one member at a time, so a member is garbage as soon as its piece is
 * written (10,000 channel entries of an index were otherwise all alive at once, at the end
 * of the run when memory peaks). `JSON.stringify` sees the array itself (`toJSON`).
 */
export class MadeOnDemand<T> {
  constructor(
    readonly length: number,
    private readonly make: (index: number) => T,
  ) {}

  at(index: number): T {
    return this.make(index);
  }

  toJSON(): T[] {
    return Array.from({ length: this.length }, (_, i) => this.make(i));
  }
}

interface Frame {
  readonly isArray: boolean;
  readonly source: Record<string, unknown> | unknown[] | MadeOnDemand<unknown>;
  /** The members written, in JSON.stringify's order; omitted ones (undefined…) left out. */
  readonly keys: readonly string[] | null;
  readonly length: number;
  readonly indent: string;
  next: number;
}

/**
 * A plain object or array, walked member by member (a `toJSON` or a boxed primitive is not),
 * or members made on demand, walked as the array they stand for.
 */
function walkable(value: unknown): value is Record<string, unknown> | unknown[] | MadeOnDemand<unknown> {
  if (value === null || typeof value !== 'object') return false;
  return Array.isArray(value) || value instanceof MadeOnDemand || isPlainObject(value);
}

/** A member JSON.stringify leaves out of an object. */
function omitted(value: unknown): boolean {
  if (value === undefined || typeof value === 'function' || typeof value === 'symbol') return true;
  // Asking its toJSON would make every member at once.
  if (value instanceof MadeOnDemand) return false;
  const toJSON = value !== null && typeof value === 'object' && (value as { toJSON?: unknown }).toJSON;
  return typeof toJSON === 'function' && JSON.stringify(value) === undefined;
}

/**
 * One member written whole, at `indent`: stringified inside as many arrays as its indent has
 * levels, which JSON.stringify indents for us, then cut out of them. Re-indenting its text
 * instead made two more copies of every entry (with 10,000 channels, 40 MB of garbage at the
 * end of the run, when memory peaks).
 */
function whole(value: unknown, indent: string): string {
  const levels = indent.length / INDENT.length;
  let wrapped: unknown = value;
  for (let k = 0; k < levels; k++) wrapped = [wrapped];
  const text = JSON.stringify(wrapped, null, 2);
  if (text === undefined) return 'null';
  // Level k (from 0) opens with `[\n` and k + 1 indents and closes with `\n`, k indents, `]`:
  // for two levels, `[\n  [\n    ` before the member and `\n  ]\n]` after it.
  return text.slice(levels * (levels + 3), text.length - levels * (levels + 1));
}

export function* jsonPieces(value: unknown, levels = 2): Generator<string, void, undefined> {
  const stack: Frame[] = [];
  /** Opens a container as a frame, or hands back its text when it is written whole. */
  const open = (member: unknown, indent: string): string => {
    if (stack.length >= levels || !walkable(member)) return whole(member, indent);
    const isArray = Array.isArray(member) || member instanceof MadeOnDemand;
    const keys = isArray
      ? null
      : Object.keys(member).filter((k) => !omitted((member as Record<string, unknown>)[k]));
    const length = keys ? keys.length : (member as unknown[] | MadeOnDemand<unknown>).length;
    if (length === 0) return isArray ? '[]' : '{}';
    stack.push({ isArray, source: member, keys, length, indent, next: 0 });
    return isArray ? '[' : '{';
  };
  if (omitted(value) && !walkable(value)) {
    // JSON.stringify gives undefined here: there is no document to write.
    return;
  }
  yield open(value, '');
  while (stack.length > 0) {
    const frame = stack[stack.length - 1];
    if (frame.next === frame.length) {
      stack.pop();
      yield `\n${frame.indent}${frame.isArray ? ']' : '}'}`;
      continue;
    }
    const at = frame.next++;
    const inner = frame.indent + INDENT;
    const key = frame.keys ? frame.keys[at] : null;
    const source = frame.source;
    const member =
      key !== null
        ? (source as Record<string, unknown>)[key]
        : source instanceof MadeOnDemand
          ? source.at(at)
          : (source as unknown[])[at];
    const lead = `${at === 0 ? '\n' : ',\n'}${inner}${key === null ? '' : `${JSON.stringify(key)}: `}`;
    yield lead + open(member, inner);
  }
}
