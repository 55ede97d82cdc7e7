/**
 * `subtee stats`: figures over many runs, from each run's index.json (or from the ClickHouse
 * sink's channel rows, which carry the same fields). Plain data, no I/O: the command reads
 * one index.json at a time and hands it here, so memory does not grow with the runs' size.
 */
import { isObject } from '../model/message.js';
import { formatUsd } from './cost.js';
import { channelTokens, elapsedMs } from './walk.js';
import { escapeOneLine, escapeTextLines, escapeWorkflowCommands } from './escape.js';
import { cutText } from '../model/display.js';

export const STATS_GROUPINGS = ['agent', 'model', 'day'] as const;
export type StatsGrouping = (typeof STATS_GROUPINGS)[number];

export const STATS_DEFAULTS = Object.freeze({
  /** Entries in the costliest and the failed lists. */
  top: 10,
});

/** The agent name of the main conversation in the tables (the ClickHouse rows' own name for it). */
const MAIN_AGENT = 'main';
/** The group of channels whose agent, model or day is not known. */
export const UNKNOWN_KEY = '(unknown)';

/** One channel (the main conversation or a subagent) as the figures need it. */
export interface StatsChannel {
  /** The run folder's path, or the ClickHouse run id. */
  run: string;
  /** null for the main conversation. */
  channel: string | null;
  agent: string;
  model: string;
  status: string;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheCreationTokens: number;
  /** Its tokens as the tree summary counts them (channelTokens: input + output, else a stated total). */
  tokens: number;
  /**
   * The channel's own dollars; null when not priced or its usage unknown (or written before
   * index.json had cost).
   */
  costUsd: number | null;
  /** Its usage is unknown (index.json's `cost.basis`): counted apart from the unpriced. */
  costUnknown: boolean;
  /** ended_at − started_at (else last_seen − first_seen); null when unknown or the end is earlier. */
  elapsedMs: number | null;
  lastSeenMs: number | null;
  /** Transcript paths relative to the run folder (folders only). */
  log: string | null;
  jsonl: string | null;
}

/** A run: its start (earliest first_seen of its channels, ms) and its channels. */
export interface StatsRun {
  /** index.json's `run_id`: two folders with the same one hold one recording, processed twice. */
  runId: string | null;
  startMs: number | null;
  channels: StatsChannel[];
  /** Dollars the run's result counts and no channel shows (index.json's `cost.unattributed_usd`). */
  unattributedUsd: number;
  /** Figures of its index.json refused as implausible (see `plausible`), counted as none. */
  refused: number;
  /** The first of them, for the warning: `channels[2].usage.input_tokens is 1e+308`. */
  firstRefused: string | null;
}

export interface StatsGroup {
  key: string;
  /** Runs with at least one channel in the group. */
  runs: number;
  /** Channels in the group: subagents, and main conversations as agent `main`. */
  agents: number;
  failed: number;
  /** failed / agents × 100, two decimals; null for an empty group. */
  failed_pct: number | null;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_creation_tokens: number;
  /** input + output (a channel stating only a total: that total), as the tree summary counts. */
  tokens: number;
  /** Sum over the priced channels (and, where a run's dollars are, its unattributed ones); null when none. */
  cost_usd: number | null;
  /** Channels without a price (counted apart, never guessed). */
  unpriced: number;
  /** Channels whose usage is unknown (no token counts in the stream): null dollars, counted apart. */
  unknown: number;
  /**
   * Of `cost_usd`, the runs' dollars no channel shows (the `(unattributed)` row in agent and
   * model tables).
   */
  unattributed_usd: number;
  /** Nearest-rank percentiles of the channels' elapsed times, exact; null without any. */
  elapsed_p50_ms: number | null;
  elapsed_p95_ms: number | null;
}

export interface StatsSubagent {
  run: string;
  channel: string;
  agent: string;
  model: string;
  status: string;
  tokens: number;
  cost_usd: number | null;
  elapsed_ms: number | null;
  /** The transcripts (paths from the current folder); null from ClickHouse. */
  log: string | null;
  jsonl: string | null;
}

