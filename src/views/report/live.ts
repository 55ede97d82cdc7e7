import { EventEmitter } from 'node:events';
import { DISPLAY_DEFAULTS } from '../../model/display.js';
import type { JsonObject } from '../../model/message.js';
import type { RecordBatch } from '../../model/record.js';
import { channelUsage, indexCost } from '../cost.js';
import type { SinkRun } from '../../model/session.js';
import type { ReadonlyChannelCost } from '../../model/cost.js';
import { channelTimes, type ChannelTimes } from '../../model/tree.js';
import {
  endStatus,
  field,
  isoTime,
  lineFacts,
  REPORT_DEFAULTS,
  REPORT_FORMAT,
  TranscriptBudget,
  usageOf,
  runCostView,
  clip,
  type ChannelView,
  type ReportData,
  type ReportLimits,
  type RunView,
} from './model.js';

/** The output folder's file of quarantined lines, as index.json's `quarantine` names it. */
const QUARANTINE_FILE = 'quarantine.log';

export type FeedEventType = 'run' | 'channel' | 'entries' | 'end';

export interface FeedEvent {
  id: number;
  type: FeedEventType;
  /** The event's JSON, one line (it goes on an SSE `data:` line as is). */
  data: string;
}

/**
 * The live page's event log. Every event has an increasing id, so a client that reconnects
 * with `Last-Event-ID: n` gets exactly the events after n. Events with a key (the run's
 * facts, one channel's fields) replace the previous event of that key, which is then
 * dropped from the log: whoever has seen an event also gets its replacement, since the
 * replacement has a later id. Transcript events are never replaced, and the transcripts
 * are bounded, so the log is bounded too. It emits `published` after each event; the page's
 * server waits for it once per open page, so it sets no limit on listeners.
 */
export class ReportFeed extends EventEmitter {
  private events: Array<FeedEvent | null> = [];
  private readonly ids: number[] = [];
  private readonly latest = new Map<string, number>();
  private dropped = 0;
  private next = 1;
  ended = false;

  constructor() {
    super();
    this.setMaxListeners(0);
  }

  get lastId(): number {
    return this.next - 1;
  }

  publish(type: FeedEventType, data: string, key?: string): void {
    if (this.ended) return;
    const ev: FeedEvent = { id: this.next++, type, data };
    this.events.push(ev);
    this.ids.push(ev.id);
    if (key !== undefined) {
      const before = this.latest.get(key);
      this.latest.set(key, this.events.length - 1);
      if (before !== undefined) this.drop(before);
    }
    if (type === 'end') this.ended = true;
    this.emit('published');
  }

  end(): void {
    this.publish('end', '{}');
  }

  /** Events after `lastId`, oldest first. */
  since(lastId: number): FeedEvent[] {
    let lo = 0;
    let hi = this.ids.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.ids[mid] <= lastId) lo = mid + 1;
      else hi = mid;
    }
    const out: FeedEvent[] = [];
    for (let i = lo; i < this.events.length; i++) {
      const ev = this.events[i];
      if (ev) out.push(ev);
    }
    return out;
  }

  /** Events held (replaced ones excluded). */
  get size(): number {
    return this.events.length - this.dropped;
  }

  private drop(position: number): void {
    this.events[position] = null;
    this.dropped++;
    if (this.dropped > 1000 && this.dropped > this.events.length / 2) this.compact();
  }

  private compact(): void {
    const events: FeedEvent[] = [];
    const ids: number[] = [];
    const at = new Map<number, number>();
    for (const ev of this.events) {
      if (!ev) continue;
      at.set(ev.id, events.length);
      events.push(ev);
      ids.push(ev.id);
    }
    for (const [key, pos] of this.latest) this.latest.set(key, at.get(this.events[pos]!.id)!);
    this.events = events;
    this.ids.length = 0;
    for (const id of ids) this.ids.push(id);
    this.dropped = 0;
  }
}

