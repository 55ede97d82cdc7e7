/**
 * `subtee stats --clickhouse URL`: the same figures as over run folders, from the ClickHouse
 * sink's channels table (one row per channel of every run, the last version kept by FINAL).
 * The SQL is plain, for ClickHouse 18.16 through current releases, and printed in docs/stats.md
 * so a dashboard can run it as is.
 */
import { EXIT, SubteeError, UsageError } from '../errors.js';
import { headOf } from '../model/bounded-text.js';
import { isObject } from '../model/message.js';
import { shownUrl, withoutUrlSecrets } from '../shown-url.js';
import {
  groupRow,
  roundTo,
  sortGroups,
  STATS_DEFAULTS,
  STATS_GROUPINGS,
  UNATTRIBUTED_KEY,
  UNKNOWN_KEY,
  type StatsGroup,
  type StatsGrouping,
  type StatsReport,
  type StatsSubagent,
} from '../views/stats.js';
import { CLICKHOUSE_SINK_DEFAULTS, connectClickHouse } from './sinks/clickhouse.js';
import { quoteTableName } from './sinks/clickhouse-options.js';

interface ClickHouseStatsOptions {
  url: string;
  channelsTable?: string;
  by?: readonly StatsGrouping[];
  sinceMs?: number | null;
  since?: string | null;
  top?: number;
  timeoutMs?: number;
}

/**
 * Every channel row with its run's start (the earliest first_seen of the run's channels, as
 * over folders), limited to runs since a time: the rows the other queries read.
 */
function channelsWithStart(table: string, sinceMs: number | null): string {
  const where = sinceMs === null ? '' : `\nWHERE run_start_ms >= ${Math.floor(sinceMs)}`;
  return `SELECT * FROM (SELECT *, ${STARTED} AS span_start_ms,
                 ${ENDED} AS span_end_ms
               FROM ${table} FINAL)
ANY LEFT JOIN (SELECT run, minIf(first_seen_ms, first_seen_ms > 0) AS run_start_ms
               FROM ${table} FINAL GROUP BY run) USING (run)${where}`;
}

/**
 * A channel's span, spawn to report (`started_at_ms`/`ended_at_ms`; rows an older subtee wrote
 * have only their first and last line, and 0 there): `span_start_ms`, `span_end_ms`.
 */
const STARTED = 'if(started_at_ms > 0, started_at_ms, first_seen_ms)';
const ENDED = 'if(ended_at_ms > 0, ended_at_ms, last_seen_ms)';

/** The grouping key of a row: the agent (`main` for the main conversation), the model, the run's UTC day. */
const GROUP_KEYS: Readonly<Record<StatsGrouping | 'all', string>> = Object.freeze({
  agent: `if(agent = '', '${UNKNOWN_KEY}', agent)`,
  model: `if(model = '', '${UNKNOWN_KEY}', model)`,
  day:
    `if(run_start_ms = 0, '${UNKNOWN_KEY}', ` +
    `toString(toDate(toDateTime(intDiv(run_start_ms, 1000), 'UTC'))))`,
  all: `'all'`,
});

/** A run's dollars no channel shows, on its main conversation's row (older rows: NULL, none). */
const UNATTRIBUTED = 'greatest(ifNull(unattributed_usd, 0), 0)';

/**
 * One row per group. Elapsed percentiles are exact and nearest-rank: the value at rank
 * ceil(percent × n / 100) of the group's sorted elapsed times (the folders path computes the same), not
 * ClickHouse's approximate `quantile`. Dollars: `count(cost_usd)` counts the priced channels,
 * `countIf(cost_basis = 'unknown')` those of unknown usage (null dollars, not unpriced). The
 * runs' unattributed dollars are in the total and their day, and the row `(unattributed)` of
 * the agent and model tables, as over folders: every table adds up to the runs' dollars.
 */