export interface StatsReport {
  source: 'folders' | 'clickhouse';
  since: string | null;
  runs: number;
  /** Run folders whose index.json could not be read, or lists no channel (named on stderr). */
  skipped: number;
  /** Figures refused as implausible in the runs counted (named on stderr), counted as none. */
  refused: number;
  tables: Partial<Record<StatsGrouping, StatsGroup[]>>;
  total: StatsGroup;
  /** Subagents by their own cost, then tokens: the top entries. */
  costliest: StatsSubagent[];
  /** Failed subagents, the latest (by last_seen) first: the top entries. */
  failed: StatsSubagent[];
  failed_total: number;
}

/**
 * The largest count or dollar amount stats takes from an index.json: 2^53 − 1, past any figure
 * subtee writes (it refuses 10^7 tokens of a kind in a message, $10^6 for a run). Every figure
 * added up is at most this, so no sum over any number of runs reaches Infinity (2^53 figures of
 * 2^53 are 2^106, and a double holds 2^1023), and a token count stays a whole number.
 */
export const STATS_MAX_FIGURE = Number.MAX_SAFE_INTEGER;

/**
 * A count or amount from index.json: itself when it is a number from 0 to STATS_MAX_FIGURE (a
 * whole one when it is a `count`); undefined when missing or not a number (not stated); null
 * otherwise (negative, not finite, implausibly large, a fraction of a token): refused, counted
 * as none, and named.
 */
export function plausible(v: unknown, count = false): number | null | undefined {
  if (typeof v !== 'number') return undefined;
  const inRange = Number.isFinite(v) && v >= 0 && v <= STATS_MAX_FIGURE;
  return inRange && (!count || Number.isInteger(v)) ? v : null;
}

const text = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);

function timeMs(v: unknown): number | null {
  if (typeof v !== 'string') return null;
  const ms = Date.parse(v);
  return Number.isFinite(ms) && ms > 0 ? ms : null;
}

/** A transcript path from index.json, kept only when it names a file inside the run folder. */
function insidePath(v: unknown, ext: 'log' | 'jsonl'): string | null {
  if (typeof v !== 'string') return null;
  const name = /^(main|agents\/[A-Za-z0-9_.~-]{1,200})\.(log|jsonl)$/.exec(v);
  return name !== null && name[2] === ext && !v.includes('..') ? v : null;
}

/**
 * A channel's model key: the first model it used (index.json lists them in first-use order;
 * almost every channel has one), which is what the ClickHouse sink's `model` column holds.
 */
function modelKey(models: unknown): string {
  if (!Array.isArray(models)) return '';
  const first = models.find((m): m is string => typeof m === 'string' && m !== '');
  return first ?? '';
}

/** Reads index.json's figures through `plausible`, counting and naming the ones it refuses. */
class FigureReader {
  refused = 0;
  first: string | null = null;

  read(v: unknown, where: () => string, count = false): number | undefined {
    const n = plausible(v, count);
    if (n !== null) return n;
    if (this.refused++ === 0) this.first = `${where()} is ${String(v)}`;
    return undefined;
  }
}

/** The usage counts stats reads, each through `plausible`. */
const USAGE_FIELDS = [
  'input_tokens',
  'output_tokens',
  'cache_read_input_tokens',
  'cache_creation_input_tokens',
  'total_tokens',
] as const;

/** The group key of the runs' unattributed dollars in the agent and model tables. */
export const UNATTRIBUTED_KEY = '(unattributed)';

/**
 * Why statsRunOf takes no run from a parsed index.json, or null when it takes one: not a subtee
 * index (a half-written file that happens to parse, another program's JSON), or one that lists
 * no channel (every index.json subtee writes lists main), which would be a run of nothing.
 */
export function statsSkipReason(index: unknown): string | null {
  if (!isObject(index) || typeof index.format !== 'string' || !index.format.startsWith('subtee-index/'))
    return 'not a subtee index.json';
  if (!Array.isArray(index.channels)) return 'not a subtee index.json';
  if (!index.channels.some(isObject)) return 'index.json lists no channel';
  return null;
}

