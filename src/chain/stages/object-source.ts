import { Transform, type TransformCallback } from 'node:stream';
import { jsonText } from '../../model/json-text.js';
import { ScannedLine } from '../../model/line-view.js';
import { isPlainObject } from '../../model/message.js';
import {
  BATCH_HIGH_WATER_MARK,
  type LineRecord,
  type QuarantineRecord,
  type RecordBatch,
} from '../../model/record.js';
import { requireSession, type Session } from '../../model/session.js';
import { BUILTIN_KIT, defineBuiltin } from '../plugin.js';

export const OBJECT_SOURCE_DEFAULTS = Object.freeze({
  /**
   * Objects gathered into one batch at most. Objects that arrive while a batch waits for the
   * next turn of the event loop are handed on together, so a producer that outruns the chain
   * pays one stream hop per batch rather than per message.
   */
  maxBatch: 512,
});

export interface ObjectSourceOptions {
  maxBatch?: number;
  /** The chain's session, shared by every stage (required). */
  session: Session;
}

/** Stands for a `null` input value: Node streams cannot carry `null`, which ends them. */
export const NULL_INPUT: unique symbol = Symbol('null input');

/**
 * The record one input object becomes: its JSON text is its raw line, so the `.jsonl`
 * files hold what a byte stream of the same messages would have held, and replaying them
 * gives the same index. A value whose JSON text is not an object (a string, an array, a
 * number, a Date, something `JSON.stringify` refuses: a cycle, a BigInt) is quarantined, as
 * the line parser would quarantine that text. Any other value that is not a plain object (a class instance,
 * a Map, one with a `toJSON`) is read as its JSON text reads, for the same reason. A plain
 * object is neither written on nor frozen: the record's `value` is its own, parsed from `raw`.
 */
export function recordOfObject(input: unknown, lineNo: number): LineRecord | QuarantineRecord {
  const value = input === NULL_INPUT ? null : input;
  let text: string | undefined;
  try {
    // At any depth: JSON.stringify overflows some 5,000 levels down, and the caller chose the depth.
    text = jsonText(value);
  } catch {
    text = undefined;
  }
  // Frozen, as the line parser's: a record is never written on.
  if (text === undefined) {
    return Object.freeze({
      kind: 'quarantine',
      lineNo,
      raw: Buffer.from(safeString(value)),
      reason: 'not-json',
      final: true,
    });
  }
  const raw = Buffer.from(text);
  if (text[0] !== '{' || Buffer.isBuffer(value) || value instanceof Uint8Array) {
    return Object.freeze({ kind: 'quarantine', lineNo, raw, reason: 'not-object', final: true });
  }
  if (!isPlainObject(value)) return Object.freeze({ kind: 'line', lineNo, raw, value: JSON.parse(text) });
  // The object stays the caller's: the built-in stages read it as the line's view, and never
  // write on it; `value` is parsed from `raw` when something reads it (a plugin, whose value
  // the kit freezes, a projection that hands it out), so nothing the kit freezes is the caller's.
  return new ScannedLine(lineNo, raw, value);
}

/** Several queued input objects, handed to the transform at once. */
class Gathered {
  constructor(readonly values: unknown[]) {}
}

function safeString(value: unknown): string {
  try {
    return String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/**
 * Object source: the input edge for producers that hand over message objects instead of
 * bytes (the Claude Agent SDK's `query()`, a LangGraph run stream). Objects in, record
 * batches out, exactly as the line parser would emit them for the same messages written one
 * JSON line each: line numbers count from 1, `input.bytes` counts each line and its newline.
 */
export function createObjectSource(options: ObjectSourceOptions): Transform {
  const maxBatch = options.maxBatch ?? OBJECT_SOURCE_DEFAULTS.maxBatch;
  const run = requireSession(options, 'createObjectSource');
  let lineNo = 0;
  const toRecords = (values: unknown[]): RecordBatch => {
    const batch: RecordBatch = [];
    for (const value of values) {
      const rec = recordOfObject(value, ++lineNo);
      run.countLines();
      run.countBytes(rec.raw.length + 1);
      if (rec.kind === 'quarantine') run.countQuarantined(rec.lineNo);
      batch.push(rec);
    }
    return batch;
  };
  const stage = new Transform({
    writableObjectMode: true,
    readableObjectMode: true,
    writableHighWaterMark: maxBatch,
    readableHighWaterMark: BATCH_HIGH_WATER_MARK,
    transform(value: unknown, _enc, cb: TransformCallback) {
      const records = toRecords(value instanceof Gathered ? value.values : [value]);
      // Hand the batch on after one turn of the event loop: objects the producer hands over
      // meanwhile queue up and arrive together below, one batch and one stream hop for all.
      setImmediate(() => cb(null, records));
    },
    // Writes that queued up while the stage was waiting arrive here together (Writable's
    // documented `writev` option) and go through the ordinary transform as one batch, so
    // Transform's own backpressure still applies.
    writev(chunks, cb) {
      this._write(new Gathered(chunks.map((c) => c.chunk)), 'utf8', cb);
    },
  });
  return stage;
}

export const objectSourcePlugin = defineBuiltin<Omit<ObjectSourceOptions, 'session'>>({
  name: 'object-source',
  kind: 'stage',
  kit: BUILTIN_KIT,
  options: {
    maxBatch: {
      type: 'integer',
      min: 1,
      default: OBJECT_SOURCE_DEFAULTS.maxBatch,
      description: 'objects handed on together at most when they queue up',
    },
  },
  input: () => 'objects',
  create: (o, ctx) => createObjectSource({ ...o, session: ctx.session }),
});