/** The plain fields of a channel the report reads (a live Channel or a snapshot of one). */
export interface ChannelFields {
  id: string | null;
  parent: string | null;
  orphan: boolean;
  depth: number | null;
  agent: string | null;
  description: string | null;
  status: string;
  background: boolean | null;
  summary: string | null;
  lines: number;
  counts: Record<string, number>;
  usage: Record<string, number>;
  firstSeen: string | null;
  lastSeen: string | null;
  /** Spawn and report times (see Channel); null: unknown, or still running. */
  startedAt?: string | null;
  endedAt?: string | null;
}

interface Tracked {
  source: ChannelFields;
  budget: TranscriptBudget;
  spawned: number | null;
  prompt: string | null;
  sentEntries: number;
  sentTicks: number;
  sentFields: string;
  /** The ledger's figures its sent fields were made of (undefined: none made yet). */
  sentCost: ReadonlyChannelCost | null | undefined;
}

/** A channel's fields without its transcript; `cut` says how much of the transcript was left out. */
export type ChannelUpdate = Omit<ChannelView, 'entries' | 'ticks'>;

/**
 * A channel's fields as the page shows them; its final report cut to `summaryChars`. Its span is
 * `times` when given (index.json's, see channelTimes), else its own spawn and report or lines.
 */
export function channelUpdate(
  c: ChannelFields,
  extra: Pick<ChannelView, 'spawned' | 'prompt' | 'log' | 'cut' | 'cost'> &
    Partial<Pick<ChannelView, 'costBasis'>> & { usage?: Record<string, number>; times?: ChannelTimes },
  summaryChars: number = REPORT_DEFAULTS.summaryChars,
): ChannelUpdate {
  return {
    id: c.id === null ? null : field(c.id),
    parent: field(c.parent),
    orphan: c.orphan === true,
    depth: typeof c.depth === 'number' ? c.depth : null,
    agent: field(c.agent),
    description: field(c.description),
    status: endStatus(c.status),
    background: typeof c.background === 'boolean' ? c.background : null,
    summary: typeof c.summary === 'string' ? clip(c.summary, summaryChars, 'summary').s : null,
    lines: c.lines,
    counts: { ...c.counts },
    usage: usageOf(extra.usage ?? c.usage),
    first: isoTime(extra.times ? extra.times.startedAt : (c.startedAt ?? c.firstSeen)),
    last: isoTime(extra.times ? extra.times.endedAt : (c.endedAt ?? c.lastSeen)),
    cost: extra.cost,
    costBasis: extra.costBasis ?? null,
    spawned: extra.spawned,
    log: extra.log,
    prompt: extra.prompt,
    cut: extra.cut,
  };
}

/** Whether two of the ledger's figures for a channel show the same on the page. */
function sameFigures(a: ReadonlyChannelCost | null, b: ReadonlyChannelCost | null | undefined): boolean {
  if (a === b) return true;
  if (!a || !b) return false;
  if (a.usd !== b.usd || a.basis !== b.basis || a.transcriptOnly !== b.transcriptOnly) return false;
  const x = a.tokens;
  const y = b.tokens;
  return (
    x.input_tokens === y.input_tokens &&
    x.output_tokens === y.output_tokens &&
    x.cache_read_input_tokens === y.cache_read_input_tokens &&
    x.cache_creation_5m_input_tokens === y.cache_creation_5m_input_tokens &&
    x.cache_creation_1h_input_tokens === y.cache_creation_1h_input_tokens
  );
}

/**
 * Whether a line can change the figures of channels other than its own once the run has a
 * result: the result prices every channel's estimated output as a share of its own, so the
 * result line itself and any later usage (an assistant line, a message_delta) move every share.
 */
function repricesAll(value: JsonObject): boolean {
  return value.type === 'result' || value.type === 'assistant' || value.type === 'stream_event';
}