/**
 * The figures of one parsed index.json, or null when `statsSkipReason` names why not. A figure
 * refused by `plausible` counts as none and is counted in `refused`.
 */
export function statsRunOf(run: string, index: unknown): StatsRun | null {
  if (statsSkipReason(index) !== null) return null;
  const doc = index as { channels: unknown[]; cost?: unknown; run_id?: unknown };
  const channels: StatsChannel[] = [];
  const figures = new FigureReader();
  let startMs: number | null = null;
  for (const [i, c] of doc.channels.entries()) {
    if (!isObject(c)) continue;
    const stated = isObject(c.usage) ? c.usage : {};
    const usage: Record<string, number> = {};
    for (const k of USAGE_FIELDS) {
      const n = figures.read(stated[k], () => `channels[${i}].usage.${k}`, true);
      if (n !== undefined) usage[k] = n;
    }
    const cost = isObject(c.cost) ? c.cost : null;
    const usd = cost ? figures.read(cost.usd, () => `channels[${i}].cost.usd`) : undefined;
    // Its span, spawn to report (index.json's started_at/ended_at; older ones have only lines).
    const first = timeMs(c.started_at) ?? timeMs(c.first_seen);
    const last = timeMs(c.ended_at) ?? timeMs(c.last_seen);
    if (first !== null && (startMs === null || first < startMs)) startMs = first;
    const id = text(c.id);
    channels.push({
      run,
      channel: id,
      agent: id === null ? MAIN_AGENT : (text(c.agent) ?? ''),
      model: modelKey(c.models),
      status: text(c.status) ?? '',
      inputTokens: usage.input_tokens ?? 0,
      outputTokens: usage.output_tokens ?? 0,
      cacheReadTokens: usage.cache_read_input_tokens ?? 0,
      cacheCreationTokens: usage.cache_creation_input_tokens ?? 0,
      tokens: channelTokens({ usage }),
      // Its own dollars (absent before index.json carried cost); none when its usage is unknown.
      costUsd: cost === null || cost.basis === 'unknown' ? null : (usd ?? null),
      costUnknown: cost !== null && cost.basis === 'unknown',
      elapsedMs: elapsedMs(first, last),
      lastSeenMs: last,
      log: insidePath(c.log, 'log'),
      jsonl: insidePath(c.jsonl, 'jsonl'),
    });
  }
  const cost = isObject(doc.cost) ? doc.cost : {};
  const unattributedUsd = figures.read(cost.unattributed_usd, () => 'cost.unattributed_usd') ?? 0;
  const runId = typeof doc.run_id === 'string' && doc.run_id.length > 0 ? doc.run_id : null;
  return { runId, startMs, channels, unattributedUsd, refused: figures.refused, firstRefused: figures.first };
}

/** A UTC day `YYYY-MM-DD`. */
function dayOf(ms: number | null): string {
  return ms === null ? UNKNOWN_KEY : new Date(ms).toISOString().slice(0, 10);
}

/**
 * Elapsed times of one group, kept whole for exact percentiles: 8 bytes a channel in a
 * growing Float64Array (a million subagents are 8 MB per grouping), never an object each.
 */
class Samples {
  private values = new Float64Array(64);
  length = 0;

  push(v: number): void {
    if (this.length === this.values.length) {
      const bigger = new Float64Array(this.values.length * 2);
      bigger.set(this.values);
      this.values = bigger;
    }
    this.values[this.length++] = v;
  }

  /** Nearest-rank percentiles (the smallest value with at least p of the values at or below it). */
  percentiles(percents: readonly number[]): Array<number | null> {
    if (this.length === 0) return percents.map(() => null);
    const sorted = this.values.subarray(0, this.length).sort();
    return percents.map((p) => nearestRank(sorted, p));
  }
}

/**
 * The value at rank ceil(percent × n / 100) (1-based) of sorted values; the SQL path computes
 * the same. Whole percents keep the rank exact (0.95 × 60 is 57.00000000000001 in floating point).
 */
