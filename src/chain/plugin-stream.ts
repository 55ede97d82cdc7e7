import type { Duplex } from 'node:stream';
import { SubteeError } from '../errors.js';
import type { RecordBatch, SubteeRecord } from '../model/record.js';
import { freezeValueOf } from '../model/line-view.js';
import { createBatchTransform } from './batch-transform.js';
import { timerMs } from '../timer-ms.js';

/**
 * What a stage plugin's function returns for one record: nothing (`undefined`) or the record
 * itself to hand it on, a new record for the same input line (same `kind` and `lineNo`, and
 * for a run of quarantined lines the same `lines`) to hand on instead, `null` or `[]` to drop
 * it (counted in `index.json`'s `input.dropped`); a list of one is that one. Anything else
 * (two records for one, a number, a record of another line) fails the run as
 * ERR_PLUGIN_FAILED naming the plugin: every input line lands once. A promise of any of these
 * holds the input until it settles (backpressure). A sink's return is not read.
 */
export type RecordResult = SubteeRecord | readonly SubteeRecord[] | null | undefined | void;

/** A plugin's function over records: called once per record, in input order. */
export type RecordFunction = (record: SubteeRecord) => RecordResult | PromiseLike<RecordResult>;

/**
 * What a plugin's `create` may return besides a function, for a plugin that also wants to know
 * when the input has ended (a summary to write): a `record`, an `end`, or both.
 */
export type RecordHandlers =
  | { record: RecordFunction; end?: EndHandler }
  | { record?: RecordFunction; end: EndHandler };

/**
 * Called once, when the input has ended; also when the run fails or stops, where what it
 * throws is left unreported in favour of the run's own error.
 */
export type EndHandler = () => void | PromiseLike<void>;

/** What a plugin's `create` returns: its function over records, or its handlers. */
export type RecordPlugin = RecordFunction | RecordHandlers;

export interface PluginStreamOptions {
  /** The plugin's name: its failures are ERR_PLUGIN_FAILED naming it. */
  name: string;
  /** A sink: records are handed on unchanged whatever the function returns. */
  sink: boolean;
  /**
   * The line types (`assistant`, `user`, `system`, …) the function is called for (line
   * records, and spooled lines of that type); other records pass it by untouched, quarantined
   * ones among them. Absent: every record.
   */
  reads?: readonly string[];
  /** Told of each record a stage drops (its function returned `null` or `[]`). */
  dropped?: (rec: SubteeRecord) => void;
  /**
   * Resolves once the chain's input has ended: from then on (or from its start, if later) a
   * promise of the plugin has `endTimeoutMs` to settle, or the run fails naming the plugin.
   */
  inputEnded?: Promise<void>;
  /** How long a promise of the plugin may stay pending once the input has ended. */
  endTimeoutMs?: number;
  /**
   * The chain's list of the plugin promises it waits on now (one per plugin stream at most):
   * when nothing is left that could settle them, the chain fails them (see runChain).
   */
  pending?: Set<PendingPluginCall>;
  /** Where the plugin is in its chain (the index of its stream): its calls say so (`place`). */
  place?: number;
}

/** A plugin's promise the kit is waiting on: whose, for what, and how to give up on it. */
export interface PendingPluginCall {
  /** The plugin's name. */
  readonly name: string;
  /** What it was called for: `its function for line 5`, `its end()`. */
  readonly what: string;
  /** Where its plugin is in the chain (the index of its stream). */
  readonly place: number;
  /** When it was called (`performance.now()`). */
  readonly sinceMs: number;
  /** Stops waiting: the call fails with `err`, as if the plugin had rejected with it. */
  fail(err: SubteeError): void;
}

/** How long a plugin's promise may stay pending once the input has ended, unless told. */
export const PLUGIN_STREAM_DEFAULTS = Object.freeze({ endTimeoutMs: 30_000 });

/** The failure of a plugin call that nothing is left to settle (the event loop ran empty). */
export function neverSettled(call: PendingPluginCall): SubteeError {
  const why = 'nothing was left running that could settle it';
  return new SubteeError('ERR_PLUGIN_FAILED', `plugin ${call.name}: ${call.what} never settled (${why})`);
}

