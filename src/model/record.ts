import type { JsonObject } from './message.js';
import type { Channel, ChannelEvent } from './tree.js';

export type { ChannelEvent } from './tree.js';

/** A JSON object line, as the line parser emits it and every later stage passes it on. */
export interface LineRecord {
  kind: 'line';
  /** 1-based line number in the input, blank lines included (so `sed -n Np` finds it). */
  lineNo: number;
  /** The line's bytes without its terminator; sinks write these unchanged. */
  raw: Buffer;
  /** The parsed object. */
  value: JsonObject;
  /**
   * Set by the channel router: the live channel, to be read while the record is being handled
   * (it changes as later lines arrive; `events` carry snapshots that do not).
   */
  channel?: Channel;
  /** Tree changes this line caused, set by the channel router. */
  events?: readonly ChannelEvent[];
  /** Readable text overrides set by stages such as the thinking truncator (block index → text; null hides the block). */
  display?: Map<number, string | null>;
  /** Full thinking texts moved out of the transcript (thinking truncator, `file` mode). */
  thinkingFull?: string[];
}

/** Bytes that are not a JSON object line. Kept byte for byte for the quarantine file. */
export interface QuarantineRecord {
  kind: 'quarantine';
  lineNo: number;
  raw: Buffer;
  reason: QuarantineReason;
  /**
   * False while a line longer than the parser's limit is still being streamed out in
   * pieces: the pieces of one line are consecutive and the last one has `final: true`.
   */
  final: boolean;
}

/** `failed`: a JSON line a stage could not handle (see Session.recordFailed). */
export type QuarantineReason = 'not-json' | 'not-object' | 'truncated' | 'too-long' | 'failed';

export type SubteeRecord = LineRecord | QuarantineRecord;

/**
 * What flows between object-mode stages: the records of one input chunk, in order. Moving
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