export function groupSql(table: string, by: StatsGrouping | 'all', sinceMs: number | null): string {
  const apart = by === 'agent' || by === 'model';
  const groups = `SELECT ${GROUP_KEYS[by]} AS key,
  uniqExact(run) AS runs, count() AS agents, countIf(status = 'failed') AS failed,
  sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
  sum(cache_read_tokens) AS cache_read_tokens, sum(cache_creation_tokens) AS cache_creation_tokens,
  ifNull(sum(cost_usd), 0) AS usd, count(cost_usd) AS priced, countIf(cost_basis = 'unknown') AS unknown,
  ${apart ? 'toFloat64(0)' : `sum(${UNATTRIBUTED})`} AS unattributed,
  arraySort(groupArrayIf(toInt64(span_end_ms) - toInt64(span_start_ms),
                         span_start_ms > 0 AND span_end_ms >= span_start_ms)) AS elapsed,
  length(elapsed) AS elapsed_n,
  if(elapsed_n = 0, 0, elapsed[toUInt64(greatest(1, ceil(50 * elapsed_n / 100)))]) AS elapsed_p50_ms,
  if(elapsed_n = 0, 0, elapsed[toUInt64(greatest(1, ceil(95 * elapsed_n / 100)))]) AS elapsed_p95_ms
FROM (${channelsWithStart(table, sinceMs)})
GROUP BY key`;
  if (!apart) return groups;
  return `${groups}
UNION ALL
SELECT '${UNATTRIBUTED_KEY}' AS key,
  uniqExact(run) AS runs, toUInt64(0) AS agents, toUInt64(0) AS failed,
  toUInt64(0) AS input_tokens, toUInt64(0) AS output_tokens,
  toUInt64(0) AS cache_read_tokens, toUInt64(0) AS cache_creation_tokens,
  toFloat64(0) AS usd, toUInt64(0) AS priced, toUInt64(0) AS unknown,
  sum(${UNATTRIBUTED}) AS unattributed,
  emptyArrayInt64() AS elapsed, toUInt64(0) AS elapsed_n,
  toInt64(0) AS elapsed_p50_ms, toInt64(0) AS elapsed_p95_ms
FROM (${channelsWithStart(table, sinceMs)})
WHERE ${UNATTRIBUTED} > 0
GROUP BY key
HAVING runs > 0`;
}

const SUBAGENT_COLUMNS = `run, channel, agent, model, status,
  input_tokens + output_tokens AS tokens, cost_usd,
  if(span_start_ms > 0 AND span_end_ms >= span_start_ms,
     toInt64(span_end_ms) - toInt64(span_start_ms), NULL) AS elapsed_ms`;

/** The costliest subagents: own cost (unpriced last), tokens, then channel and run. */
function costliestSql(table: string, sinceMs: number | null, top: number): string {
  return `SELECT ${SUBAGENT_COLUMNS}
FROM (${channelsWithStart(table, sinceMs)})
WHERE channel != ''
ORDER BY ifNull(cost_usd, -1) DESC, tokens DESC, channel, run
LIMIT ${Math.floor(top)}`;
}

/** The failed subagents, the latest first (by their report, else their last line). */
function failedSql(table: string, sinceMs: number | null, top: number): string {
  return `SELECT ${SUBAGENT_COLUMNS}
FROM (${channelsWithStart(table, sinceMs)})
WHERE channel != '' AND status = 'failed'
ORDER BY span_end_ms DESC, channel, run
LIMIT ${Math.floor(top)}`;
}

type Row = Record<string, unknown>;

/** An answer that is not what the sink's table gives: what was wrong, shown bounded. */
class BadAnswer extends Error {}

const shown = (v: unknown): string => {
  let text: string;
  try {
    text = JSON.stringify(v) ?? String(v);
  } catch {
    text = String(v);
  }
  // Cut to a bound here, and to what is shown only once credentials are masked (`badAnswer`).
  return text.length > 64 * 1024 ? text.slice(0, 64 * 1024) : text;
};

/**
 * A count, a sum or a time as ClickHouse writes it in JSONEachRow: a JSON number, or a 64-bit
 * one quoted as a decimal string; null for a sum of nothing. Anything else (an object, text,
 * a negative number, one no double holds) is an answer subtee cannot use.
 */
function num(row: Row, field: string): number {
  const v = row[field];
  if (v === null) return 0;
  const decimal = typeof v === 'string' && /^\d+(\.\d+)?(e[+-]?\d+)?$/i.test(v);
  const n = typeof v === 'number' ? v : decimal ? Number(v) : NaN;
  if (!Number.isFinite(n) || n < 0) throw new BadAnswer(`"${field}" is ${shown(v)}, not a count`);
  return n;
}

/** A name (a key, a run, a channel): text, or null where the column may be empty. */
function str(row: Row, field: string, orNull = false): string {
  const v = row[field];
  if (typeof v === 'string') return v;
  if (orNull && v === null) return '';
  throw new BadAnswer(`"${field}" is ${shown(v)}, not text`);
}

/** The total of no channels. */
const NO_ROWS: Row = Object.freeze({
  runs: 0,
  agents: 0,
  failed: 0,
  input_tokens: 0,
  output_tokens: 0,
  cache_read_tokens: 0,
  cache_creation_tokens: 0,
  usd: 0,
  priced: 0,
  unknown: 0,
  unattributed: 0,
  elapsed_n: 0,
});

