import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import type * as ClickHouseModule from '@clickhouse/client';
import type { ClickHouseClient } from '@clickhouse/client';
import { withDefaults } from '../../defaults.js';
import { UsageError } from '../../errors.js';
import { shownUrl, withoutUrlSecrets } from '../../shown-url.js';
import { BATCH_HIGH_WATER_MARK, type RecordBatch } from '../../model/record.js';
import { requireSession, type Session } from '../../model/session.js';
import {
  quoteTableName,
  RowBuilder,
  tableDdl,
  withRun,
  type Entry,
  type TableKind,
} from './clickhouse-rows.js';
import {
  claimFile,
  findSpoolFiles,
  insertSettingAside,
  readSpool,
  refusalReason,
  Rejects,
  releaseClaims,
  removeSpool,
  Spool,
  SPOOL_FILE,
} from './clickhouse-spool.js';
import { lateWarn, randomRunId } from './stream-facts.js';
import { BUILTIN_KIT, definePlugin } from '../plugin.js';

export const CLICKHOUSE_SINK_DEFAULTS = Object.freeze({
  eventsTable: 'subtee_events',
  channelsTable: 'subtee_channels',
  /** Longest content prefix (and summary, description) kept per row, in characters. */
  maxContentChars: 256,
  /** Rows per insert. */
  batchRows: 5000,
  /** A partial batch is inserted after this long, so rows arrive while the run goes on. */
  flushIntervalMs: 1000,
  /** Rows held while the server accepts them; input waits beyond this. */
  maxQueueRows: 20_000,
  /** One request's timeout. */
  timeoutMs: 10_000,
  /** Longest pause between attempts to reach a server that went away. */
  maxRetryDelayMs: 5000,
  /** At the end of the run: how long to wait for the last rows (and any spool) to be sent. */
  flushTimeoutMs: 10_000,
});

export interface ClickHouseSinkOptions {
  /** The HTTP interface, e.g. http://user:password@host:8123 (a path names the database). */
  url: string;
  eventsTable?: string;
  channelsTable?: string;
  /** The run's key in both tables; default the stream's own (the uuid of its first line). */
  runId?: string;
  maxContentChars?: number;
  batchRows?: number;
  flushIntervalMs?: number;
  maxQueueRows?: number;
  timeoutMs?: number;
  maxRetryDelayMs?: number;
  flushTimeoutMs?: number;
  /** Where rows wait while the server is away; default the files sink's `out` folder. */
  spoolDir?: string | (() => string | undefined);
  /** A folder whose spool files (its own and its subfolders') are sent first: earlier runs' leftovers. */
  resend?: string;
  /** The chain's session, shared by every stage (required). */
  session: Session;
}

type Mode = 'online' | 'offline' | 'draining';

/** Loaded when a ClickHouse sink is made, not when subtee starts (most runs never use it). */
const loadClient = () => createRequire(import.meta.url)('@clickhouse/client') as typeof ClickHouseModule;

function describe(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  const msg = String(e?.message ?? err)
    .split('\n')[0]
    .slice(0, 200);
  const code = typeof e?.code === 'string' && !/^\d+$/.test(e.code) ? e.code : null;
  return code && !msg.includes(code) ? `${code}: ${msg}` : msg;
}

/**
 * ClickHouse sink: a pass-through stage (record batches in, the same out) that inserts one
 * row per input line into an events table and index.json's channel rows into a channels
 * table (both created if missing), through the official client, in batches.
 *
 * While the server accepts rows, a full queue holds the input back. When an insert fails the
 * rows go to a spool file in the output folder instead, and so does every later row while the
 * server is away, so the run is never held up and nothing is lost; the server is tried again
 * with a growing pause, and when it answers the spool is sent before rows flow directly again.
 * Rows are keyed (run + line, run + channel) in ReplacingMergeTree tables, so a row sent twice
 * (an insert that failed after the server stored it, a resend) counts once.
 */
