import type { CostView, UsageEvent } from '../../model/cost.js';
import { rememberLatest } from '../../model/latest.js';
import { endFigures, type EndFigures, type ToolEvent } from '../../model/run-model.js';
import type { ChannelEvent, ChannelPlace } from '../../model/tree.js';
import { quarantinedLines, type SpooledRecord, type SubteeRecord } from '../../model/record.js';
import { escapeControl } from '../../views/escape.js';
import { lineContent, type ContentItem } from '../../model/content.js';
import { lineTypeOf, nonEmpty, rawBlocks, type CountedBlockType as BlockKind } from '../../model/message.js';
import type { SpanChannel } from './otlp-spans.js';
import { CUT_LENGTHS, storedText } from '../../model/display.js';
import { jsonText } from '../../model/json-text.js';
import { DISPLAY_DEFAULTS, type DisplayPolicy } from '../../model/display.js';
import { runIdFrom, StreamClock } from './stream-facts.js';

/**
 * One row of the events table: one per record, so one per input line (quarantined lines
 * included) plus one per line a mapped producer's event stands for beyond its own.
 */
export interface EventRow {
  run: string;
  session: string;
  line: number;
  /** The record's index among the records of its input line: 0 for the line's own. */
  part: number;
  /** Unix seconds (DateTime('UTC')): the line's own timestamp, else the latest one before it. */
  ts: number;
  ts_ms: number;
  /** 1 when the line carried its own timestamp. */
  has_ts: number;
  /** The channel id; '' for the main conversation (and for quarantined lines). */
  channel: string;
  parent: string;
  /** -1 while unknown. */
  depth: number;
  /** The subagent type; 'main' for the main conversation. */
  agent: string;
  type: string;
  subtype: string;
  /** The line's content block kinds, comma-separated (`text`, `tool_use`…); `quarantine` for a bad line. */
  kind: string;
  /**
   * The line's first tool call's name, else the name of the call its first tool result
   * answers (when that call was among the latest TOOL_NAMES_REMEMBERED); '' for neither.
   * From the run model's tool events, cut to the `stored` class.
   */
  tool: string;
  /** The first non-empty id of the line's tool calls and results, cut as `tool`. */
  tool_use_id: string;
  /** 1 for a tool result with `is_error`, and for a `result` line with `is_error`. */
  is_error: number;
  /**
   * The tool calls and results the tree counted on the line (its tool events), so that a sum
   * over a channel's rows is index.json's `counts.tool_use` and `counts.tool_result`.
   */
  tool_uses: number;
  tool_results: number;
  /**
   * This line's share of the API message's usage, so that a sum over lines equals index.json's
   * usage (signed: a later line of a message may report less than an earlier one).
   */
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_creation_tokens: number;
  bytes: number;
  content: string;
}

/** One row of the channels table: index.json's row of a channel, as of version `ver`. */
export interface ChannelRow {
  run: string;
  session: string;
  channel: string;
  parent: string;
  depth: number;
  agent: string;
  description: string;
  status: string;
  /** -1 unknown, 0 foreground, 1 background. */
  background: number;
  orphan: number;
  summary: string;
  lines: number;
  text_blocks: number;
  thinking_blocks: number;
  tool_uses: number;
  tool_results: number;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_creation_tokens: number;
  /** The first model the channel used ('' before any). */
  model: string;
  /** The channel's dollars as of this row; null when its model has no price or its usage is unknown. */
  cost_usd: number | null;
  /** How its output tokens were found (index.json's cost.basis): exact, estimated, stream, unknown. */
  cost_basis: string;
  /**
   * On the main conversation's row, the run's dollars no channel shows (index.json's
   * `cost.unattributed_usd`); null on every other row and when there are none to tell.
   */
  unattributed_usd: number | null;
  first_seen: number;
  last_seen: number;
  first_seen_ms: number;
  last_seen_ms: number;
  /** The channel's span as index.json's started_at/ended_at (0: unknown): spawn to report, main the run. */
  started_at_ms: number;
  ended_at_ms: number;
  stalled: number;
  interrupted: number;
  /** Rows of a channel replace each other by this version (the input line they were taken at). */
  ver: number;
}

export type TableKind = 'events' | 'channels';
export interface Entry {
  t: TableKind;
  r: EventRow | ChannelRow;
}

/**
 * The two tables, for ClickHouse 18.16 (Debian's) through current releases: no DateTime64,
 * no JSON type, no Nullable in keys. ReplacingMergeTree keyed on run + line + part (run +
 * channel) makes a resend after a failure harmless: query with FINAL, or count distinct keys.
 */
