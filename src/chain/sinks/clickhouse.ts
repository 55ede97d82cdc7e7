import { EventEmitter, once } from 'node:events';
import { dirname, join } from 'node:path';
import type { Transform } from 'node:stream';
import type { ClickHouseClient } from '@clickhouse/client';
import { withDefaults } from '../../defaults.js';
import { UsageError } from '../../errors.js';
import { onceLoader } from '../../optional-package.js';
import { shownUrl, withoutUrlSecrets } from '../../shown-url.js';
import type { RecordBatch } from '../../model/record.js';
import { requireSession, type SinkRun } from '../../model/session.js';
import {
  RowBuilder,
  tableDdl,
  addColumnsDdl,
  foreignShape,
  keyLosesParts,
  withRun,
  type EventRow,
  type Entry,
  type TableKind,
} from './clickhouse-rows.js';
import {
  claimFile,
  findSpoolFiles,
  insertSettingAside,
  keepInSpool,
  readSpool,
  refusalReason,
  refusedAsData,
  Rejects,
  releaseClaims,
  removeSpool,
  SendStopped,
  SendTally,
  settleHeld,
  Spool,
  SPOOL_FILE,
  spooledRows,
  TableRefused,
  type SettingAside,
} from './clickhouse-spool.js';
import { randomRunId } from './stream-facts.js';
import { BatchTransform, type BatchOutcome } from '../batch-transform.js';
import {
  CLICKHOUSE_SINK_DEFAULTS,
  quoteTableName,
  tableNameCheck,
  type ClickHouseSinkOptions,
} from './clickhouse-options.js';


type Mode = 'online' | 'offline' | 'draining';

/**
 * The official client, imported when a ClickHouse sink or `stats --clickhouse` needs it, not
 * when subtee starts: most runs never use it, and it is an optional peer dependency (a missing
 * one is ERR_OPTIONAL_DEPENDENCY, naming it).
 */
const loadClickHouseClient = onceLoader('clickhouse', () => import('@clickhouse/client'));

/** Imports the client: the chain does before the sink is made, so a missing package stops the run first. */
export async function importClickHouseClient(): Promise<void> {
  await loadClickHouseClient();
}

/**
 * A client of the server at `url` (the sink's and `subtee stats --clickhouse`'s). A URL that
 * does not parse is ERR_BAD_OPTION, shown without its credentials.
 *
 * @internal Its type is the client's, an optional package: left out of the declarations.
 */
export async function connectClickHouse(url: string, timeoutMs: number): Promise<ClickHouseClient> {
  const { createClient, ClickHouseLogLevel } = await loadClickHouseClient();
  try {
    new URL(url);
    return createClient({
      url,
      request_timeout: timeoutMs,
      log: { level: ClickHouseLogLevel.OFF },
      max_open_connections: 2,
    });
  } catch (err) {
    // The client's errors may quote the URL it was given, credentials included.
    const why = withoutUrlSecrets(describe(err), url);
    throw new UsageError('ERR_BAD_OPTION', `clickhouse: not a usable URL: ${shownUrl(url)} (${why})`, err);
  }
}

/**
 * Refuses a URL the client would not take, as connectClickHouse does (ERR_BAD_OPTION), without
 * a request: a chain checks it before anything is made or started (checkChainBeforeStart).
 */
export async function checkClickHouseUrl(url: string): Promise<void> {
  const client = await connectClickHouse(url, CLICKHOUSE_SINK_DEFAULTS.timeoutMs);
  await client.close();
}

function describe(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  const msg = String(e?.message ?? err)
    .split('\n')[0]
    .slice(0, 200);
  const code = typeof e?.code === 'string' && !/^\d+$/.test(e.code) ? e.code : null;
  return code && !msg.includes(code) ? `${code}: ${msg}` : msg;
}