/**
 * The report built from records as they pass (the live page): it keeps each channel's
 * transcript under the same budgets as the static page and publishes what changed to a
 * ReportFeed when flushed: changed channels' fields, new transcript entries, the run's facts.
 * Fields are those of the channels the flushed lines touched; every channel's are compared
 * when the run's pricing may have moved them all (a result line, usage after one, the run's end).
 */
export class LiveReport {
  private readonly limits: ReportLimits;
  private readonly channels = new Map<string | null, Tracked>();
  private readonly order: Array<string | null> = [];
  private readonly spawnTimes = new Map<string, { t: number | null; prompt: string | null }>();
  private readonly touched = new Set<string | null>();
  /** A line since the last flush may have changed every channel's figures (see repricesAll). */
  private repriced = false;
  private version: string | null = null;
  private session: string | null = null;
  private sentRun = '';
  /** The run's latest line time when fields were last sent. */
  private sentLastTime: string | null = null;
  private chars = 0;

  constructor(
    private readonly feed: ReportFeed,
    private readonly run: SinkRun | undefined,
    private readonly subtee: string,
    limits: Partial<ReportLimits> = {},
    /** Whether the report's run writes an output folder (the sink's `out`): its quarantine file. */
    private readonly writesFolder = false,
  ) {
    this.limits = { ...REPORT_DEFAULTS, ...limits };
  }

  private track(c: ChannelFields): Tracked {
    let t = this.channels.get(c.id);
    if (!t) {
      const spawn = c.id === null ? undefined : this.spawnTimes.get(c.id);
      t = {
        source: c,
        budget: new TranscriptBudget(this.limits.channelChars, this.limits.ticksPerChannel),
        spawned: spawn?.t ?? null,
        prompt: spawn?.prompt ?? null,
        sentEntries: 0,
        sentTicks: 0,
        sentFields: '',
        sentCost: undefined,
      };
      this.channels.set(c.id, t);
      this.order.push(c.id);
    }
    t.source = c;
    this.touched.add(c.id);
    return t;
  }

  observe(batch: RecordBatch): void {
    for (const rec of batch) {
      if (rec.kind !== 'line') continue;
      for (const ev of rec.events ?? []) this.track(ev.channel as ChannelFields);
      if (!rec.channel) continue;
      const t = this.track(rec.channel as ChannelFields);
      if (!this.repriced && repricesAll(rec.value) && this.run?.cost.hasResult) this.repriced = true;
      const f = lineFacts(rec.value, this.limits, this.run?.display ?? DISPLAY_DEFAULTS);
      if (f.version) this.version = f.version;
      if (f.session) this.session = f.session;
      for (let k = 0; k < f.tools; k++) t.budget.tick(f.time);
      for (const s of f.spawns) {
        if (!this.spawnTimes.has(s.id)) this.spawnTimes.set(s.id, { t: f.time, prompt: s.prompt });
        const child = this.channels.get(s.id);
        if (child) {
          child.spawned ??= f.time;
          child.prompt ??= s.prompt;
          this.touched.add(s.id);
        }
      }
      if (rec.channel.id !== null && t.prompt === null) t.prompt = f.prompt;
      // The page's total is bounded like the static page's (each entry counting what it takes
      // on the page, not only its text); past it, transcripts stop growing.
      if (this.chars >= this.limits.maxPageBytes * 0.7) {
        if (f.entries.length > 0) t.budget.skipLine(f.entries.reduce((n, e) => n + e.s.length, 0));
      } else {
        this.chars += t.budget.addLine(f.entries);
      }
    }
  }

  /**
   * A channel's dollars so far and their basis (null when unpriced, unknown or there is no
   * session), and its usage as index.json shows it.
   */
  private channelUsd(
    c: ChannelFields,
    cost: ReadonlyChannelCost | null,
  ): Pick<ChannelView, 'cost' | 'costBasis'> & {
    usage?: Record<string, number>;
  } {
    if (!this.run) return { cost: null, costBasis: null };
    const usage = channelUsage(c.usage, cost);
    return cost === null
      ? { cost: null, costBasis: 'unknown', usage }
      : { cost: cost.usd, costBasis: cost.basis, usage };
  }

