import { Transform, type TransformCallback, type TransformOptions } from 'node:stream';
import { BATCH_HIGH_WATER_MARK, type RecordBatch } from '../model/record.js';
import { passOn } from './sinks/pass-on.js';

/** What a stage or sink hands on from a batch: records, or nothing. */
export type HandOn = RecordBatch | undefined | void;

/**
 * What a batch hook returns: what to hand on, or a promise of it. A promise holds the batch's
 * callback until it settles, which holds the input (backpressure); a rejection, like a throw,
 * fails the chain with that error.
 */
export type BatchOutcome = HandOn | PromiseLike<HandOn>;

export interface BatchTransformOptions extends TransformOptions {
  /**
   * A sink: batches are handed on only when something reads its output (`passOn`), so a sink
   * at the end of a program's own `pipeline()` does not fill its buffer and stall the chain.
   */
  sink?: boolean;
}

/**
 * The shell every stage and sink shares: an object-mode Transform (high-water mark
 * `BATCH_HIGH_WATER_MARK` on both sides) that takes one `RecordBatch` at a time. A subclass
 * overrides the hooks: `transformBatch` for each batch, `flushAtEnd` when the input ends,
 * `teardown` when the stream is destroyed (an interrupt, a stall, an error anywhere in the
 * chain, or the normal end), which is where a sink writes what it still holds.
 */
export class BatchTransform extends Transform {
  readonly #sink: boolean;

  constructor({ sink = false, ...options }: BatchTransformOptions = {}) {
    super({ objectMode: true, highWaterMark: BATCH_HIGH_WATER_MARK, ...options });
    this.#sink = sink;
  }

  /** One batch in; what to hand on (usually the same batch) out. */
  protected transformBatch(batch: RecordBatch): BatchOutcome {
    return batch;
  }

  /** The input ended: what is left to hand on. */
  protected flushAtEnd(): BatchOutcome {
    return undefined;
  }

  /**
   * Ends this stream's output now, from `flushAtEnd`, before its outcome settles: what reads it
   * ends while this one still finishes (the files sink writes index.json once the sinks after
   * it have ended). Nothing is handed on after it: `flushAtEnd` then returns nothing.
   */
  protected endOutput(): void {
    this.push(null);
  }

  /**
   * The stream is destroyed: let go of what is held. When this throws, the chain's own error
   * is the one reported, and the thrown one only when there is none.
   */
  protected teardown(_error: Error | null): void | PromiseLike<void> {}

  override _transform(batch: RecordBatch, _encoding: BufferEncoding, callback: TransformCallback): void {
    let outcome: BatchOutcome;
    try {
      outcome = this.transformBatch(batch);
    } catch (err) {
      return callback(err as Error);
    }
    this.#settle(outcome, callback);
  }

  override _flush(callback: TransformCallback): void {
    let outcome: BatchOutcome;
    try {
      outcome = this.flushAtEnd();
    } catch (err) {
      return callback(err as Error);
    }
    this.#settle(outcome, callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    let held: void | PromiseLike<void>;
    try {
      held = this.teardown(error);
    } catch (err) {
      return callback(error ?? (err as Error));
    }
    if (!isPromiseLike(held)) return callback(error);
    held.then(
      () => callback(error),
      () => callback(error),
    );
  }

  #settle(outcome: BatchOutcome, callback: TransformCallback): void {
    if (!isPromiseLike(outcome)) return callback(null, this.#handOn(outcome));
    outcome.then(
      (ready) => callback(null, this.#handOn(ready)),
      (err: unknown) => callback(err as Error),
    );
  }

  #handOn(outcome: HandOn): HandOn {
    return this.#sink ? passOn(this, outcome) : outcome;
  }
}

/** The hooks of `createBatchTransform`, as `BatchTransform` names them, and its options. */
export interface BatchTransformHooks extends Pick<
  BatchTransformOptions,
  'sink' | 'objectMode' | 'highWaterMark'
> {
  transformBatch(batch: RecordBatch): BatchOutcome;
  flushAtEnd?(): BatchOutcome;
  teardown?(error: Error | null): void | PromiseLike<void>;
}

/** A `BatchTransform` from hooks, for a stage or sink written as a closure. */
export function createBatchTransform(hooks: BatchTransformHooks): BatchTransform {
  return new HookedBatchTransform(hooks);
}

class HookedBatchTransform extends BatchTransform {
  readonly #hooks: BatchTransformHooks;

  constructor(hooks: BatchTransformHooks) {
    const { transformBatch: _batch, flushAtEnd: _end, teardown: _teardown, ...options } = hooks;
    super(options);
    this.#hooks = hooks;
  }

  protected override transformBatch(batch: RecordBatch): BatchOutcome {
    return this.#hooks.transformBatch(batch);
  }

  protected override flushAtEnd(): BatchOutcome {
    return this.#hooks.flushAtEnd?.();
  }

  protected override teardown(error: Error | null): void | PromiseLike<void> {
    return this.#hooks.teardown?.(error);
  }
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null | undefined)?.then === 'function';
}