function groupOf(row: Row): StatsGroup {
  const timed = num(row, 'elapsed_n');
  return groupRow(str(row, 'key'), {
    runs: num(row, 'runs'),
    agents: num(row, 'agents'),
    failed: num(row, 'failed'),
    input: num(row, 'input_tokens'),
    output: num(row, 'output_tokens'),
    cacheRead: num(row, 'cache_read_tokens'),
    cacheCreation: num(row, 'cache_creation_tokens'),
    cost: num(row, 'usd'),
    priced: num(row, 'priced'),
    unknown: num(row, 'unknown'),
    unattributed: num(row, 'unattributed'),
    p50: timed === 0 ? null : num(row, 'elapsed_p50_ms'),
    p95: timed === 0 ? null : num(row, 'elapsed_p95_ms'),
  });
}

function subagentOf(row: Row): StatsSubagent {
  return {
    run: str(row, 'run'),
    channel: str(row, 'channel'),
    agent: str(row, 'agent'),
    model: str(row, 'model', true),
    status: str(row, 'status'),
    tokens: num(row, 'tokens'),
    cost_usd: row.cost_usd === null ? null : roundTo(num(row, 'cost_usd'), 6),
    elapsed_ms: row.elapsed_ms === null ? null : num(row, 'elapsed_ms'),
    log: null,
    jsonl: null,
  };
}

function badAnswer(url: string, what: string): SubteeError {
  return new SubteeError(
    'ERR_CLICKHOUSE',
    `clickhouse: ${shownUrl(url)} did not answer as the sink's channels table does ` +
      `(${headOf(withoutUrlSecrets(what, url), 200)}); ` +
      'is it a ClickHouse server, and the table one the sink wrote?',
    { exitCode: EXIT.IO },
  );
}

/** The stats report from the sink's channels table. Throws SubteeErrors (2: bad options, 3: unreachable). */
export async function clickhouseStats(options: ClickHouseStatsOptions): Promise<StatsReport> {
  const name = options.channelsTable ?? CLICKHOUSE_SINK_DEFAULTS.channelsTable;
  const table = quoteTableName(name);
  if (table === null)
    throw new UsageError('ERR_BAD_OPTION', `clickhouse: channelsTable must be a table name, not "${name}"`);
  const where = shownUrl(options.url);
  const timeoutMs = options.timeoutMs ?? CLICKHOUSE_SINK_DEFAULTS.timeoutMs;
  const client = await connectClickHouse(options.url, timeoutMs);
  const sinceMs = options.sinceMs ?? null;
  const top = options.top ?? STATS_DEFAULTS.top;
  const rows = async (query: string): Promise<Row[]> => {
    let answer: unknown;
    try {
      answer = await (await client.query({ query, format: 'JSONEachRow' })).json();
    } catch (err) {
      const first = String((err as Error)?.message ?? err)
        .split('\n')[0]
        .slice(0, 300);
      const msg = withoutUrlSecrets(first, options.url);
      throw new SubteeError('ERR_CLICKHOUSE', `clickhouse: cannot query ${where}: ${msg}`, {
        exitCode: EXIT.IO,
        cause: err,
      });
    }
    const bad = !Array.isArray(answer) ? 'not rows' : answer.findIndex((r) => !isObject(r)) + 1;
    if (bad !== 0)
      throw badAnswer(options.url, bad === 'not rows' ? 'not rows' : `row ${bad} is not an object`);
    return answer as Row[];
  };
  try {
    const tables: Partial<Record<StatsGrouping, StatsGroup[]>> = {};
    for (const by of options.by ?? STATS_GROUPINGS)
      tables[by] = sortGroups(by, (await rows(groupSql(table, by, sinceMs))).map(groupOf));
    const [totalRow] = await rows(groupSql(table, 'all', sinceMs));
    // No row: an empty table (or none since --since).
    const total = totalRow ? groupOf(totalRow) : groupOf({ ...NO_ROWS, key: 'all' });
    const [failedCount] = await rows(
      `SELECT count() AS n FROM (${channelsWithStart(table, sinceMs)})\n` +
        `WHERE channel != '' AND status = 'failed'`,
    );
    return {
      source: 'clickhouse',
      since: options.since ?? null,
      runs: total.runs,
      skipped: 0,
      refused: 0,
      tables,
      total,
      costliest: top === 0 ? [] : (await rows(costliestSql(table, sinceMs, top))).map(subagentOf),
      failed: top === 0 ? [] : (await rows(failedSql(table, sinceMs, top))).map(subagentOf),
      failed_total: failedCount ? num(failedCount, 'n') : 0,
    };
  } catch (err) {
    if (err instanceof BadAnswer) throw badAnswer(options.url, err.message);
    throw err;
  } finally {
    await client.close();
  }
}