function nearestRank(sorted: ArrayLike<number>, percent: number): number {
  const rank = Math.max(1, Math.ceil((percent * sorted.length) / 100));
  return sorted[Math.min(rank, sorted.length) - 1];
}

class GroupTotals {
  runs = 0;
  agents = 0;
  failed = 0;
  input = 0;
  output = 0;
  cacheRead = 0;
  cacheCreation = 0;
  tokens = 0;
  cost = 0;
  priced = 0;
  unknown = 0;
  unattributed = 0;
  elapsed = new Samples();
  /** The last run counted, so a run with several channels in the group counts once. */
  lastRun = -1;

  private countRun(runNo: number): void {
    if (this.lastRun !== runNo) {
      this.lastRun = runNo;
      this.runs++;
    }
  }

  /** A run's dollars that no channel shows: in the total, its day, and the `(unattributed)` rows. */
  addUnattributed(usd: number, runNo: number): void {
    this.countRun(runNo);
    this.unattributed += usd;
  }

  add(ch: StatsChannel, runNo: number): void {
    this.countRun(runNo);
    this.agents++;
    if (ch.status === 'failed') this.failed++;
    this.input += ch.inputTokens;
    this.output += ch.outputTokens;
    this.cacheRead += ch.cacheReadTokens;
    this.cacheCreation += ch.cacheCreationTokens;
    this.tokens += ch.tokens;
    if (ch.costUsd !== null) {
      this.cost += ch.costUsd;
      this.priced++;
    } else if (ch.costUnknown) this.unknown++;
    if (ch.elapsedMs !== null) this.elapsed.push(ch.elapsedMs);
  }

  row(key: string): StatsGroup {
    const [p50, p95] = this.elapsed.percentiles([50, 95]);
    return groupRow(key, { ...this, p50, p95 });
  }
}

/** What a group adds up; the folders path and the ClickHouse path both end here. */
interface GroupSums {
  runs: number;
  agents: number;
  failed: number;
  input: number;
  output: number;
  cacheRead: number;
  cacheCreation: number;
  /** Tokens as the tree summary counts them; input + output when not given. */
  tokens?: number;
  /** Dollars over the priced channels. */
  cost: number;
  priced: number;
  /** Channels of unknown usage (not in `priced`, not unpriced either). */
  unknown?: number;
  /** Dollars of the runs that no channel shows. */
  unattributed?: number;
  p50: number | null;
  p95: number | null;
}

export function groupRow(key: string, s: GroupSums): StatsGroup {
  return {
    key,
    runs: s.runs,
    agents: s.agents,
    failed: s.failed,
    failed_pct: s.agents === 0 ? null : roundTo((s.failed / s.agents) * 100, 2),
    input_tokens: s.input,
    output_tokens: s.output,
    cache_read_tokens: s.cacheRead,
    cache_creation_tokens: s.cacheCreation,
    tokens: s.tokens ?? s.input + s.output,
    cost_usd: s.priced === 0 && !(s.unattributed ?? 0) ? null : roundTo(s.cost + (s.unattributed ?? 0), 6),
    unpriced: s.agents - s.priced - (s.unknown ?? 0),
    unknown: s.unknown ?? 0,
    unattributed_usd: roundTo(s.unattributed ?? 0, 6),
    elapsed_p50_ms: s.p50,
    elapsed_p95_ms: s.p95,
  };
}

/** n to `digits` decimals; a figure too large to scale has none to round, and is itself. */
export function roundTo(n: number, digits: number): number {
  const f = 10 ** digits;
  const scaled = n * f;
  return Number.isFinite(scaled) ? Math.round(scaled) / f : n;
}

const costRank = (s: StatsSubagent) => s.cost_usd ?? -1;

/** Costliest first: own cost (unpriced last), tokens, then channel and run for a stable order. */
function costlierFirst(a: StatsSubagent, b: StatsSubagent): number {
  return (
    costRank(b) - costRank(a) ||
    b.tokens - a.tokens ||
    (a.channel < b.channel ? -1 : a.channel > b.channel ? 1 : 0) ||
    (a.run < b.run ? -1 : a.run > b.run ? 1 : 0)
  );
}

