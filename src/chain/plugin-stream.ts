import type { Duplex } from 'node:stream';
import { SubteeError } from '../errors.js';
import type { RecordBatch, SubteeRecord } from '../model/record.js';
import { createBatchTransform } from './batch-transform.js';

/**
 * What a plugin's function returns for one record: the record to hand on (the same one, or a
 * new one), several, `null` or `[]` to drop it, nothing to hand it on unchanged; or a promise
 * of any of these, which holds the input until it settles (backpressure).
 */
export type RecordResult = SubteeRecord | readonly SubteeRecord[] | null | undefined | void;

/** A plugin's function over records: called once per record, in input order. */
export type RecordFunction = (record: SubteeRecord) => RecordResult | PromiseLike<RecordResult>;

/** A plugin that also wants to know when the input has ended (a summary to write). */
export interface RecordHandlers {
  record?: RecordFunction;
  /**
   * Called once, when the input has ended; also when the run fails or stops, where what it
   * throws is left unreported in favour of the run's own error.
   */
  end?: () => void | PromiseLike<void>;
}

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
}

/** A plugin's failure, named: a SubteeError it threw stays as it is. */
export function pluginFailure(name: string, err: unknown): SubteeError {
  if (err instanceof SubteeError) return err;
  const why = err instanceof Error ? err.message : String(err);
  return new SubteeError('ERR_PLUGIN_FAILED', `plugin ${name} failed: ${why}`, { cause: err });
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

  /** Hands on what the function returned for `rec`, into `out`. */
  const take = (out: SubteeRecord[], rec: SubteeRecord, result: RecordResult) => {
    if (sink || result === undefined) out.push(rec);
    else if (result === null) return;
    else if (Array.isArray(result)) out.push(...(result as SubteeRecord[]));
    else out.push(result as SubteeRecord);
  };

  /** The rest of a batch from record `from` on, once a promise of the function settled. */
  const rest = async (
    batch: RecordBatch,
    from: number,
    out: SubteeRecord[],
    first: PromiseLike<RecordResult>,
  ) => {
    try {
      take(out, batch[from], await first);
      for (let i = from + 1; i < batch.length; i++) {
        const rec = batch[i];
        take(out, rec, wanted(rec) ? await fn!(rec) : undefined);
      }
    } catch (err) {
      throw pluginFailure(name, err);
    }
    return out;
  };

  return createBatchTransform({
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
        await end();
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
}