export function tableDdl(kind: TableKind, name: string): string {
  if (kind === 'events') {
    return `CREATE TABLE IF NOT EXISTS ${name} (
  run String, session String, line UInt64, part UInt32,
  ts DateTime('UTC'), ts_ms UInt64, has_ts UInt8,
  channel String, parent String, depth Int16, agent String,
  type String, subtype String, kind String, tool String, tool_use_id String, is_error UInt8,
  tool_uses UInt32, tool_results UInt32,
  input_tokens Int64, output_tokens Int64, cache_read_tokens Int64, cache_creation_tokens Int64,
  bytes UInt64, content String
) ENGINE = ReplacingMergeTree PARTITION BY toYYYYMM(ts) ORDER BY (run, line, part)`;
  }
  return `CREATE TABLE IF NOT EXISTS ${name} (
  run String, session String, channel String, parent String, depth Int16, agent String, description String,
  status String, background Int8, orphan UInt8, summary String, lines UInt64,
  text_blocks UInt32, thinking_blocks UInt32, tool_uses UInt32, tool_results UInt32,
  input_tokens UInt64, output_tokens UInt64, cache_read_tokens UInt64, cache_creation_tokens UInt64,
  model String, cost_usd Nullable(Float64), cost_basis String, unattributed_usd Nullable(Float64),
  first_seen DateTime('UTC'), last_seen DateTime('UTC'), first_seen_ms UInt64, last_seen_ms UInt64,
  started_at_ms UInt64, ended_at_ms UInt64,
  stalled UInt8, interrupted UInt8, ver UInt64
) ENGINE = ReplacingMergeTree(ver) ORDER BY (run, channel)`;
}

/** Columns later versions added, with their types: a table an older version made lacks them. */
const ADDED_COLUMNS: Readonly<Record<TableKind, ReadonlyArray<readonly [string, string]>>> = Object.freeze({
  events: [
    ['part', 'UInt32'],
    ['tool_uses', 'UInt32'],
    ['tool_results', 'UInt32'],
  ],
  channels: [
    ['model', 'String'],
    ['cost_usd', 'Nullable(Float64)'],
    ['started_at_ms', 'UInt64'],
    ['ended_at_ms', 'UInt64'],
    ['cost_basis', 'String'],
    ['unattributed_usd', 'Nullable(Float64)'],
  ],
});

/**
 * What brings a table made by an older version up to date, given the columns it has (from
 * `DESCRIBE TABLE`): one ALTER per missing column (ClickHouse 18.16 has no `ADD COLUMN IF
 * NOT EXISTS`). Old rows read the new columns as their defaults ('' and NULL).
 */
export function addColumnsDdl(kind: TableKind, name: string, existing: readonly string[]): string[] {
  return ADDED_COLUMNS[kind]
    .filter(([column]) => !existing.includes(column))
    .map(([column, type]) => `ALTER TABLE ${name} ADD COLUMN ${column} ${type}`);
}

/** subtee's columns of a table and their types, in the order tableDdl makes them. */
export function tableColumns(kind: TableKind): Array<readonly [string, string]> {
  const ddl = tableDdl(kind, 'x');
  const body = ddl.slice(ddl.indexOf('(') + 1, ddl.lastIndexOf(') ENGINE'));
  return body.split(',').map((column) => {
    const [name, ...type] = column.trim().split(/\s+/);
    return [name, type.join(' ')] as const;
  });
}

/**
 * Why an existing table is not one subtee writes to, from its `DESCRIBE TABLE` rows: a column
 * subtee writes that it lacks (other than those later versions added, which addColumnsDdl
 * adds) or has with another type. Null for subtee's table, whatever columns it has besides.
 */
export function foreignShape(
  kind: TableKind,
  described: ReadonlyArray<{ name: string; type: string; default_type?: string }>,
): string | null {
  const has = new Map(described.map((c) => [c.name, c.type]));
  // A column computed by the table (MATERIALIZED, ALIAS) cannot be written.
  const computed = new Set(
    described.filter((c) => /^(MATERIALIZED|ALIAS)$/.test(c.default_type ?? '')).map((c) => c.name),
  );
  const added = new Set(ADDED_COLUMNS[kind].map(([column]) => column));
  const missing: string[] = [];
  const retyped: string[] = [];
  for (const [column, type] of tableColumns(kind)) {
    const found = has.get(column);
    if (found === undefined) {
      if (!added.has(column)) missing.push(column);
    } else if (found !== type) retyped.push(`${column} is ${found}, not ${type}`);
    else if (computed.has(column)) retyped.push(`${column} is computed by the table`);
  }
  if (missing.length === 0 && retyped.length === 0) return null;
  const shown = (list: string[]) =>
    list.slice(0, 3).join(', ') + (list.length > 3 ? ` and ${list.length - 3} more` : '');
  return [
    ...(missing.length > 0 ? [`no column ${shown(missing)}`] : []),
    ...(retyped.length > 0 ? [shown(retyped)] : []),
  ].join('; ');
}