/**
 * ClickHouse sink: a pass-through stage (record batches in, the same out) that inserts a
 * row per record (per input line and part) into an events table and index.json's channel
 * rows into a channels table (both created if missing), through the official client, in
 * batches.
 *
 * While the server accepts rows, a full queue holds the input back. When an insert fails the
 * rows go to a spool file in the output folder instead, and so does every later row while the
 * server is away, so the run is never held up and nothing is lost; the server is tried again
 * with a growing pause, and when it answers the spool is sent before rows flow directly again.
 * Rows are keyed (run + line + part, run + channel) in ReplacingMergeTree tables, so a row
 * sent twice (an insert that failed after the server stored it, a resend) counts once.
 */
export function createClickHouseSink(options: ClickHouseSinkOptions): Transform {
  return new ClickHouseSink(options);
}

/**
 * Both tables' names, quoted; a name that is not one fails fast (a chain checks it with the
 * options, before anything is made: this is for a sink made without one).
 */
function quotedTables(opts: { eventsTable: string; channelsTable: string }): Record<TableKind, string> {
  const tables: Record<TableKind, string> = { events: '', channels: '' };
  for (const [kind, name] of [
    ['events', opts.eventsTable],
    ['channels', opts.channelsTable],
  ] as const) {
    const problem = tableNameCheck(kind)(name);
    if (problem !== null)
      throw new UsageError('ERR_BAD_OPTION', `clickhouse: ${kind}Table ${problem}, not "${name}"`);
    tables[kind] = quoteTableName(name)!;
  }
  return tables;
}

type Ping = { success: true } | { success: false; error: Error };