/** Latest failure first, then channel and run. */
type Failure = StatsSubagent & { lastSeenMs: number };

function laterFirst(a: Failure, b: Failure): number {
  return (
    b.lastSeenMs - a.lastSeenMs ||
    (a.channel < b.channel ? -1 : a.channel > b.channel ? 1 : 0) ||
    (a.run < b.run ? -1 : a.run > b.run ? 1 : 0)
  );
}

/**
 * The best `size` entries by `order`: a heap whose root is the worst kept, so an offer costs
 * a comparison, or a logarithm of `size` when it is kept; sorted once, when read. (`--top` is
 * the user's number: a list kept sorted by insertion was quadratic in it.)
 */
export class TopList<T> {
  private readonly heap: T[] = [];
  constructor(
    private readonly size: number,
    private readonly order: (a: T, b: T) => number,
  ) {}

  /** `a` goes below `b` in the heap: it is better, or as good. */
  private below(a: T, b: T): boolean {
    return this.order(a, b) <= 0;
  }

  offer(item: T): void {
    const heap = this.heap;
    if (this.size <= 0) return;
    if (heap.length < this.size) {
      let at = heap.push(item) - 1;
      while (at > 0) {
        const up = (at - 1) >> 1;
        if (this.below(item, heap[up])) break;
        heap[at] = heap[up];
        at = up;
      }
      heap[at] = item;
      return;
    }
    if (this.order(item, heap[0]) >= 0) return;
    let at = 0;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const worse = right < heap.length && !this.below(heap[right], heap[left]) ? right : left;
      if (this.below(heap[worse], item)) break;
      heap[at] = heap[worse];
      at = worse;
    }
    heap[at] = item;
  }

  /** The entries kept, best first. */
  get items(): T[] {
    return this.heap.slice().sort(this.order);
  }
}

interface StatsOptions {
  /** Tables to build; all three when not given. */
  by?: readonly StatsGrouping[];
  /** Runs that started before this (ms) are left out, and runs with no time at all. */
  sinceMs?: number | null;
  top?: number;
  /** Joins a run key and a path relative to its folder (the folders path). */
  joinPath?: (run: string, rel: string) => string;
}

/** Adds runs one at a time; memory is a few numbers per group and the elapsed samples. */
export class StatsAggregator {
  private readonly groups = new Map<StatsGrouping, Map<string, GroupTotals>>();
  private readonly total = new GroupTotals();
  private readonly costliest: TopList<StatsSubagent>;
  private readonly failedList: TopList<StatsSubagent & { lastSeenMs: number }>;
  private failedTotal = 0;
  private runs = 0;
  private refused = 0;
  skipped = 0;

  constructor(private readonly options: StatsOptions = {}) {
    for (const by of options.by ?? STATS_GROUPINGS) this.groups.set(by, new Map());
    const top = options.top ?? STATS_DEFAULTS.top;
    this.costliest = new TopList(top, costlierFirst);
    this.failedList = new TopList(top, laterFirst);
  }

  /** Counts a run; false when --since leaves it out. */
  addRun(run: StatsRun): boolean {
    const since = this.options.sinceMs ?? null;
    if (since !== null && (run.startMs === null || run.startMs < since)) return false;
    const runNo = this.runs++;
    this.refused += run.refused;
    const day = dayOf(run.startMs);
    if (run.unattributedUsd > 0) {
      this.total.addUnattributed(run.unattributedUsd, runNo);
      for (const [by, table] of this.groups) {
        const key = by === 'day' ? day : UNATTRIBUTED_KEY;
        let g = table.get(key);
        if (!g) table.set(key, (g = new GroupTotals()));
        g.addUnattributed(run.unattributedUsd, runNo);
      }
    }
    for (const ch of run.channels) {
      this.total.add(ch, runNo);
      for (const [by, table] of this.groups) {
        const raw = by === 'agent' ? ch.agent : by === 'model' ? ch.model : day;
        const key = raw === '' ? UNKNOWN_KEY : raw;
        let g = table.get(key);
        if (!g) table.set(key, (g = new GroupTotals()));
        g.add(ch, runNo);
      }
      if (ch.channel === null) continue;
      const sub = this.subagent(ch);
      this.costliest.offer(sub);
      if (ch.status === 'failed') {
        this.failedTotal++;
        this.failedList.offer({ ...sub, lastSeenMs: ch.lastSeenMs ?? 0 });
      }
    }
    return true;
  }