/**
 * Whether an events table, from its `SHOW CREATE TABLE` statement, replaces rows that share
 * (run, line): a replacing (or collapsing) engine whose sorting key lacks `part`, as an older
 * subtee made it. ORDER BY cannot be altered, so such a table keeps one row per line under
 * FINAL or after a merge.
 */
export function keyLosesParts(createStatement: string): boolean {
  if (!/ENGINE = (Replacing|Collapsing|VersionedCollapsing|Summing|Aggregating)/.test(createStatement))
    return false;
  const order = /ORDER BY \(?([^)\n]*)\)?/.exec(createStatement);
  return order !== null && !/\bpart\b/.test(order[1]);
}

const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);

type UsageColumns = Pick<
  EventRow,
  'input_tokens' | 'output_tokens' | 'cache_read_tokens' | 'cache_creation_tokens'
>;

/** Longest text stored in a String column (the display policy's `stored` class). */
export const ROW_BUILDER_DEFAULTS = Object.freeze({ maxContentChars: CUT_LENGTHS.stored.chars });

/** Rows held at most while waiting for the stream's first timestamp. */
const UNTIMED_MAX = 10_000;

/** Tool calls whose names are kept for their results' rows (the latest). */
export const TOOL_NAMES_REMEMBERED = 10_000;
/** Longest call id kept: real ids are about 30 characters; a longer one's result gets no name. */
const TOOL_ID_MAX_CHARS = CUT_LENGTHS.stored.chars;

/**
 * Turns routed records into table rows. Plain logic, no I/O. The run id is the given one, else
 * the stream's own (see runIdFrom): rows made before it is known carry '' and are completed
 * by `withRun` before they are written.
 */
export class RowBuilder {
  readonly clock = new StreamClock();
  runId: string | null;
  private session = '';
  private readonly maxChars: number;
  /**
   * Tool names (cut to `stored`) by tool_use id, until the result arrives: the latest
   * TOOL_NAMES_REMEMBERED calls, ids of at most TOOL_ID_MAX_CHARS.
   */
  private readonly toolNames = new Map<string, string>();
  /** Bytes of a too-long line whose pieces are still arriving. */
  private pieceBytes = 0;
  /** Input lines seen: the version of channel rows. */
  lines = 0;
  /** The input line of the latest event row, and its part: records of one line come together. */
  private partLine = -1;
  private part = 0;
  /** Rows made before the first timestamp; null once released. */
  private untimed: Entry[] | null = [];

  /** The run's cost ledger: each channel row carries the channel's model and dollars. */
  private readonly costs: Pick<CostView, 'channelCost' | 'unattributedUsd'> | null;

  /**
   * How rows show thinking: a block the policy drops has no text. A function reads the
   * run's policy as each row is made (the sink's: `() => run.display`).
   */
  private readonly display: () => DisplayPolicy;

  constructor(
    options: {
      runId?: string;
      maxContentChars?: number;
      costs?: Pick<CostView, 'channelCost' | 'unattributedUsd'>;
      display?: DisplayPolicy | (() => DisplayPolicy);
    } = {},
  ) {
    this.runId = options.runId ?? null;
    const display = options.display ?? DISPLAY_DEFAULTS;
    this.display = typeof display === 'function' ? display : () => display;
    this.costs = options.costs ?? null;
    this.maxChars = options.maxContentChars ?? ROW_BUILDER_DEFAULTS.maxContentChars;
  }

  /**
   * The rows of one record: its event row, plus a channel row for every tree change it caused.
   * Lines before the stream's first timestamp (init, hooks) are held back and given that time.
   */
  rows(rec: SubteeRecord): Entry[] {
    const out = this.rowsOf(rec);
    if (this.clock.latest === null && this.untimed !== null) {
      for (const entry of out) this.untimed.push(entry);
      if (this.untimed.length < UNTIMED_MAX) return [];
      return this.releaseUntimed();
    }
    if (this.untimed === null || this.untimed.length === 0) return out;
    const first = this.clock.first!;
    for (const e of this.untimed) {
      if (e.t !== 'events') continue;
      const r = e.r as EventRow;
      r.ts = Math.floor(first / 1000);
      r.ts_ms = first;
    }
    const held = this.releaseUntimed();
    if (this.runId) withRun(held, this.runId);
    return [...held, ...out];
  }

