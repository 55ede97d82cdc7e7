import { CUT_LENGTHS } from '../../model/display.js';
import type { SinkRun } from '../../model/session.js';
import { httpUrlProblem } from '../../shown-url.js';
import { BUILTIN_KIT, type PluginManifest } from '../plugin.js';

/**
 * The clickhouse sink's options (defaults, types, specs) and definition without its code: at hand for
 * the command line, configs and the schema. Its code (clickhouse.ts) is imported only by a chain that
 * names it (builtins.ts).
 */

export const CLICKHOUSE_SINK_DEFAULTS = Object.freeze({
  eventsTable: 'subtee_events',
  channelsTable: 'subtee_channels',
  /** Longest content (and summary, description) kept per row, in characters, cut marker included. */
  maxContentChars: CUT_LENGTHS.stored.chars,
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

const TABLE_NAME_PART = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A table name as SQL: `table` or `database.table`, each part a plain identifier, quoted. */
export function quoteTableName(name: string): string | null {
  const parts = name.split('.');
  if (parts.length > 2 || !parts.every((p) => TABLE_NAME_PART.test(p))) return null;
  return parts.map((p) => `\`${p}\``).join('.');
}

/** The check of a table option: what is wrong with `name` as the `kind` table's, or null. */
export function tableNameCheck(kind: 'events' | 'channels'): (name: string) => string | null {
  return (name) =>
    quoteTableName(name) === null ? `must be a name such as subtee_${kind} or db.subtee_${kind}` : null;
}

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
  session: SinkRun;
  /**
   * Aborted to stop at once (the command line's second signal): the end waits for nothing,
   * what is not sent stays in the spool.
   */
  signal?: AbortSignal;
}

export const clickhouseSinkDefinition: PluginManifest<
  Omit<ClickHouseSinkOptions, 'session' | 'spoolDir' | 'signal'> & { spoolDir?: string }
> = {
  name: 'clickhouse',
  kind: 'sink',
  kit: BUILTIN_KIT,
  options: {
    url: {
      type: 'string',
      required: true,
      // Checked with the options, before any sink is made: a bad URL leaves no folder behind.
      // What only the client can judge (its URL parameters) is checked once it is imported.
      check: httpUrlProblem,
      description: 'the HTTP interface, e.g. http://user:password@host:8123 (a path names the database)',
    },
    eventsTable: {
      type: 'string',
      default: CLICKHOUSE_SINK_DEFAULTS.eventsTable,
      check: tableNameCheck('events'),
      description: 'table of one row per input line, created if missing',
    },
    channelsTable: {
      type: 'string',
      default: CLICKHOUSE_SINK_DEFAULTS.channelsTable,
      check: tableNameCheck('channels'),
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
};