  private subagent(ch: StatsChannel): StatsSubagent {
    const join = this.options.joinPath;
    return {
      run: ch.run,
      channel: ch.channel ?? '',
      agent: ch.agent,
      model: ch.model,
      status: ch.status,
      tokens: ch.tokens,
      cost_usd: ch.costUsd,
      elapsed_ms: ch.elapsedMs,
      log: ch.log && join ? join(ch.run, ch.log) : null,
      jsonl: ch.jsonl && join ? join(ch.run, ch.jsonl) : null,
    };
  }

  report(since: string | null = null): StatsReport {
    const tables: Partial<Record<StatsGrouping, StatsGroup[]>> = {};
    for (const [by, table] of this.groups)
      tables[by] = sortGroups(
        by,
        [...table].map(([k, g]) => g.row(k)),
      );
    return {
      source: 'folders',
      since,
      runs: this.runs,
      skipped: this.skipped,
      refused: this.refused,
      tables,
      total: this.total.row('all'),
      costliest: this.costliest.items,
      failed: this.failedList.items.map(({ lastSeenMs: _last, ...s }) => s),
      failed_total: this.failedTotal,
    };
  }
}

/** Days in order; agents and models by cost, then tokens, then name. */
export function sortGroups(by: StatsGrouping, rows: StatsGroup[]): StatsGroup[] {
  return rows.sort((a, b) =>
    by === 'day'
      ? a.key < b.key
        ? -1
        : a.key > b.key
          ? 1
          : 0
      : (b.cost_usd ?? -1) - (a.cost_usd ?? -1) ||
        b.tokens - a.tokens ||
        (a.key < b.key ? -1 : a.key > b.key ? 1 : 0),
  );
}

// ---- output ---------------------------------------------------------------------------

const thousands = (n: number) => Math.round(n).toLocaleString('en-US');