  /** Rows still held for want of a time (a stream with no timestamp yet): at the end of the run. */
  releaseUntimed(): Entry[] {
    const held = this.untimed ?? [];
    this.untimed = null;
    return held;
  }

  /** A quarantined line's row; `bytes` counts the pieces a line came in, when it came in pieces. */
  private quarantineRow(lineNo: number, reason: string, raw: Buffer, bytes = raw.length): Entry {
    this.lines++;
    const start = raw.subarray(0, this.maxChars * 4).toString('utf8');
    const content = this.content(start, raw.length > this.maxChars * 4 ? null : start.length);
    const fields = { type: 'quarantine', subtype: reason, kind: 'quarantine', bytes, content };
    return { t: 'events', r: this.event(lineNo, this.clock.latest, false, null, fields) };
  }

  private rowsOf(rec: SubteeRecord): Entry[] {
    if (rec.kind === 'quarantine') {
      this.pieceBytes += rec.raw.length;
      if (!rec.final) return [];
      const bytes = this.pieceBytes;
      this.pieceBytes = 0;
      if (rec.lines !== undefined && rec.lines > 1)
        return quarantinedLines(rec).map((line) => this.quarantineRow(line.lineNo, rec.reason, line.raw));
      return [this.quarantineRow(rec.lineNo, rec.reason, rec.raw, bytes)];
    }
    if (rec.kind === 'spooled') return this.spooledRows(rec);
    this.lines++;
    const v = rec.value;
    this.runId ??= runIdFrom(v);
    this.session = this.sessionOf(v) ?? this.session;
    const { ms, own } = this.clock.observe(v);
    const kinds = new Set<string>();
    const texts: string[] = [];
    const kind = lineTypeOf(v);
    const tools = this.toolColumns(rec.tools, kind === 'result' && v.is_error === true);
    if (kind === 'assistant' || kind === 'user')
      for (const b of rawBlocks(v)) kinds.add(typeof b.type === 'string' ? b.type : 'unknown');
    if (kind === 'system') texts.push(nonEmpty(v.summary) ?? nonEmpty(v.description) ?? '');
    // What the line says as every view reads it, thinking as the display policy shows it.
    else for (const item of lineContent(v, this.display())) texts.push(itemText(item));
    // Where the channel was as the line was routed, not as the tree has it by now.
    const ch = rec.place ?? rec.channel ?? null;
    const usage = usageColumns(rec.usage);
    const row = this.event(rec.lineNo, ms, own, ch, {
      type: nonEmpty(v.type) ?? '',
      subtype: nonEmpty(v.subtype) ?? '',
      kind: [...kinds].join(','),
      ...tools,
      bytes: rec.raw.length,
      content: this.content(texts.filter(Boolean).join('\n')),
      ...usage,
    });
    const out: Entry[] = [{ t: 'events', r: row }];
    for (const ev of rec.events ?? []) out.push({ t: 'channels', r: this.eventRow(ev) });
    return out;
  }

  /**
   * A line's tool columns from its tool events (the run model's, made where the tree counts
   * the blocks), in block order: the first call's name or the first answered call's, the first
   * non-empty id, is_error from its results (or the `result` line's own `isError`), and the counts.
   */
  private toolColumns(
    events: readonly ToolEvent[] | undefined,
    isError: boolean,
  ): Pick<EventRow, 'tool' | 'tool_use_id' | 'is_error' | 'tool_uses' | 'tool_results'> {
    if (events === undefined)
      return { tool: '', tool_use_id: '', is_error: isError ? 1 : 0, tool_uses: 0, tool_results: 0 };
    let tool = '';
    let id = '';
    let uses = 0;
    let results = 0;
    for (const ev of events) {
      id ||= ev.id;
      if (ev.type === 'toolCall') {
        uses++;
        const name = storedText(ev.name, 'stored');
        tool ||= name;
        if (name !== '' && ev.id !== '' && ev.id.length <= TOOL_ID_MAX_CHARS)
          rememberLatest(this.toolNames, ev.id, name, TOOL_NAMES_REMEMBERED);
      } else {
        results++;
        tool ||= this.toolNames.get(ev.id) ?? '';
        this.toolNames.delete(ev.id);
        if (ev.isError) isError = true;
      }
    }
    return {
      tool,
      tool_use_id: storedText(id, 'stored'),
      is_error: isError ? 1 : 0,
      tool_uses: uses,
      tool_results: results,
    };
  }