export function createClickHouseSink(options: ClickHouseSinkOptions): Transform {
  const opts = withDefaults(CLICKHOUSE_SINK_DEFAULTS, options);
  const run = requireSession(options, 'createClickHouseSink');
  const tables: Record<TableKind, string> = { events: '', channels: '' };
  for (const [kind, name] of [
    ['events', opts.eventsTable],
    ['channels', opts.channelsTable],
  ] as const) {
    const quoted = quoteTableName(name);
    if (!quoted) {
      const expected = `a name such as subtee_${kind} or db.subtee_${kind}`;
      throw new UsageError('ERR_BAD_OPTION', `clickhouse: ${kind}Table must be ${expected}, not "${name}"`);
    }
    tables[kind] = quoted;
  }
  const where = shownUrl(opts.url);
  // The client's errors may quote the URL it was given, credentials included.
  const problem = (err: unknown) => withoutUrlSecrets(describe(err), opts.url);
  let client: ClickHouseClient;
  try {
    new URL(opts.url);
    const { createClient, ClickHouseLogLevel } = loadClient();
    client = createClient({
      url: opts.url,
      request_timeout: opts.timeoutMs,
      log: { level: ClickHouseLogLevel.OFF },
      max_open_connections: 2,
    });
  } catch (err) {
    throw new UsageError(
      'ERR_BAD_OPTION',
      `clickhouse: not a usable URL: ${where} (${problem(err)})`,
      err,
    );
  }
  const builder = new RowBuilder({ runId: opts.runId, maxContentChars: opts.maxContentChars });
  const spool = new Spool(() => {
    const dir = typeof opts.spoolDir === 'function' ? opts.spoolDir() : opts.spoolDir;
    return dir ?? join(process.cwd(), 'subtee-clickhouse-spool');
  });
  const backlog = opts.resend
    ? findSpoolFiles(opts.resend)
        .map(claimFile)
        .filter((f): f is string => f !== null)
    : [];
  /** Spool files this sink claimed and could not finish: reported at the end. */
  const leftovers = new Set<string>();
  const rejects = new Rejects();

  let mode: Mode = backlog.length > 0 ? 'draining' : 'online';
  const queue: Entry[] = [];
  let sending: Entry[] | null = null;
  let tablesReady = false;
  let lastError = '';
  let flushTimer: NodeJS.Timeout | null = null;
  let probeTimer: NodeJS.Timeout | null = null;
  let probeDelayMs = 250;
  let closing = false;
  let closed = false;
  const waiters: Array<() => void> = [];
  const wake = () => {
    for (const w of waiters.splice(0)) w();
  };
  const changed = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      waiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });

  const runId = () => (builder.runId ??= randomRunId());

  // Rows of this run get its id when they leave the queue (toward the server or the spool);
  // rows read back from a spool carry the id of the run that made them.
  const insert = async (entries: Entry[]) => {
    if (!tablesReady) {
      for (const kind of ['events', 'channels'] as const)
        await client.command({ query: tableDdl(kind, tables[kind]) });
      tablesReady = true;
    }
    for (const kind of ['events', 'channels'] as const) {
      const values = entries.filter((e) => e.t === kind).map((e) => e.r);
      if (values.length > 0) await client.insert({ table: tables[kind], values, format: 'JSONEachRow' });
    }
  };

  const toSpool = (entries: Entry[]) => {
    if (entries.length > 0) spool.append(withRun(entries, runId()));
  };

  const scheduleProbe = () => {
    if (closing || probeTimer) return;
    probeTimer = setTimeout(probe, probeDelayMs);
    probeDelayMs = Math.min(probeDelayMs * 2, opts.maxRetryDelayMs);
  };

  const goOffline = (err: unknown, entries: Entry[]) => {
    lastError = problem(err);
    toSpool(entries);
    if (mode !== 'offline') {
      mode = 'offline';
      const what = `ClickHouse at ${where} is not taking rows (${lastError}); they are kept in ${spool.file} and sent when it answers`;
      lateWarn(run, 'CLICKHOUSE_UNAVAILABLE', what);
    }
    wake();
    scheduleProbe();
  };

  const send = () => {
    if (closed || mode !== 'online' || sending || queue.length === 0) return;
    const batch = withRun(queue.splice(0, opts.batchRows), runId());
    sending = batch;
    insert(batch).then(
      () => {
        if (closed) return;
        sending = null;
        wake();
        if (queue.length >= opts.batchRows || (closing && queue.length > 0)) send();
        else armFlush();
      },
      (err) => {
        if (closed) return;
        sending = null;
        try {
          goOffline(err, [...batch, ...queue.splice(0)]);
        } catch (spoolErr) {
          sink.destroy(spoolErr as Error);
        }
      },
    );
  };

  const armFlush = () => {
    if (flushTimer || queue.length === 0 || closing) return;
    flushTimer = setTimeout(() => {
      flushTimer = null;
      send();
    }, opts.flushIntervalMs);
  };

  /** Sends the backlog and this run's spool; rows keep going to the spool until it is empty. */
  let draining: Promise<void> | null = null;
  const drain = () => {
    draining ??= (async () => {
      mode = 'draining';
      try {
        for (;;) {
          const file = backlog.shift() ?? spool.claimOwn();
          if (!file) break;
          leftovers.add(file);
          try {
            // A row the server refuses as data is set aside, not left to hold back the rest.
            const setAside = (entry: Entry, err: unknown) => rejects.add(dirname(file), entry, refusalReason(err));
            for (const batch of readSpool(file, opts.batchRows)) {
              if (closed) return;
              await insertSettingAside(batch, insert, setAside);
            }
          } catch (err) {
            if (closed) return;
            backlog.unshift(file);
            lastError = problem(err);
            mode = 'offline';
            scheduleProbe();
            return;
          }
          removeSpool(file);
          leftovers.delete(file);
        }
        // Nothing spooled is left, and rows spooled meanwhile were picked up above: flow directly.
        mode = 'online';
        probeDelayMs = 250;
      } finally {
        draining = null;
        wake();
      }
    })();
    return draining;
  };

  const probe = async () => {
    probeTimer = null;
    if (closed) return;
    const ping = await client.ping().catch((err) => ({ success: false as const, error: err as Error }));
    if (closed) return;
    if (!ping.success) {
      lastError = problem(ping.error);
      scheduleProbe();
      return;
    }
    await drain();
  };

  if (mode === 'draining') void drain();

  let finished: Promise<void> | null = null;
  const finish = () => {
    finished ??= (async () => {
      closing = true;
      if (flushTimer) clearTimeout(flushTimer);
      if (probeTimer) clearTimeout(probeTimer);
      flushTimer = probeTimer = null;
      const flags = { final: true, stalled: run.stalled, interrupted: run.interrupted };
      const final = [
        ...builder.releaseUntimed(),
        ...run.tree.channels().map((ch): Entry => ({ t: 'channels', r: builder.channelRow(ch, flags) })),
      ];
      if (mode === 'online') queue.push(...final);
      else toSpool(final);
      const deadline = Date.now() + opts.flushTimeoutMs;
      while (Date.now() < deadline) {
        if (mode === 'online') {
          if (queue.length === 0 && !sending) break;
          send();
        } else if (!draining) {
          // One more try at a server that was away: the spool goes now if it answers.
          const ping = await client.ping().catch((err) => ({ success: false as const, error: err as Error }));
          if (!ping.success) {
            lastError = problem(ping.error);
            break;
          }
          void drain();
        }
        await changed(Math.min(100, Math.max(1, deadline - Date.now())));
      }
      closed = true;
      // What did not make it in time waits in the spool (an insert cut short may have
      // landed: the keys make that harmless).
      toSpool([...(sending ?? []), ...queue.splice(0)]);
      sending = null;
      releaseClaims([...leftovers, ...backlog]);
      if (rejects.rows > 0) {
        const aside = [...rejects.files].join(', ');
        const what = `${rejects.rows} spooled rows refused by ClickHouse at ${where} (${rejects.reason})`;
        lateWarn(run, 'CLICKHOUSE_REJECTED', `${what}: set aside in ${aside}`);
      }
      const files = [...leftovers, ...backlog, ...(spool.rows > 0 ? [spool.file] : [])];
      let rows = spool.rows;
      for (const f of [...leftovers, ...backlog]) for (const b of readSpool(f, 10_000)) rows += b.length;
      if (files.length > 0) {
        const why = lastError ? ` (${lastError})` : '';
        const kept = [...new Set(files)].join(', ');
        lateWarn(
          run,
          'CLICKHOUSE_SPOOLED',
          `${rows} rows not sent to ClickHouse at ${where}${why}: kept in ${kept}; send them with --clickhouse-resend ${spool.dir}`,
        );
      }
      await client.close().catch(() => {});
    })();
    return finished;
  };

  const sink = new Transform({
    objectMode: true,
    highWaterMark: BATCH_HIGH_WATER_MARK,
    transform(batch: RecordBatch, _enc, cb: TransformCallback) {
      const entries: Entry[] = [];
      for (const rec of batch) entries.push(...builder.rows(rec));
      try {
        if (mode === 'online') queue.push(...entries);
        else toSpool(entries);
      } catch (err) {
        return cb(err as Error);
      }
      if (queue.length >= opts.batchRows) send();
      else armFlush();
      if (mode !== 'online' || queue.length < opts.maxQueueRows) return cb(null, batch);
      (async () => {
        while (mode === 'online' && queue.length >= opts.maxQueueRows) await changed(1000);
      })().then(() => cb(null, batch));
    },
    flush(cb: TransformCallback) {
      finish().then(() => cb(), cb);
    },
    destroy(err, cb) {
      finish().then(
        () => cb(err),
        () => cb(err),
      );
    },
  });
  return sink;
}