export function formatMs(ms: number | null): string {
  if (ms === null) return '–';
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(Math.floor(s % 60)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

function table(head: string[], rows: string[][], right: (column: number) => boolean): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (right(i) ? c.padStart(widths[i]) : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(head), ...rows.map(line)].join('\n');
}

const GROUP_HEAD = ['runs', 'agents', 'failed %', 'tokens', 'cost', 'p50', 'p95'];

function groupCells(g: StatsGroup): string[] {
  return [
    thousands(g.runs),
    thousands(g.agents),
    g.failed_pct === null ? '–' : g.failed_pct.toFixed(1),
    thousands(g.tokens),
    g.cost_usd === null ? '–' : formatUsd(g.cost_usd) + (g.unpriced > 0 || g.unknown > 0 ? '+' : ''),
    formatMs(g.elapsed_p50_ms),
    formatMs(g.elapsed_p95_ms),
  ];
}

/** How wide a column of names from the data is at most. */
const NAME_CHARS = 60;

/** Names from the data are shown on one line, control characters escaped, cut as a `label` to a column. */
const shown = (s: string, max = NAME_CHARS) => cutText(escapeOneLine(s), 'label', max).text;

/** A group's name as `shown`, in the first column: it starts its line, so is never a workflow command. */
const keyCell = (key: string) =>
  cutText(escapeWorkflowCommands(escapeOneLine(key)), 'label', NAME_CHARS).text;

function subagentRows(list: StatsSubagent[]): string {
  return table(
    ['cost', 'tokens', 'elapsed', 'agent', 'transcript'],
    list.map((s) => [
      formatUsd(s.cost_usd),
      thousands(s.tokens),
      formatMs(s.elapsed_ms),
      shown(s.agent || UNKNOWN_KEY, 30),
      escapeOneLine(s.log ?? s.jsonl ?? `${s.run} ${s.channel}`),
    ]),
    (column) => column < 3,
  );
}

/** The report as terminal text: a table per grouping, the total, the two lists. */
export function statsText(r: StatsReport): string {
  const out: string[] = [];
  const from = r.source === 'clickhouse' ? 'ClickHouse' : 'run folders';
  const skipped = r.skipped > 0 ? `, ${r.skipped} skipped (index.json unreadable or of no channel)` : '';
  const refused = r.refused > 0 ? `, ${thousands(r.refused)} implausible figures counted as none` : '';
  const runs = `${thousands(r.runs)} run${r.runs === 1 ? '' : 's'}`;
  out.push(`${runs} from ${from}${r.since ? ` since ${r.since}` : ''}${skipped}${refused}`);
  for (const by of STATS_GROUPINGS) {
    const rows = r.tables[by];
    if (!rows) continue;
    out.push(
      '',
      table(
        [by, ...GROUP_HEAD],
        [...rows.map((g) => [keyCell(g.key), ...groupCells(g)]), ['all', ...groupCells(r.total)]],
        (column) => column > 0,
      ),
    );
  }
  const groups = [r.total, ...Object.values(r.tables).flat()];
  if (groups.some((g) => g.cost_usd !== null && (g.unpriced > 0 || g.unknown > 0)))
    out.push(
      '(cost+: some agents in the group have no price or no known usage; their cost is not in the figure)',
    );
  if (r.total.unknown > 0)
    out.push(
      `(${thousands(r.total.unknown)} agents of unknown usage: their dollars are null, counted apart; ` +
        'what their runs stated for them is in the unattributed dollars)',
    );
  if (r.total.unattributed_usd > 0)
    out.push(
      `(${UNATTRIBUTED_KEY}: ${formatUsd(r.total.unattributed_usd)} ` +
        `the runs' results count and no agent shows; ` +
        'in every total)',
    );
  out.push('', `costliest subagents (${r.costliest.length}):`);
  if (r.costliest.length > 0) out.push(subagentRows(r.costliest));
  const latest = r.failed_total > r.failed.length ? `, latest ${r.failed.length}` : '';
  out.push('', `failed subagents (${thousands(r.failed_total)}${latest}):`);
  if (r.failed.length > 0) out.push(subagentRows(r.failed));
  return `${out.join('\n')}\n`;
}

/** One CSV field (RFC 4180); text that a spreadsheet would run as a formula is made inert. */
function csvField(v: string | number | null): string {
  if (v === null) return '';
  if (typeof v === 'number') return String(v);
  // Control characters and workflow commands from the data are escaped here too: CSV often
  // lands on a terminal, or a job log, where a quoted field's second line starts a line.
  const shownText = escapeTextLines(v);
  const safe = /^[=+\-@\t\r]/.test(shownText) ? `'${shownText}` : shownText;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

const CSV_COLUMNS = [
  'by',
  'key',
  'runs',
  'agents',
  'failed',
  'failed_pct',
  'input_tokens',
  'output_tokens',
  'cache_read_tokens',
  'cache_creation_tokens',
  'tokens',
  'cost_usd',
  'unpriced',
  'unknown',
  'unattributed_usd',
  'elapsed_p50_ms',
  'elapsed_p95_ms',
] as const;

/** The tables as CSV: one row per group, the grouping in the first column, the total as `all`. */
export function statsCsv(r: StatsReport): string {
  const lines = [CSV_COLUMNS.join(',')];
  const row = (by: string, g: StatsGroup) =>
    CSV_COLUMNS.map((c) => csvField(c === 'by' ? by : g[c])).join(',');
  for (const by of STATS_GROUPINGS) for (const g of r.tables[by] ?? []) lines.push(row(by, g));
  lines.push(row('all', r.total));
  return `${lines.join('\r\n')}\r\n`;
}