  /**
   * A line too long to hold: its row has its top-level fields, its tool and token columns as
   * a held line's, and its start as content.
   */
  private spooledRows(rec: SpooledRecord): Entry[] {
    this.lines++;
    const content = this.content(rec.head.toString('utf8'), null);
    const bytes = rec.spool.bytes;
    const v = rec.value;
    if (v === null) {
      const fields = { type: 'quarantine', subtype: rec.reason ?? '', kind: 'quarantine', bytes, content };
      return [{ t: 'events', r: this.event(rec.lineNo, this.clock.latest, false, null, fields) }];
    }
    this.runId ??= runIdFrom(v);
    this.session = this.sessionOf(v) ?? this.session;
    const { ms, own } = this.clock.observe(v);
    const ch = rec.place ?? rec.channel ?? null;
    const fields = {
      type: nonEmpty(v.type) ?? '',
      subtype: nonEmpty(v.subtype) ?? '',
      kind: 'spooled',
      // The tool and token columns as a held line's: from the model's events for the line.
      ...this.toolColumns(rec.tools, lineTypeOf(v) === 'result' && v.is_error === true),
      bytes,
      content,
      ...usageColumns(rec.usage),
    };
    const out: Entry[] = [{ t: 'events', r: this.event(rec.lineNo, ms, own, ch, fields) }];
    for (const ev of rec.events ?? []) out.push({ t: 'channels', r: this.eventRow(ev) });
    return out;
  }

  /**
   * The channels row of a tree change, as of its line whatever the sink reads later: a status
   * event's with the figures the run model froze into it (EndFigures, as pino's status line and
   * OTLP's agent span show them); an opened channel's or a spawn's with none (nothing froze any).
   */
  private eventRow(ev: ChannelEvent): ChannelRow {
    return this.channelRow(ev.channel, { figures: endFigures(ev) });
  }

  /**
   * A channels row: a tree change's, its cost figures `figures` (none: null dollars, no model,
   * basis ''; never the ledger's now, which holds lines after it), or (`final`, at the end)
   * the final one with the ledger's final figures, which outranks every earlier version.
   */
  channelRow(
    ch: SpanChannel & { counts?: Readonly<Record<BlockKind, number>> },
    o: { final?: boolean; stalled?: boolean; interrupted?: boolean; figures?: EndFigures | null },
  ): ChannelRow {
    const first = ch.firstSeen ? Date.parse(ch.firstSeen) : NaN;
    const last = ch.lastSeen ? Date.parse(ch.lastSeen) : NaN;
    const msOr0 = (x: number) => (Number.isFinite(x) ? x : 0);
    // The ledger's now only for the final row: a tree change's row is as of its own line.
    const frozen = o.final ? null : (o.figures ?? null);
    const costed = this.costs !== null && (o.final === true || frozen !== null);
    const cost = !costed ? null : o.final ? (this.costs?.channelCost(ch.id) ?? null) : frozen!.cost;
    // Spawn to report; main, and a subagent still running, to the latest time the run showed.
    const main = ch.id === null;
    const started = main ? (this.clock.first ?? first) : ch.startedAt ? Date.parse(ch.startedAt) : first;
    const running = main || ch.status === 'running';
    const ended = running ? (this.clock.latest ?? last) : ch.endedAt ? Date.parse(ch.endedAt) : last;
    return {
      run: this.runId ?? '',
      session: this.session,
      channel: ch.id ?? '',
      parent: ch.parent ?? '',
      depth: ch.depth ?? -1,
      agent: ch.id === null ? 'main' : (ch.agent ?? ''),
      description: escapeControl(storedText(ch.description ?? '', 'stored', this.maxChars)),
      status: ch.status,
      background: ch.background === null ? -1 : ch.background ? 1 : 0,
      orphan: ch.orphan ? 1 : 0,
      summary: this.content(ch.summary ?? ''),
      lines: ch.lines,
      text_blocks: ch.counts?.text ?? 0,
      thinking_blocks: ch.counts?.thinking ?? 0,
      tool_uses: ch.counts?.tool_use ?? 0,
      tool_results: ch.counts?.tool_result ?? 0,
      input_tokens: num(ch.usage.input_tokens),
      // The true (or estimated) output when the ledger knows it: the lines' own is a snapshot.
      output_tokens: cost ? cost.tokens.output_tokens : num(ch.usage.output_tokens),
      cache_read_tokens: num(ch.usage.cache_read_input_tokens),
      cache_creation_tokens: num(ch.usage.cache_creation_input_tokens),
      model: cost?.models[0] ?? '',
      cost_usd: cost === null ? null : cost.usd,
      // A channel the ledger never saw usage on is unknown, as index.json says.
      cost_basis: !costed ? '' : (cost?.basis ?? 'unknown'),
      // What no channel shows is the run's, told once: on main's final row.
      unattributed_usd: main && o.final ? (this.costs?.unattributedUsd() ?? null) : null,
      first_seen: Math.floor(msOr0(first) / 1000),
      last_seen: Math.floor(msOr0(last) / 1000),
      first_seen_ms: msOr0(first),
      last_seen_ms: msOr0(last),
      started_at_ms: msOr0(started),
      ended_at_ms: msOr0(ended),
      stalled: o.stalled ? 1 : 0,
      interrupted: o.interrupted ? 1 : 0,
      ver: o.final ? this.lines + 1 : this.lines,
    };
  }