/** Whole seconds, or tenths below ten. */
const seconds = (ms: number) => (ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`);

/** A plugin's failure, named: a SubteeError it threw stays as it is. */
export function pluginFailure(name: string, err: unknown): SubteeError {
  if (err instanceof SubteeError) return err;
  const why = err instanceof Error ? err.message : String(err);
  // V8's words for a write on a frozen record or anything in its value (a field set, added,
  // deleted or defined, a routed line's value getter), or on a channel (a getter, or a field of
  // the frozen node, which V8 names by its class).
  const wroteOnRecord = err instanceof TypeError && FROZEN_WRITE.test(why);
  const onChannel = / of (object '#<Channel>'|#<Channel>)/.test(why);
  const hint = wroteOnRecord ? ` (${onChannel ? CHANNEL_HINT : WRITE_HINT})` : '';
  return new SubteeError('ERR_PLUGIN_FAILED', `plugin ${name} failed: ${why}${hint}`, { cause: err });
}

const FROZEN_WRITE =
  /^Cannot (assign to read only|set|add|delete|define|redefine) property|^#<\w+> is not extensible$/;
const WRITE_HINT =
  'a record and its value are never written on: return a new one, as rewriteText(rec, fn) makes';
const CHANNEL_HINT = 'a channel is read only: the tree alone changes it, as lines arrive';

const CONTRACT = 'a stage returns its record, a new one for the same line, null to drop it, or nothing';

/**
 * Input lines a record stands for: a run of quarantined lines is several, a line an input
 * adapter derived from another's bytes none.
 */
export const linesOfRecord = (rec: SubteeRecord): number =>
  rec.kind === 'quarantine' ? Math.max(1, rec.lines ?? 1) : rec.kind === 'line' && rec.derived ? 0 : 1;

/** What was wrong with a stage's result for `rec`, or null when it is a record to hand on. */
function resultProblem(rec: SubteeRecord, result: unknown): string | null {
  const at = `for line ${rec.lineNo}`;
  if (result === null || typeof result !== 'object') return `returned ${shown(result)} ${at}: not a record`;
  const r = result as Partial<SubteeRecord> & { lines?: unknown };
  if (r.kind !== rec.kind) return `returned ${shown(result)} ${at}: not a ${rec.kind} record`;
  if (r.lineNo !== rec.lineNo) return `returned a record of line ${String(r.lineNo).slice(0, 20)} ${at}`;
  if (r.kind === 'quarantine' && linesOfRecord(r as SubteeRecord) !== linesOfRecord(rec)) {
    const lines = String(r.lines).slice(0, 20);
    return `returned a run of ${lines} quarantined lines ${at}, a run of ${linesOfRecord(rec)}`;
  }
  const bytes = r.kind === 'spooled' ? (r as { head?: unknown }).head : (r as { raw?: unknown }).raw;
  if (!Buffer.isBuffer(bytes)) return `returned a ${r.kind} record without its bytes ${at}`;
  if (r.kind === 'spooled' && typeof (r as { spool?: { copy?: unknown } }).spool?.copy !== 'function')
    return `returned a spooled record without its spool ${at}`;
  if (r.kind === 'line') {
    // A derived line is shown, never written: a replacement is one too, or the line would be
    // written twice (or, the other way round, not at all).
    if ((r.derived === true) !== (rec.kind === 'line' && rec.derived === true))
      return `returned a line record ${r.derived === true ? 'marked' : 'not marked'} derived ${at}`;
    const value = (r as { value?: unknown }).value;
    if (value === null || typeof value !== 'object' || Array.isArray(value))
      return `returned a line record whose value is not an object ${at}`;
  }
  return null;
}

/** A value a plugin returned, named in a line of an error message. */
function shown(value: unknown): string {
  if (Array.isArray(value)) return `a list of ${value.length}`;
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'string')
    return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value !== 'object') return `${typeof value} ${String(value).slice(0, 40)}`;
  const kind = (value as { kind?: unknown }).kind;
  return typeof kind === 'string' ? `a record of kind ${JSON.stringify(kind.slice(0, 20))}` : 'an object';
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null | undefined)?.then === 'function';
}

/**
 * The stream the kit makes of a plugin's function: batches in, batches out, the function
 * called for each record it reads. The kit owns batching, backpressure and errors: whatever
 * the function throws or rejects with (even `null`) fails the run as ERR_PLUGIN_FAILED naming
 * the plugin, caught where the kit calls it.
 */
export function createPluginStream(plugin: RecordPlugin, options: PluginStreamOptions): Duplex {
  const { name, sink } = options;
  const handlers: RecordHandlers = typeof plugin === 'function' ? { record: plugin } : plugin;
  const fn = handlers.record;
  const reads = options.reads === undefined ? null : new Set(options.reads);
  const wanted = (rec: SubteeRecord) => {
    if (reads === null) return true;
    const type = rec.kind === 'quarantine' ? undefined : rec.value?.type;
    return typeof type === 'string' && reads.has(type);
  };
  let ended = false;
  const end = (): void | PromiseLike<void> => {
    if (ended || handlers.end === undefined) return;
    ended = true;
    return handlers.end();
  };
  const endTimeoutMs = options.endTimeoutMs ?? PLUGIN_STREAM_DEFAULTS.endTimeoutMs;
  const pending = options.pending ?? new Set<PendingPluginCall>();
  const place = options.place ?? 0;
  // The one call awaited now (calls are made one at a time) and whether the input has ended.
  let current: { arm(): void } | null = null;
  let inputOver = false;
  void options.inputEnded?.then(() => {
    inputOver = true;
    current?.arm();
  });

  /**
   * Waits for a promise of the plugin, listed in `pending` while it is; once the input has ended
   * (at once with `now`) it has `endTimeoutMs` to settle. The timer holds nothing open: when it
   * is all that is left, the chain fails the call as never settled instead.
   */
  const awaited = <T>(promise: PromiseLike<T>, what: string, now = false): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      let timer: NodeJS.Timeout | null = null;
      const finish = (settle: () => void) => {
        if (!pending.delete(call)) return;
        if (current === waiting) current = null;
        if (timer !== null) clearTimeout(timer);
        settle();
      };
      const call: PendingPluginCall = {
        name,
        what,
        place,
        sinceMs: performance.now(),
        fail: (err) => finish(() => reject(err)),
      };
      const late = () =>
        new SubteeError(
          'ERR_PLUGIN_FAILED',
          `plugin ${name}: ${what} did not settle within ${seconds(endTimeoutMs)} of the input's end`,
        );
      const waiting = {
        arm: () => {
          if (timer !== null || !pending.has(call)) return;
          // A longer bound than a Node timer takes waits as long as one takes.
          timer = setTimeout(() => call.fail(late()), timerMs(endTimeoutMs));
          timer.unref();
        },
      };
      pending.add(call);
      current = waiting;
      if (now || inputOver) waiting.arm();
      promise.then(
        (value) => finish(() => resolve(value)),
        (err: unknown) => finish(() => reject(err)),
      );
    });

  /** Hands on what the function returned for `rec`, into `out` (see RecordResult). */
  const take = (out: SubteeRecord[], rec: SubteeRecord, result: RecordResult) => {
    if (sink || result === undefined || result === rec) return void out.push(rec);
    let one: unknown = result;
    if (Array.isArray(result)) {
      if (result.length > 1) {
        throw refused(`returned ${result.length} records for line ${rec.lineNo}`);
      }
      one = result.length === 0 ? null : result[0];
    }
    if (one === null) return drop(rec);
    if (one === rec) return void out.push(rec);
    const problem = resultProblem(rec, one);
    if (problem !== null) throw refused(problem);
    // Frozen as every record is where it is made: the next stage cannot write on it either.
    out.push(Object.freeze(one) as SubteeRecord);
  };
  const refused = (problem: string) =>
    new SubteeError('ERR_PLUGIN_FAILED', `plugin ${name} ${problem} (${CONTRACT})`);
  const drop = (rec: SubteeRecord) => {
    if (rec.kind === 'spooled') rec.spool.release();
    options.dropped?.(rec);
  };

  /** The rest of a batch from record `from` on, once a promise of the function settled. */
  const rest = async (
    batch: RecordBatch,
    from: number,
    out: SubteeRecord[],
    first: PromiseLike<RecordResult>,
  ) => {
    try {
      take(out, batch[from], await awaited(first, forLine(batch[from])));
      for (let i = from + 1; i < batch.length; i++) {
        // Torn down meanwhile (an interrupt, a failure elsewhere): the plugin is called no more.
        if (stream.destroyed) return out;
        const rec = batch[i];
        if (!wanted(rec)) {
          take(out, rec, undefined);
          continue;
        }
        freezeValueOf(rec);
        const result = fn!(rec);
        take(out, rec, isPromiseLike(result) ? await awaited(result, forLine(rec)) : result);
      }
    } catch (err) {
      throw pluginFailure(name, err);
    }
    return out;
  };

  const forLine = (rec: SubteeRecord) => `its function for line ${rec.lineNo}`;
  const stream = createBatchTransform({
    sink,
    transformBatch(batch: RecordBatch) {
      if (fn === undefined) return batch;
      const out: SubteeRecord[] = [];
      for (let i = 0; i < batch.length; i++) {
        const rec = batch[i];
        if (!wanted(rec)) {
          out.push(rec);
          continue;
        }
        let result: RecordResult | PromiseLike<RecordResult>;
        try {
          freezeValueOf(rec);
          result = fn(rec);
        } catch (err) {
          throw pluginFailure(name, err);
        }
        if (isPromiseLike(result)) return rest(batch, i, out, result);
        take(out, rec, result);
      }
      return out;
    },
    async flushAtEnd() {
      try {
        const done = end();
        if (isPromiseLike(done)) await awaited(done, 'its end()', true);
      } catch (err) {
        throw pluginFailure(name, err);
      }
    },
    async teardown() {
      try {
        await end();
      } catch {
        // The run's own error is the one to report.
      }
    },
  });
  return stream;
}
