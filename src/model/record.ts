import type { UsageEvent } from './cost.js';
import type { JsonObject } from './message.js';
import type { RoutedEvent, ToolEvent } from './run-model.js';
import type { ChannelEvent, ChannelPlace, ReadonlyChannel } from './tree.js';

export type { ChannelEvent } from './tree.js';

/**
 * A JSON object line, as the line parser emits it and every later stage passes it on. Never
 * written on: the stages that make records freeze them, the kit freezes the value all through
 * where it hands one to a plugin, and a stage that changes a line hands on a new record (its
 * bytes and value both: `rewriteText`).
 */
export interface LineRecord {
  readonly kind: 'line';
  /** 1-based line number in the input, blank lines included (so `sed -n Np` finds it). */
  readonly lineNo: number;
  /** The line's bytes without its terminator; sinks write these unchanged. */
  readonly raw: Buffer;
  /** The parsed object. */
  readonly value: JsonObject;
  /**
   * On the envelope the channel router makes (`RoutedLine`): the channel the line is on, the
   * tree's own node, read only (a write on it throws, see ReadonlyChannel), to be read while
   * the record is being handled (it changes as later lines arrive; `events` carry snapshots
   * that do not).
   */
  readonly channel?: ReadonlyChannel;
  /**
   * On the router's envelope: where the channel sat as the line was routed (its parent, depth
   * and agent), frozen: a view names the line's channel by this, however late it reads it.
   */
  readonly place?: ChannelPlace;
  /** On the router's envelope: the tree changes this line caused, frozen. */
  readonly events?: readonly ChannelEvent[];
  /** On the router's envelope: what the cost ledger counted for this line, when it counted any. */
  readonly usage?: UsageEvent;
  /** On the router's envelope: the line's tool calls and results, when it has any. */
  readonly tools?: readonly ToolEvent[];
  /**
   * Made by an input adapter from an input line whose bytes another record carries (a
   * subagent's prompt from its spawn call, a message joined from its pieces): routed and
   * shown like any line, never written to a `.jsonl`, so each input line is kept once.
   */
  readonly derived?: true;
  /**
   * Set by an input adapter on the record that carries an input line's own bytes when its
   * `value` is what that line's event was mapped to (a coding agent's event read as a Claude
   * Code line), not `raw` parsed: its `.jsonl` keeps `raw`, a replay of the line routed takes
   * `value`.
   */
  readonly mapped?: true;
}

/** Bytes that are not a JSON object line. Kept byte for byte for the quarantine file. */
export interface QuarantineRecord {
  readonly kind: 'quarantine';
  readonly lineNo: number;
  readonly raw: Buffer;
  readonly reason: QuarantineReason;
  /**
   * False on all but the last of consecutive pieces of one line. subtee's own input edges
   * always set true (a line too long to hold arrives as a SpooledRecord); sinks still join
   * pieces, for a stage that hands a line on in parts.
   */
  readonly final: boolean;
  /**
   * How many input lines `raw` holds, from `lineNo` on, joined by their newlines: the line
   * parser hands a run of short lines that cannot be JSON objects on as one record. 1 when
   * absent. See `quarantinedLines`.
   */
  readonly lines?: number;
}

/** Each input line of a quarantine record, with its line number: one, or each of a run. */
export function quarantinedLines(rec: QuarantineRecord): Array<{ lineNo: number; raw: Buffer }> {
  if (rec.lines === undefined || rec.lines <= 1) return [{ lineNo: rec.lineNo, raw: rec.raw }];
  const out: Array<{ lineNo: number; raw: Buffer }> = [];
  let start = 0;
  for (let k = 0; k < rec.lines; k++) {
    const nl = k === rec.lines - 1 ? rec.raw.length : rec.raw.indexOf(0x0a, start);
    out.push({ lineNo: rec.lineNo + k, raw: rec.raw.subarray(start, nl) });
    start = nl + 1;
  }
  return out;
}

/** `failed`: a JSON line a stage could not handle (see Session.recordFailed). */
export type QuarantineReason = 'not-json' | 'not-object' | 'truncated' | 'too-long' | 'failed';

/**
 * A line longer than the parser's `maxLineBytes`: its bytes went to a spool file as they
 * arrived and are never held whole. It is routed like any line when it is a JSON object
 * (`value` then holds its top-level scalar members only: its content is not interpreted),
 * and quarantined otherwise (`reason`). Sinks copy `spool` byte for byte.
 */
export interface SpooledRecord {
  readonly kind: 'spooled';
  readonly lineNo: number;
  /** The line's first bytes, for previews; the whole line is in `spool`. */
  readonly head: Buffer;
  readonly spool: Spool;
  /**
   * The top-level scalar members (`type`, `parent_tool_use_id`…) of a JSON object line; null
   * when quarantined.
   */
  readonly value: JsonObject | null;
  /** Why the line is quarantined; null when it is routed. */
  readonly reason: QuarantineReason | null;
  /** On the router's envelope, as for a line record. */
  readonly channel?: ReadonlyChannel;
  readonly place?: ChannelPlace;
  readonly events?: readonly ChannelEvent[];
  /** On the router's envelope, as for a line record: read from `value`. */
  readonly usage?: UsageEvent;
  readonly tools?: readonly ToolEvent[];
  /** As for a line record: `value` is what the line's event was mapped to. */
  readonly mapped?: true;
}