  /**
   * A line's session id, cut like content: it is copied onto every later row, so a huge one
   * would be multiplied by the number of rows.
   */
  private sessionOf(v: Record<string, unknown>): string | null {
    const id = nonEmpty(v.session_id);
    return id === null ? null : storedText(id, 'stored', this.maxChars);
  }

  /**
   * Text for a String column, cut as `stored`; `whole`: the length of what `s` is the start of
   * (null: only its start was read).
   */
  private content(s: string, whole: number | null = s.length): string {
    return escapeControl(storedText(s, 'stored', this.maxChars, whole));
  }

  private event(
    line: number,
    ms: number | null,
    own: boolean,
    ch: Pick<ChannelPlace, 'id' | 'parent' | 'depth' | 'agent'> | null,
    fields: Partial<EventRow>,
  ): EventRow {
    const t = ms ?? 0;
    this.part = line === this.partLine ? this.part + 1 : 0;
    this.partLine = line;
    return {
      run: this.runId ?? '',
      session: this.session,
      line,
      part: this.part,
      ts: Math.floor(t / 1000),
      ts_ms: t,
      has_ts: own ? 1 : 0,
      channel: ch?.id ?? '',
      parent: ch?.parent ?? '',
      depth: ch ? (ch.depth ?? -1) : -1,
      agent: ch === null ? '' : ch.id === null ? 'main' : (ch.agent ?? ''),
      type: '',
      subtype: '',
      kind: '',
      tool: '',
      tool_use_id: '',
      is_error: 0,
      tool_uses: 0,
      tool_results: 0,
      input_tokens: 0,
      output_tokens: 0,
      cache_read_tokens: 0,
      cache_creation_tokens: 0,
      bytes: 0,
      content: '',
      ...fields,
    };
  }
}

/**
 * A line's usage columns: what the run model's cost ledger counted for it (its `usage` event),
 * so a channel's rows add up to what the ledger holds, each API message once however many
 * lines repeat its usage, and its output as the `message_delta` settles it. A line it counted
 * nothing for has zeros.
 */
function usageColumns(usage: UsageEvent | undefined): UsageColumns {
  if (usage === undefined)
    return { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_creation_tokens: 0 };
  const t = usage.tokens;
  return {
    input_tokens: t.input_tokens,
    output_tokens: t.output_tokens,
    cache_read_tokens: t.cache_read_input_tokens,
    cache_creation_tokens: t.cache_creation_5m_input_tokens + t.cache_creation_1h_input_tokens,
  };
}

/** An item's text in the `content` column: a tool call as its name and its input's JSON. */
function itemText(item: ContentItem): string {
  switch (item.kind) {
    case 'prompt':
    case 'text':
      return item.text;
    case 'thinking':
      return String(item.text);
    case 'tool_use':
      return `${item.name || 'tool'} ${jsonText(item.input ?? {}) ?? ''}`;
    case 'tool_result':
      return String(item.text);
    case 'run':
      return item.text ?? '';
  }
}

/** Fills in the run id of rows made before the stream showed it. */
export function withRun(entries: Entry[], runId: string): Entry[] {
  for (const e of entries) if (e.r.run === '') e.r.run = runId;
  return entries;
}