class ClickHouseSink extends BatchTransform {
  readonly #opts: typeof CLICKHOUSE_SINK_DEFAULTS & ClickHouseSinkOptions;
  readonly #run: SinkRun;
  readonly #tables: Record<TableKind, string>;
  readonly #where: string;
  /** Set once the client is imported (`_construct`). */
  #client: ClickHouseClient | null = null;
  readonly #builder: RowBuilder;
  readonly #spool: Spool;
  /** Spool files of earlier runs (`resend`), claimed by this sink. */
  readonly #backlog: string[];
  /** Spool files this sink claimed and could not finish: reported at the end. */
  readonly #leftovers = new Set<string>();
  /** Spooled rows the server refused as data, set aside beside their spool. */
  readonly #rejects = new Rejects();
  #mode: Mode;
  readonly #queue: Entry[] = [];
  #sending: Entry[] | null = null;
  #tablesReady = false;
  /**
   * The events table an older subtee made, keyed without `part`: set until the first rows that
   * share a line are written to it, when the warning says they collapse.
   */
  #oldKey = false;
  #lastError = '';
  #flushTimer: NodeJS.Timeout | null = null;
  #probeTimer: NodeJS.Timeout | null = null;
  #probeDelayMs = 250;
  #closing = false;
  #closed = false;
  /**
   * Aborted when the end's wait is over (flushTimeoutMs) or the run is to stop at once (the
   * chain's signal: a second interrupt): every request still out is cut off, none is started.
   */
  readonly #cut = new AbortController();
  /** A table that is not subtee's, or refuses every row: no row is tried again this run. */
  #refused: TableRefused | null = null;
  readonly #stopAtOnce = () => {
    this.#cut.abort(new Error('stopped at once'));
    this.#changes.emit('change');
  };
  /**
   * Emits `change` when a send ends, the mode changes or the run is cut off: the wait for room
   * in the queue and the end's wait (`#changed`) look again then.
   */
  readonly #changes = new EventEmitter();
  #draining: Promise<void> | null = null;
  #finished: Promise<void> | null = null;

  constructor(options: ClickHouseSinkOptions) {
    super();
    const opts = (this.#opts = withDefaults(CLICKHOUSE_SINK_DEFAULTS, options));
    this.#run = requireSession(options, 'createClickHouseSink');
    this.#tables = quotedTables(opts);
    this.#where = shownUrl(opts.url);
    this.#builder = new RowBuilder({
      runId: opts.runId,
      maxContentChars: opts.maxContentChars,
      costs: this.#run.cost,
      display: () => this.#run.display,
    });
    this.#spool = new Spool(() => {
      const dir = typeof opts.spoolDir === 'function' ? opts.spoolDir() : opts.spoolDir;
      return dir ?? join(process.cwd(), 'subtee-clickhouse-spool');
    });
    this.#backlog = opts.resend
      ? findSpoolFiles(opts.resend)
          .map(claimFile)
          .filter((f): f is string => f !== null)
      : [];
    this.#mode = this.#backlog.length > 0 ? 'draining' : 'online';
    options.signal?.addEventListener('abort', this.#stopAtOnce, { once: true });
  }

  /** Node holds every write until the client is imported (an optional peer dependency). */
  override _construct(callback: (error?: Error | null) => void): void {
    connectClickHouse(this.#opts.url, this.#opts.timeoutMs).then(
      (client) => {
        this.#client = client;
        if (this.#mode === 'draining') void this.#drain();
        callback();
      },
      (err: Error) => callback(err),
    );
  }

  protected override transformBatch(batch: RecordBatch): BatchOutcome {
    const opts = this.#opts;
    const entries: Entry[] = [];
    // Pushed one by one: spread arguments overflow the stack past about 100,000 rows.
    for (const rec of batch) for (const entry of this.#builder.rows(rec)) entries.push(entry);
    if (this.#mode === 'online') for (const entry of entries) this.#queue.push(entry);
    else this.#toSpool(entries);
    if (this.#queue.length >= opts.batchRows) this.#send();
    else this.#armFlush();
    if (this.#mode !== 'online' || this.#queue.length < opts.maxQueueRows) return batch;
    return this.#queueHasRoom().then(() => batch);
  }

  protected override flushAtEnd(): BatchOutcome {
    return this.#finish();
  }

  protected override teardown(): PromiseLike<void> {
    return this.#finish();
  }

  /** The client's errors may quote the URL it was given, credentials included. */
  #problem(err: unknown): string {
    return withoutUrlSecrets(describe(err), this.#opts.url);
  }

  /** While the server takes rows, a full queue holds the input back. */
  async #queueHasRoom(): Promise<void> {
    const full = () => this.#mode === 'online' && this.#queue.length >= this.#opts.maxQueueRows;
    while (full()) await this.#changed(1000);
  }

  /** Resolves when something changes (a send ends, the mode changes), or after `ms`. */
  async #changed(ms: number): Promise<void> {
    // A timer of its own rather than AbortSignal.timeout, whose timer does not keep the process up.
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), ms);
    await once(this.#changes, 'change', { signal: timeout.signal }).catch(() => {});
    clearTimeout(timer);
  }

  #runId(): string {
    return (this.#builder.runId ??= randomRunId());
  }

  // Rows of this run get its id when they leave the queue (toward the server or the spool);
  // rows read back from a spool carry the id of the run that made them.
  async #insert(entries: Entry[]): Promise<void> {
    const client = this.#client!;
    const abort_signal = this.#cut.signal;
    if (!this.#tablesReady) {
      for (const kind of ['events', 'channels'] as const) {
        const table = this.#tables[kind];
        await client.command({ query: tableDdl(kind, table), abort_signal });
        // A table of that name may be another's: subtee neither alters nor writes to it. Tables
        // made by an earlier subtee lack the newer columns (18.16 has no ADD COLUMN IF NOT
        // EXISTS): ask which it has.
        const described = await client.query({
          query: `DESCRIBE TABLE ${table}`,
          format: 'JSONEachRow',
          abort_signal,
        });
        const columns = (await described.json()) as Array<{ name: string; type: string }>;
        const foreign = foreignShape(kind, columns);
        if (foreign !== null) throw new TableRefused(kind, foreign, true);
        const names = columns.map((c) => c.name);
        for (const query of addColumnsDdl(kind, table, names)) await client.command({ query, abort_signal });
        if (kind === 'events') {
          const shown = await client.query({
            query: `SHOW CREATE TABLE ${table}`,
            format: 'JSONEachRow',
            abort_signal,
          });
          const [made] = (await shown.json()) as Array<{ statement?: string }>;
          this.#oldKey = keyLosesParts(made?.statement ?? '');
        }
      }
      this.#tablesReady = true;
    }
    if (this.#oldKey && entries.some((e) => e.t === 'events' && (e.r as EventRow).part > 0)) {
      this.#oldKey = false;
      const name = this.#opts.eventsTable;
      this.#run.warn(
        'CLICKHOUSE_OLD_KEY',
        `${name} is keyed on (run, line) by an older subtee: rows of one input line (a mapped ` +
          `producer's derived lines) are all written, but FINAL and merges keep one of them; ` +
          `RENAME TABLE ${name} away (or set eventsTable to a new name) for a table keyed on ` +
          `(run, line, part)`,
      );
    }
    for (const kind of ['events', 'channels'] as const) {
      const values = entries.filter((e) => e.t === kind).map((e) => e.r);
      if (values.length === 0) continue;
      await client.insert({ table: this.#tables[kind], values, format: 'JSONEachRow', abort_signal });
    }
  }

  #toSpool(entries: Entry[]): void {
    if (entries.length > 0) this.#spool.append(withRun(entries, this.#runId()));
  }

  #scheduleProbe(): void {
    if (this.#closing || this.#probeTimer || this.#refused) return;
    this.#probeTimer = setTimeout(() => void this.#probe(), this.#probeDelayMs);
    this.#probeDelayMs = Math.min(this.#probeDelayMs * 2, this.#opts.maxRetryDelayMs);
  }

  #goOffline(err: unknown, entries: Entry[]): void {
    this.#toSpool(entries);
    if (err instanceof TableRefused) return this.#refuseTable(err);
    this.#lastError = this.#problem(err);
    if (this.#mode !== 'offline') {
      this.#mode = 'offline';
      const what = `ClickHouse at ${this.#where} is not taking rows (${this.#lastError})`;
      this.#run.warn(
        'CLICKHOUSE_UNAVAILABLE',
        `${what}; they are kept in ${this.#spool.file} and sent when it answers`,
      );
    }
    this.#changes.emit('change');
    this.#scheduleProbe();
  }

  /**
   * A table that is not subtee's, or that refused every row it was sent: told once, naming the
   * table and why; its rows (and every later one) stay in the spool for a resend once it is fixed.
   */
  #refuseTable(err: TableRefused): void {
    this.#mode = 'offline';
    this.#changes.emit('change');
    if (this.#refused) return;
    this.#refused = err;
    const name = err.kind === 'events' ? this.#opts.eventsTable : this.#opts.channelsTable;
    const option = `${err.kind}Table`;
    const what = err.foreign
      ? `${name} at ${this.#where} is not a table subtee writes (${err.reason}): it is left as it is`
      : `${name} at ${this.#where} refuses every row subtee sends it (${err.reason})`;
    this.#lastError = err.foreign ? `${name} is not subtee's table` : `${name} refuses every row`;
    this.#run.warn(
      'CLICKHOUSE_TABLE',
      `${what}; rows are kept in ${this.#spool.file}, not tried again in this run (RENAME TABLE ` +
        `${name} away or set ${option} to another name, then send them with --clickhouse-resend)`,
    );
  }

  #send(): void {
    const queue = this.#queue;
    const stopped = this.#closed || this.#cut.signal.aborted;
    if (stopped || this.#mode !== 'online' || this.#sending || queue.length === 0) return;
    const batch = withRun(queue.splice(0, this.#opts.batchRows), this.#runId());
    this.#sending = batch;
    this.#insert(batch).then(
      () => {
        if (this.#closed) return;
        this.#sending = null;
        this.#changes.emit('change');
        if (queue.length >= this.#opts.batchRows || (this.#closing && queue.length > 0)) this.#send();
        else this.#armFlush();
      },
      (err) => {
        // Cut off at the end: the end spools what was being sent.
        if (this.#closed || this.#cut.signal.aborted) return;
        this.#sending = null;
        try {
          const rows = [...batch, ...queue.splice(0)];
          if (!refusedAsData(err)) return this.#goOffline(err, rows);
          // The server answered, refusing the rows: they are sent from the spool, where a row
          // at fault is set aside and a table that refuses every row is told apart.
          this.#toSpool(rows);
          void this.#drain();
        } catch (spoolErr) {
          this.destroy(spoolErr as Error);
        }
      },
    );
  }

  #armFlush(): void {
    if (this.#flushTimer || this.#queue.length === 0 || this.#closing) return;
    this.#flushTimer = setTimeout(() => {
      this.#flushTimer = null;
      this.#send();
    }, this.#opts.flushIntervalMs);
  }

  /** Sends the backlog and this run's spool; rows keep going to the spool until it is empty. */
  #drain(): Promise<void> {
    this.#draining ??= this.#sendSpooled();
    return this.#draining;
  }

  async #sendSpooled(): Promise<void> {
    this.#mode = 'draining';
    try {
      for (;;) {
        if (this.#closed || this.#cut.signal.aborted) return;
        const file = this.#backlog.shift() ?? this.#spool.claimOwn();
        if (!file) break;
        this.#leftovers.add(file);
        if (!(await this.#sendFile(file))) return;
        removeSpool(file);
        this.#leftovers.delete(file);
      }
      // Nothing spooled is left, and rows spooled meanwhile were picked up above: flow directly.
      this.#mode = 'online';
      this.#probeDelayMs = 250;
    } finally {
      this.#draining = null;
      this.#changes.emit('change');
    }
  }

  /**
   * Sends a claimed spool file: true when every row went in or was set aside; false when the
   * send stopped (the end, the server gone, a table refusing every row), the file then holding
   * exactly the rows neither inserted nor set aside.
   */
  async #sendFile(file: string): Promise<boolean> {
    const tally = new SendTally();
    // A row the server refuses as data is set aside, not left to hold back the rest.
    const to: SettingAside = {
      insert: (entries) => this.#insert(entries),
      setAside: (entry, err) => this.#rejects.add(dirname(file), entry, refusalReason(err)),
      stopped: () => this.#closed || this.#cut.signal.aborted,
    };
    const place = { bytes: 0, entries: 0 };
    const batches = readSpool(file, this.#opts.batchRows, place);
    try {
      for (let next = batches.next(); !next.done; next = batches.next())
        await insertSettingAside(next.value, to, tally);
      settleHeld(tally, to);
      return true;
    } catch (err) {
      try {
        // The rejects file could not be written: the run ends with that error.
        if (!(err instanceof SendStopped)) throw err;
        keepInSpool(file, err.rest, place);
      } catch (writeErr) {
        this.destroy(writeErr as Error);
        return false;
      }
      if (this.#closed || this.#cut.signal.aborted) return false;
      // A resend cut off (the server gone mid-request) is a server away like any other: the
      // file waits, this run's rows go to the spool, and the warning says so.
      this.#backlog.unshift(file);
      this.#goOffline(err.cause, []);
      return false;
    } finally {
      batches.return(undefined);
    }
  }

  #ping(): Promise<Ping> {
    return this.#client!.ping({ select: false, abort_signal: this.#cut.signal }).catch((err) => ({
      success: false as const,
      error: err as Error,
    }));
  }

  async #probe(): Promise<void> {
    this.#probeTimer = null;
    if (this.#closed || this.#refused) return;
    const ping = await this.#ping();
    if (this.#closed) return;
    if (!ping.success) {
      this.#lastError = this.#problem(ping.error);
      this.#scheduleProbe();
      return;
    }
    await this.#drain();
  }

  #finish(): Promise<void> {
    this.#finished ??= this.#client === null ? this.#abandon() : this.#end(this.#client);
    return this.#finished;
  }

  /** Never started (the client could not be imported): hand back the spool files claimed. */
  async #abandon(): Promise<void> {
    this.#closing = this.#closed = true;
    this.#opts.signal?.removeEventListener('abort', this.#stopAtOnce);
    releaseClaims(this.#backlog);
  }

  async #end(client: ClickHouseClient): Promise<void> {
    this.#closing = true;
    if (this.#flushTimer) clearTimeout(this.#flushTimer);
    if (this.#probeTimer) clearTimeout(this.#probeTimer);
    this.#flushTimer = this.#probeTimer = null;
    const run = this.#run;
    const flags = { final: true, stalled: run.stalled, interrupted: run.interrupted };
    // A run that read no line (a resend alone, an empty input) is no run of the fleet's.
    const channels = run.input.lines === 0 ? [] : run.tree.channels();
    const final = [
      ...this.#builder.releaseUntimed(),
      ...channels.map((ch): Entry => ({ t: 'channels', r: this.#builder.channelRow(ch, flags) })),
    ];
    if (this.#mode === 'online') for (const entry of final) this.#queue.push(entry);
    else this.#toSpool(final);
    const waitMs = this.#opts.flushTimeoutMs;
    const cut = this.#cut;
    const timer = setTimeout(() => {
      cut.abort(new Error(`not sent within flushTimeoutMs, ${waitMs} ms`));
      this.#changes.emit('change');
    }, waitMs);
    await this.#sendUntil(Date.now() + waitMs);
    clearTimeout(timer);
    this.#opts.signal?.removeEventListener('abort', this.#stopAtOnce);
    // Whatever is still out is cut off; a spool file's send that stops keeps its rest in the file.
    cut.abort(new Error('ended'));
    await this.#draining;
    this.#closed = true;
    // What did not make it in time waits in the spool (an insert cut short may have
    // landed: the keys make that harmless).
    this.#toSpool([...(this.#sending ?? []), ...this.#queue.splice(0)]);
    this.#sending = null;
    releaseClaims([...this.#leftovers, ...this.#backlog]);
    this.#reportRejected();
    this.#reportSpooled();
    await client.close().catch(() => {});
  }

  /** At the end: the last rows, and the spool if a server that was away answers, until `deadline`. */
  async #sendUntil(deadline: number): Promise<void> {
    const cut = this.#cut.signal;
    while (!cut.aborted && Date.now() < deadline) {
      if (this.#mode === 'online') {
        if (this.#queue.length === 0 && !this.#sending) break;
        this.#send();
      } else if (this.#refused) {
        break;
      } else if (!this.#draining) {
        // One more try at a server that was away: the spool goes now if it answers. The wait
        // for its answer ends with the end's (the cut).
        const ping = await this.#ping();
        if (cut.aborted) break;
        if (!ping.success) {
          this.#lastError = this.#problem(ping.error);
          break;
        }
        void this.#drain();
      }
      await this.#changed(Math.min(100, Math.max(1, deadline - Date.now())));
    }
  }

  #reportRejected(): void {
    const rejects = this.#rejects;
    if (rejects.rows === 0) return;
    const aside = [...rejects.files].join(', ');
    const what = `${rejects.rows} spooled rows refused by ClickHouse at ${this.#where} (${rejects.reason})`;
    this.#run.warn('CLICKHOUSE_REJECTED', `${what}: set aside in ${aside}`);
  }

  #reportSpooled(): void {
    const spool = this.#spool;
    // A file whose send failed midway is in both lists: its rows count once.
    const claimed = new Set([...this.#leftovers, ...this.#backlog]);
    const files = [...claimed, ...(spool.rows > 0 ? [spool.file] : [])];
    let rows = spool.rows;
    for (const f of claimed) rows += spooledRows(f);
    if (files.length === 0) return;
    const why = this.#lastError ? ` (${this.#lastError})` : '';
    const kept = files.join(', ');
    this.#run.warn(
      'CLICKHOUSE_SPOOLED',
      `${rows} rows not sent to ClickHouse at ${this.#where}${why}: kept in ${kept}; ` +
        `send them with --clickhouse-resend ${spool.dir}`,
    );
  }
}

export { SPOOL_FILE };

export { CLICKHOUSE_SINK_DEFAULTS, type ClickHouseSinkOptions } from './clickhouse-options.js';