/** The bytes of one spooled line, in a file of its own. */
export interface Spool {
  readonly path: string;
  readonly bytes: number;
  /**
   * Hands the line's bytes to `write` in order, in pieces of at most 1 MiB from one reused
   * buffer: `write` must be done with a piece when it returns.
   */
  copy(write: (piece: Buffer) => void): void;
  /** Deletes the file. The chain's end calls it; a spool still there at exit is deleted then. */
  release(): void;
}

export type SubteeRecord = LineRecord | QuarantineRecord | SpooledRecord;

let innerOf: (rec: RoutedLine) => LineRecord;

/**
 * A line record whose `value` is built only when something reads it (the line parser's
 * `ScannedLine`, an own accessor): a routed line around one reads it through, lazily too.
 */
export abstract class LazyLine {}

/**
 * A line as the channel router hands it on: a new, frozen envelope around the record it was
 * given (whose bytes and value it shares), with what the model said of the line (its
 * `RoutedEvent`): the channel, the tree changes it caused (`events`), the usage counted
 * (`usage`) and its tool calls and results (`tools`), the last three present only when the
 * line has them. `value` is the given record's: the same object, or, around a `LazyLine`,
 * read only when something reads it (an own, enumerable accessor, so `{ ...rec }` copies
 * it); `lineOf` gives the record inside, whose scanned view the built-in stages read.
 */
export class RoutedLine implements LineRecord {
  readonly kind = 'line' as const;
  readonly lineNo: number;
  readonly raw: Buffer;
  declare readonly value: JsonObject;
  readonly channel: ReadonlyChannel;
  readonly place: ChannelPlace;
  // Declared, not defined: a line without events, not derived or not mapped has no such key at all.
  declare readonly events?: readonly ChannelEvent[];
  declare readonly usage?: UsageEvent;
  declare readonly tools?: readonly ToolEvent[];
  declare readonly derived?: true;
  declare readonly mapped?: true;
  readonly #line: LineRecord;

  constructor(line: LineRecord, routed: RoutedEvent) {
    this.lineNo = line.lineNo;
    this.raw = line.raw;
    this.#line = line;
    // A plain property where the value is already built: an accessor defined on each object
    // costs V8 a hidden class per object (building 338,000 such objects took 205–351 ms with
    // one, 35–77 ms without).
    if (line instanceof LazyLine) Object.defineProperty(this, 'value', ROUTED_VALUE);
    else this.value = line.value;
    this.channel = routed.channel;
    this.place = routed.place;
    const { changes, usage, tools } = routed;
    if (changes.length > 0) this.events = changes;
    if (usage !== null) this.usage = usage;
    if (tools.length > 0) this.tools = tools;
    if (line.derived) this.derived = true;
    if (line.mapped) this.mapped = true;
    Object.freeze(this);
  }

  static {
    innerOf = (rec) => rec.#line;
  }
}

const ROUTED_VALUE: PropertyDescriptor = {
  get(this: RoutedLine) {
    return innerOf(this).value;
  },
  enumerable: true,
};

/** The record a routed line was made from (itself for any other line record). */
export function lineOf(rec: LineRecord): LineRecord {
  return rec instanceof RoutedLine ? innerOf(rec) : rec;
}

/**
 * A spooled line as the channel router hands it on: a new, frozen record with what the model
 * said of it, as a routed line has it (its channel and, when it has them, its tree changes,
 * usage and tool events).
 */
export function routedSpooled(rec: SpooledRecord, routed: RoutedEvent): SpooledRecord {
  const { channel, place, changes, usage, tools } = routed;
  return Object.freeze({
    ...rec,
    channel,
    place,
    ...(changes.length > 0 ? { events: changes } : {}),
    ...(usage !== null ? { usage } : {}),
    ...(tools.length > 0 ? { tools } : {}),
  });
}

/**
 * What flows between object-mode stages: the records of one input chunk (of at most
 * MAX_BATCH_RECORDS of its lines when they are many), in order. Moving
 * arrays instead of single records keeps the per-record cost of stream plumbing out of the
 * hot path (a stream hop costs about as much as routing a small line). A stage may return a
 * shorter or longer array (dropping or adding records); an empty one is not passed on.
 */
export type RecordBatch = SubteeRecord[];

/**
 * Batches a stage buffers on each side. A batch holds a whole input chunk (up to 1 MiB), so
 * the object-mode default of 16 would let every stage hold 16 MiB; two keep memory flat
 * without starving the next stage.
 */
export const BATCH_HIGH_WATER_MARK = 2;

/**
 * Input lines in one batch from the line parser, at most, each line of a junk run counted
 * (see QuarantineRecord.lines): a 256 KiB read of one-byte lines would otherwise be 131,072
 * records at once, in every stage's buffers (448 MB peak on 45 million such lines), and a
 * sink that writes an event per line (pino, ClickHouse) would hold as many events; lines of a
 * few hundred bytes never reach it.
 */
export const MAX_BATCH_RECORDS = 1024;