  runView(): RunView {
    const run = this.run;
    return {
      subtee: this.subtee,
      claudeCode: this.version,
      session: this.session,
      stalled: run?.stalled === true,
      interrupted: run?.interrupted === true,
      input: {
        lines: run?.input.lines ?? 0,
        bytes: run?.input.bytes ?? 0,
        quarantined: run?.input.quarantined ?? 0,
      },
      // As index.json names it: the files sink's file, made with the first quarantined line.
      quarantine: this.writesFolder && (run?.input.quarantined ?? 0) > 0 ? QUARANTINE_FILE : null,
      warnings: (run?.warnings ?? []).map((w) => ({
        code: field(w.code) ?? '?',
        message: field(w.message, 'block') ?? '',
      })),
      // Read as it stands, telling no warning: the run's end tells them, once, with its figures.
      cost: run ? runCostView(indexCost(run.cost.reportSoFar())) : null,
    };
  }

  /**
   * Publishes what changed since the last flush: channel fields first, then transcripts.
   * `end`: the run has ended, and what was read at its end (the transcripts' exact figures)
   * may have changed any channel's fields, so all are compared with what was sent.
   */
  flush(end = false): void {
    const runJson = JSON.stringify(this.runView());
    if (runJson !== this.sentRun) {
      this.sentRun = runJson;
      this.feed.publish('run', runJson, 'run');
    }
    const all = end || this.repriced;
    this.repriced = false;
    // Main's span is the run's: it grows with every line, whichever channel the line is on.
    const lastTime = this.run?.tree.lastTime ?? null;
    if (lastTime !== this.sentLastTime && this.channels.has(null)) this.touched.add(null);
    this.sentLastTime = lastTime;
    const touched = all ? this.order : this.order.filter((id) => this.touched.has(id));
    for (const id of touched) {
      const t = this.channels.get(id)!;
      const cost = this.run ? this.run.cost.channelCost(id) : null;
      // A channel no line touched changes only by its figures (and, at the end, a running one's
      // span, which ends with the run's latest line): the same ones, nothing to make.
      const spanMoves = end && t.source.status === 'running';
      if (all && !spanMoves && !this.touched.has(id) && sameFigures(cost, t.sentCost)) continue;
      t.sentCost = cost;
      const fields = {
        spawned: t.spawned,
        prompt: t.prompt,
        log: null,
        cut: t.budget.cut(),
        ...this.channelUsd(t.source, cost),
        // As index.json's: main's span is the run's, a running agent's ends with the run's latest line.
        ...(this.run ? { times: channelTimes(this.run.tree, t.source) } : {}),
      };
      const json = JSON.stringify(channelUpdate(t.source, fields, this.limits.summaryChars));
      if (json === t.sentFields) continue;
      t.sentFields = json;
      this.feed.publish('channel', json, id === null ? 'main' : `agent:${id}`);
    }
    for (const id of touched) {
      if (all && !this.touched.has(id)) continue;
      const t = this.channels.get(id)!;
      const b = t.budget;
      if (b.entries.length === t.sentEntries && b.ticks.length === t.sentTicks) continue;
      const entries = b.entries.slice(t.sentEntries);
      const ticks = b.ticks.slice(t.sentTicks);
      t.sentEntries = b.entries.length;
      t.sentTicks = b.ticks.length;
      this.feed.publish(
        'entries',
        JSON.stringify({ id: id === null ? null : field(id), entries, ticks }),
      );
    }
    this.touched.clear();
  }

  /** The page a browser first loads: the data without channels; the event stream brings them. */
  skeleton(): ReportData {
    return {
      format: REPORT_FORMAT,
      live: true,
      run: this.runView(),
      channels: [],
      page: {
        bytes: 0,
        limitBytes: this.limits.maxPageBytes,
        channelChars: this.limits.channelChars,
        cutChannels: 0,
      },
    };
  }
}