export { SPOOL_FILE };

export const clickhouseSinkPlugin = definePlugin<
  Omit<ClickHouseSinkOptions, 'session' | 'spoolDir'> & { spoolDir?: string }
>({
  name: 'clickhouse',
  kind: 'sink',
  kit: BUILTIN_KIT,
  options: {
    url: {
      type: 'string',
      required: true,
      description: 'the HTTP interface, e.g. http://user:password@host:8123 (a path names the database)',
    },
    eventsTable: {
      type: 'string',
      default: CLICKHOUSE_SINK_DEFAULTS.eventsTable,
      description: 'table of one row per input line, created if missing',
    },
    channelsTable: {
      type: 'string',
      default: CLICKHOUSE_SINK_DEFAULTS.channelsTable,
      description: "table of index.json's channel rows, created if missing",
    },
    runId: {
      type: 'string',
      description: "the run's key in both tables (default: the uuid of the stream's first line)",
    },
    spoolDir: {
      type: 'string',
      description: "where rows wait while the server is away (default the files sink's out folder)",
    },
    resend: {
      type: 'string',
      description:
        "a folder whose spool files (and its subfolders') are sent first: what earlier runs could not send",
    },
    maxContentChars: {
      type: 'integer',
      min: 0,
      default: CLICKHOUSE_SINK_DEFAULTS.maxContentChars,
      description: 'content prefix kept per row',
    },
    batchRows: {
      type: 'integer',
      min: 1,
      default: CLICKHOUSE_SINK_DEFAULTS.batchRows,
      description: 'rows per insert',
    },
    flushIntervalMs: {
      type: 'integer',
      min: 1,
      default: CLICKHOUSE_SINK_DEFAULTS.flushIntervalMs,
      description: 'a partial batch is inserted after this long',
    },
    maxQueueRows: {
      type: 'integer',
      min: 1,
      default: CLICKHOUSE_SINK_DEFAULTS.maxQueueRows,
      description: 'rows held before input waits',
    },
    timeoutMs: {
      type: 'integer',
      min: 1,
      default: CLICKHOUSE_SINK_DEFAULTS.timeoutMs,
      description: "one request's timeout",
    },
    maxRetryDelayMs: {
      type: 'integer',
      min: 1,
      default: CLICKHOUSE_SINK_DEFAULTS.maxRetryDelayMs,
      description: 'longest pause between attempts to reach the server again',
    },
    flushTimeoutMs: {
      type: 'integer',
      min: 0,
      default: CLICKHOUSE_SINK_DEFAULTS.flushTimeoutMs,
      description: 'at the end, how long to wait for the last rows',
    },
  },
  create: (o, ctx) =>
    createClickHouseSink({
      ...o,
      spoolDir: o.spoolDir ?? (() => ctx.session.channelFiles?.out),
      session: ctx.session,
    }),
});
