/** The live projection of one run: routed records in, handles and readers out. */
import { EventEmitter, once } from 'node:events';
import { SubteeError, UsageError } from '../../errors.js';
import { withDefaults } from '../../defaults.js';
import {
  isObject,
  lineTypeOf,
  nonEmpty,
  usageNumbers,
  type JsonObject,
  type Usage,
} from '../../model/message.js';
import type { LineRecord, RecordBatch, SpooledRecord } from '../../model/record.js';
import type { SinkRun } from '../../model/session.js';
import { lineValue, viewOf } from '../../model/line-view.js';
import type { ChannelEvent, ReadonlyChannel } from '../../model/tree.js';
import { roundUsd, type CostBasis, type TokensBasis, type UsageEvent } from '../../model/cost.js';
import { endFigures, type EndFigures } from '../../model/run-model.js';
import { usdSumFigure } from '../cost.js';
import { escapeOneLine } from '../escape.js';
import { deepFreeze, Feed } from '../feed.js';
import { EventLog, NO_CHANGES, type EventEntry, type LinePlace } from './event-log.js';
import { PackedLines } from './packed-lines.js';
import { withLineCut, type LineCut } from '../message-stream.js';
import { HandleList, SubagentHandleImpl, totalsOf, type HandleHost } from './handles.js';
import { ChannelPaths, MAIN_PATH, type ChannelPath } from './paths.js';
import { SubtreeSums, type ChannelFigures, type SubtreeSum } from './subtree.js';
import { ChannelFileCursors } from './replay.js';
import { LineRuns, type LineWalk } from './line-runs.js';
import {
  PROJECTION_DEFAULTS,
  PROJECTION_OPTION_LEAST,
  ProjectionError,
  type CostFigures,
  type ProjectionOptions,
  type ReplayStore,
  type RunCost,
  type RunEvent,
  type RunOutput,
  type SubagentHandle,
  type SubagentOutput,
} from './types.js';

/**
 * One open reader of a channel. Lines are handed to `take` eagerly, as they are routed, not
 * when the consumer pulls: a tool call's result must settle its promise even while the
 * consumer is awaiting that very promise. The consumer's side is `feed`.
 */
interface ChannelReader {
  /** What the reader reads, for a warning: `messages of main`… */
  name: string;
  feed: Feed<unknown>;
  /**
   * `usage`: what the cost ledger counted for the line as it was routed (null: nothing);
   * undefined for a line replayed, whose reader counts it again by the same rule.
   */
  take(value: JsonObject, usage?: UsageEvent | null): void;
  end(): void;
  /** Lines routed while the reader was still replaying the channel's earlier lines. */
  held: Array<[JsonObject, UsageEvent | null]> | null;
  endPending: boolean;
}

/** What the projection keeps per channel: a line count, open readers, and the memory buffer. */
interface ChannelLog {
  count: number;
  readers: Set<ChannelReader>;
  /** Which lines its `.jsonl` holds as routed (with files), and which only `memory` holds. */
  runs: LineRuns;
  /**
   * The lines its file does not hold as routed (every line without files), packed; null before
   * the first, or once given up (`givenUp`).
   */
  memory: PackedLines | null;
  /**
   * Of the lines `memory` holds, by their place there, those too long to hold: `memory` has
   * what was routed of each (see SpooledRecord), this says how long it is and where it is whole.
   */
  cuts: Map<number, LineCut> | null;
  /** The bytes `memory` and `cuts` hold, as they count them (chunks and column whole). */
  bytes: number;
  /** `memory` was given up, past the run's buffer limit. */
  givenUp: boolean;
  ended: boolean;
}

/** What a line too long to hold costs its channel's buffer beside its routed value (its `cuts` entry). */
const CUT_BYTES = 200;

/** Where the projection keeps a routed line: in its channel's memory buffer, its `.jsonl`, or nowhere. */
type LineKept = LinePlace | 'file' | null;

interface EventReader {
  name: 'events';
  feed: Feed<RunEvent>;
  /** Events routed while the reader was still replaying earlier ones. */
  held: RunEvent[] | null;
  endPending: boolean;
}

const finiteNumber = (value: unknown): number | null =>
  typeof value === 'number' && Number.isFinite(value) ? value : null;

const quarantineEvent = (lineNo: number): RunEvent =>
  Object.freeze({ kind: 'quarantine', lineNo, path: MAIN_PATH, changes: Object.freeze([]) });

/**
 * A line's event, frozen. Its `path` is the channel's shared path, laid out as ids when read:
 * an event costs the same however deep its channel is.
 */
function lineEvent(
  lineNo: number,
  channel: string | null,
  path: ChannelPath | null,
  line: JsonObject,
  changes: readonly ChannelEvent[],
): RunEvent {
  return Object.freeze({
    kind: 'line',
    lineNo,
    channel,
    get path() {
      return path?.ids() ?? MAIN_PATH;
    },
    line,
    changes,
  });
}

/**
 * The live projection of one run: handles for every subagent, and readers over each
 * channel's lines. Fed record batches by the projection sink at the end of the chain; holds
 * nothing per line unless a reader is open, or (without files) within `maxBufferedBytes`.
 */
export class Projection implements HandleHost {
  /**
   * Where a late reader replays a channel's lines from (the files sink's `.jsonl` files), as
   * the chain built it; null: from memory. Given once, by the chain's projection sink as it is
   * made (see bind).
   */
  get store(): ReplayStore | null {
    return this.#store;
  }
  #store: ReplayStore | null = null;
  #bound = false;
  /** Every subagent at any depth, as first seen. */
  readonly subagentList = new HandleList((handle) => this.fresh.add(handle.id));
  private readonly handles = new Map<string, SubagentHandleImpl>();
  /** Every channel's path, made once and shared (see ChannelPaths). */
  readonly paths: ChannelPaths;
  /** Subtree figures as subagents end, sums of ended subtrees kept (see SubtreeSums). */
  readonly subtrees: SubtreeSums;
  private readonly children = new Map<string | null, HandleList>();
  /**
   * Subagents given to an open loop (and those under them) since the input last waited a
   * turn for such loops to take them: their lines are held whatever the buffer limit.
   */
  private readonly fresh = new Set<string>();
  private readonly logs = new Map<string | null, ChannelLog>();
  /** Each subagent's cost figures as its first status event froze them. */
  private readonly ends = new Map<string, EndFigures>();
  /** What a late `events` loop replays; null once the memory buffer was given up. */
  private eventLog: EventLog | null = new EventLog();
  private readonly eventReaders = new Set<EventReader>();
  private resultLine: JsonObject | null = null;
  /** Every result line's turns, time and usage added up. */
  private readonly resultTotals = {
    lines: 0,
    turns: null as number | null,
    durationMs: null as number | null,
    usage: null as Record<string, number> | null,
  };
  private resolveOutput!: (output: RunOutput) => void;
  /** How the run ended; settles when it does. */
  readonly output: Promise<RunOutput> = new Promise((resolve) => (this.resolveOutput = resolve));
  /** Every open channel reader, for the backpressure check. */
  private readonly readers = new Set<ChannelReader>();
  /** The channel readers handed lines since `behind` last found them not behind. */
  private readonly maybeBehind = new Set<ChannelReader>();
  private readonly opts: Required<ProjectionOptions>;
  /** Bytes the memory buffers hold: every channel's, and the event log's own. */
  private bufferedBytes = 0;
  private eventLogBytes = 0;
  /** Emits `drained` when no reader is behind any more, or the run ends: the input goes on. */
  private readonly drains = new EventEmitter();
  private stallTimer: NodeJS.Timeout | null = null;
  finished = false;

  constructor(
    readonly session: SinkRun,
    options: ProjectionOptions = {},
  ) {
    this.opts = withDefaults(PROJECTION_DEFAULTS, options);
    this.paths = new ChannelPaths(session.tree);
    this.subtrees = new SubtreeSums({
      tree: session.tree,
      figuresOf: (ch, atEnd) => this.figuresOf(ch, atEnd),
      settled: (id) => this.ends.has(id),
    });
    for (const [name, least] of PROJECTION_OPTION_LEAST) {
      const value = this.opts[name];
      // A negative high-water mark never let a reader's queue count as drained: the run hung.
      if (!Number.isSafeInteger(value) || value < least) {
        throw new UsageError(
          'ERR_OPEN_OPTIONS',
          `open(): ${name} must be an integer of at least ${least}, ` +
            `not ${typeof value === 'number' ? String(value) : `a ${typeof value}`}`,
        );
      }
    }
  }

  /**
   * The chain's projection sink, as it is made, binds the projection to the chain's store
   * (null: none, replay from memory); once: a second sink feeding the same projection is
   * refused.
   */
  bind(store: ReplayStore | null): void {
    if (this.#bound)
      throw new UsageError('ERR_CONFIG', 'a projection is fed by one projection sink, and it has one');
    this.#bound = true;
    this.#store = store;
  }

  /** Takes one batch of routed records. */
  accept(batch: RecordBatch): void {
    // The run model moved on since the last batch: sums over running subagents are stale.
    this.subtrees.refresh();
    for (const rec of batch) {
      if (rec.kind === 'quarantine' || (rec.kind === 'spooled' && rec.value === null)) {
        if (rec.kind === 'spooled') this.recordQuarantine(rec.lineNo);
        else if (rec.final) for (let k = 0; k < (rec.lines ?? 1); k++) this.recordQuarantine(rec.lineNo + k);
        continue;
      }
      const id = rec.channel?.id ?? null;
      // The line changed its channel's figures: a subtree sum kept over it is no longer good.
      this.subtrees.changed(id);
      for (const ev of rec.events ?? []) this.change(ev);
      const held = this.append(id, rec);
      this.recordLine(id, rec, held);
      // A run may have several result lines (one per turn): the last one tells how it ended.
      // The view, not `value`: reading `value` would parse every line.
      const line = rec.kind === 'line' ? viewOf(rec) : rec.value;
      if (line && lineTypeOf(line) === 'result') this.takeResult(rec.value!);
    }
  }

  /**
   * True while an open reader is too far behind, or a loop reading subagents was given one
   * this batch: the sink then waits for `drained()`.
   */
  get pressured(): boolean {
    if (this.finished) return false;
    return this.fresh.size > 0 || this.behind().next().done === false;
  }

  /**
   * The open readers the input waits for. Of the channel readers, only those handed lines
   * since they were last found not behind are looked at (`maybeBehind`): the question is asked
   * each time a consumer takes a value while the input waits, and looking at every reader of
   * 2,000 subagents each time took 7% of the CPU profile of a run that reads every message.
   */
  private *behind(): Generator<ChannelReader | EventReader> {
    // After the end (an abort drains what was read), nobody is waited for.
    if (this.finished) return;
    const limit = this.opts.readerHighWaterLines;
    const over = (reader: ChannelReader | EventReader) =>
      reader.feed.backlog + (reader.held?.length ?? 0) > limit;
    for (const reader of this.maybeBehind) {
      if (this.readers.has(reader) && over(reader)) yield reader;
      else this.maybeBehind.delete(reader);
    }
    for (const reader of this.eventReaders) if (over(reader)) yield reader;
  }

  drained(): Promise<void> {
    if (!this.finished && this.fresh.size > 0) {
      // A loop on `subagents` was given a subagent: one turn of the event loop lets a loop
      // that waits take it and open its readers before another line is routed, so they start
      // from the subagent's first line without a replay (its lines so far are held, `shed`).
      return new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        this.fresh.clear();
        return this.drained();
      });
    }
    if (!this.pressured) return Promise.resolve();
    this.stallTimer ??= setTimeout(() => this.warnStalled(), this.opts.readerStallMs);
    return once(this.drains, 'drained').then(() => {});
  }

  private warnStalled(): void {
    const names = [...new Set([...this.behind()].map((reader) => reader.name))];
    if (names.length === 0) return;
    const message =
      `the input has waited ${this.opts.readerStallMs} ms for ${names.join(', ')}: a loop that awaits ` +
      "something later in the run (a subagent's output, done) while it holds this reader waits for " +
      'ever; read such things in separate tasks, or with interleave()';
    // Also a process warning: a program that deadlocks this way may print nothing else. Node
    // prints it on stderr as it is, so the channel ids in it (the stream's) are escaped.
    if (this.session.warn('READER_STALLED', message)) {
      process.emitWarning(escapeOneLine(message), { code: 'READER_STALLED' });
    }
  }

  /** The input ended, was interrupted, or the chain failed: every reader ends. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.fresh.clear();
    this.subtrees.refresh();
    for (const handle of this.handles.values()) handle.ended();
    for (const id of this.logs.keys()) this.endLog(id);
    for (const list of this.children.values()) list.end();
    this.subagentList.end();
    for (const reader of this.eventReaders) {
      if (reader.held) reader.endPending = true;
      else reader.feed.end();
    }
    this.resolveOutput(this.runOutput());
    this.releaseDrain();
  }

  /** A result line: the last one tells how the run ended; the turns, time and usage add up. */
  private takeResult(line: JsonObject): void {
    this.resultLine = line;
    const totals = this.resultTotals;
    totals.lines++;
    const turns = finiteNumber(line.num_turns);
    if (turns !== null) totals.turns = (totals.turns ?? 0) + turns;
    const duration = finiteNumber(line.duration_ms);
    if (duration !== null) totals.durationMs = (totals.durationMs ?? 0) + duration;
    if (isObject(line.usage)) {
      const sum = (totals.usage ??= {});
      for (const [key, n] of Object.entries(usageNumbers(line.usage))) sum[key] = (sum[key] ?? 0) + n;
    }
  }

  private runOutput(): RunOutput {
    const line = this.resultLine;
    const number = finiteNumber;
    const totals = this.resultTotals;
    const failed = line?.is_error === true;
    const errors = Array.isArray(line?.errors) ? line.errors.filter((e) => typeof e === 'string') : [];
    const result = nonEmpty(line?.result);
    return deepFreeze({
      status: line === null ? 'interrupted' : failed ? 'failed' : 'completed',
      result,
      // The errors the line lists say why; a failed line without them says it in `result`.
      error: failed ? (errors.join('\n') || result || nonEmpty(line?.subtype) || 'failed') : null,
      costUsd: number(line?.total_cost_usd),
      turns: totals.turns,
      durationMs: totals.durationMs,
      usage: totals.usage as Usage | null,
      results: totals.lines,
      lastResult: line && {
        costUsd: number(line.total_cost_usd),
        turns: number(line.num_turns),
        durationMs: number(line.duration_ms),
        usage: isObject(line.usage) ? (usageNumbers(line.usage) as Usage) : null,
      },
      subtree: this.runTotals(),
      cost: this.runCost(),
    });
  }

  private runCost(): RunCost {
    const report = this.session.cost.report();
    return {
      usd: report.usd,
      basis: report.basis,
      outputTokens: report.output_tokens,
      channelsUsd: report.channels_usd,
      unattributedUsd: report.unattributed_usd,
      resultUsd: report.result_usd,
      pricesDate: report.prices_date,
      models: report.models,
    };
  }

  handle(id: string): SubagentHandle | undefined {
    return this.handles.get(id);
  }

  childrenOf(id: string | null): AsyncIterable<SubagentHandle> {
    return this.childList(id).reader();
  }

  /** Every record from the run's first, replayed from memory, then live. */
  events(): AsyncIterable<RunEvent> {
    const feed: Feed<RunEvent> = new Feed(
      () => this.checkDrain(),
      () => {
        this.eventReaders.delete(reader);
        this.checkDrain();
      },
    );
    const log = this.eventLog;
    const reader: EventReader = {
      name: 'events',
      feed,
      held: log && log.length > 0 ? [] : null,
      endPending: false,
    };
    if (!log) {
      feed.fail(this.bufferGivenUpError('events'));
      return feed;
    }
    this.eventReaders.add(reader);
    if (reader.held) void this.replayEvents(reader, log, log.length);
    else if (this.finished) feed.end();
    return feed;
  }

  private async replayEvents(reader: EventReader, log: EventLog, count: number): Promise<void> {
    const limit = this.opts.readerHighWaterLines;
    const store = this.store;
    const files = store ? new ChannelFileCursors(store, (id) => this.log(id).runs.fileLines) : null;
    // Each channel's lines in order: where its file holds each.
    const walks = new Map<string | null, LineWalk>();
    try {
      for (let at = 0; at < count; at++) {
        if (reader.feed.closed) return;
        const entry = log.entry(at);
        let line: JsonObject | null = null;
        if (entry.channel !== undefined) {
          let walk = walks.get(entry.channel);
          if (!walk) walks.set(entry.channel, (walk = this.log(entry.channel).runs.walk()));
          const inFile = walk.next();
          if (!entry.raw && !entry.value) {
            if (inFile === null) {
              throw new ProjectionError('ERR_PROJECTION_REPLAY', `line ${entry.lineNo} is held nowhere`);
            }
            line = await files!.next(entry.channel, inFile);
          }
        }
        reader.feed.push(this.eventOf(entry, line));
        await reader.feed.room(limit);
      }
    } catch (err) {
      this.eventReaders.delete(reader);
      reader.feed.fail(
        err instanceof SubteeError ? err : new ProjectionError('ERR_PROJECTION_REPLAY', String(err)),
      );
      return;
    } finally {
      await files?.close();
    }
    const held = reader.held ?? [];
    reader.held = null;
    for (const event of held) reader.feed.push(event);
    if (reader.endPending || this.finished) reader.feed.end();
    this.checkDrain();
  }

  /** The event of an entry; `read` is its line as read back from its channel's file. */
  private eventOf(entry: EventEntry, read: JsonObject | null): RunEvent {
    if (entry.channel === undefined) return quarantineEvent(entry.lineNo);
    const line = entry.raw
      ? lineValue(entry.raw)
      : (entry.value ?? read ?? {});
    return lineEvent(
      entry.lineNo,
      entry.channel,
      this.paths.of(entry.channel),
      deepFreeze(line),
      entry.changes,
    );
  }

  private recordQuarantine(lineNo: number): void {
    if (this.eventLog) {
      const entry = { lineNo, channel: undefined, changes: NO_CHANGES, value: null };
      this.countBuffered(this.eventLog.push(entry, null), null);
    }
    if (this.eventReaders.size > 0) this.deliverEvent(quarantineEvent(lineNo));
  }

  private recordLine(id: string | null, rec: LineRecord | SpooledRecord, kept: LineKept): void {
    if (this.eventLog) {
      // A line its channel's file holds as routed is read back from there; one the channel's
      // memory buffer holds is shared, not counted twice; one whose channel gave its buffer up
      // is kept by the log.
      let place: LinePlace | null = null;
      let added = 0;
      if (rec.kind === 'line' && kept !== 'file') {
        const pack = this.eventLog.linesOf(id, kept?.pack ?? null);
        if (kept) place = kept;
        else {
          place = { pack, at: pack.length };
          added = pack.push(this.lineBytes(rec));
        }
      }
      const value = rec.kind === 'spooled' && kept !== 'file' ? deepFreeze(rec.value) : null;
      const entry = { lineNo: rec.lineNo, channel: id, changes: rec.events ?? NO_CHANGES, value };
      this.countBuffered(added + this.eventLog.push(entry, place), null);
    }
    if (this.eventReaders.size === 0) return;
    this.deliverEvent(
      lineEvent(rec.lineNo, id, this.paths.of(id), deepFreeze(rec.value!), rec.events ?? NO_CHANGES),
    );
  }

  private deliverEvent(event: RunEvent): void {
    for (const reader of this.eventReaders) {
      if (reader.held) reader.held.push(event);
      else reader.feed.push(event);
    }
  }

  /**
   * A reader of a channel from its first line: replayed (file or memory), then live. `take`
   * turns each line into values pushed onto the returned feed; `end` runs once after the last.
   */
  openReader<T>(
    what: string,
    id: string | null,
    take: (value: JsonObject, usage: UsageEvent | null | undefined, feed: Feed<T>) => void,
    end: (feed: Feed<T>) => void,
  ): Feed<T> {
    const log = this.log(id);
    let ended = false;
    const endOnce = () => {
      if (ended) return;
      ended = true;
      end(feed);
      feed.end();
    };
    const feed: Feed<T> = new Feed(
      () => this.checkDrain(),
      () => {
        // `break` in the consumer's loop: drop the queue, settle what is pending.
        log.readers.delete(reader);
        this.readers.delete(reader);
        endOnce();
        this.checkDrain();
      },
    );
    const reader: ChannelReader = {
      name: `${what} of ${id ?? 'main'}`,
      feed: feed as Feed<unknown>,
      take: (value, usage) => take(value, usage, feed),
      end: endOnce,
      held: log.count > 0 ? [] : null,
      endPending: false,
    };
    // Registered before the replay starts, so lines routed meanwhile are held, not missed.
    log.readers.add(reader);
    this.readers.add(reader);
    if (reader.held) void this.replayInto(id, log, reader, log.count);
    else if (log.ended) reader.end();
    return feed;
  }

  private async replayInto(
    id: string | null,
    log: ChannelLog,
    reader: ChannelReader,
    count: number,
  ): Promise<void> {
    const limit = this.opts.readerHighWaterLines;
    try {
      for await (const value of this.replay(id, log, count)) {
        if (reader.feed.closed) return;
        reader.take(value);
        this.maybeBehind.add(reader);
        await reader.feed.room(limit);
      }
    } catch (err) {
      log.readers.delete(reader);
      this.readers.delete(reader);
      reader.feed.fail(
        err instanceof SubteeError ? err : new ProjectionError('ERR_PROJECTION_REPLAY', String(err)),
      );
      return;
    }
    const held = reader.held ?? [];
    reader.held = null;
    for (const [value, usage] of held) reader.take(value, usage);
    if (reader.endPending || log.ended) reader.end();
    this.checkDrain();
  }

  /** Ids from main down to the channel, frozen (empty for main). */
  pathOf(id: string | null): readonly string[] {
    return this.paths.ids(id);
  }

  /** Dollars with how they were found: `outputTokens` the ledger's basis for the channels counted. */
  costOf(usd: number | null, outputTokens: TokensBasis, basis: CostBasis): CostFigures {
    return Object.freeze({ usd, basis, outputTokens });
  }

  /**
   * A channel's cost figures: with `atEnd`, once it ended, as the line it ended on left them
   * (its status event froze them, so an outcome is the same however fast the input is read,
   * whatever later lines the run model took before this batch reached the projection); else
   * the ledger's now. The channel is the tree's (a subagent has no line after its end; a
   * Copilot CLI subagent's one stated total comes with its end).
   */
  figuresOf(ch: ReadonlyChannel, atEnd: boolean): ChannelFigures {
    const end = atEnd && ch.id !== null ? this.ends.get(ch.id) : undefined;
    if (end) return { channel: ch, cost: end.cost, basis: end.basis };
    const basis = this.session.cost.hasResult ? 'result' : 'table';
    return { channel: ch, cost: this.session.cost.channelCost(ch.id), basis };
  }

  /**
   * A channel and every channel under it, rolled up, each as it ended (see `figuresOf`; one
   * still running as it is now).
   */
  totals(ch: ReadonlyChannel): SubagentOutput['subtree'] {
    return this.totalsFrom(this.subtrees.atEnd(ch), this.figuresOf(ch, true).basis);
  }

  /** Every channel of the run, orphans and what they spawned included, as it is now. */
  private runTotals(): SubagentOutput['subtree'] {
    return this.totalsFrom(this.subtrees.everyChannel(), this.figuresOf(this.session.tree.main, false).basis);
  }

  private totalsFrom(sum: SubtreeSum, basis: CostBasis): SubagentOutput['subtree'] {
    // Nothing of known usage in it: its dollars unknown, as the run's are then.
    const cost = this.costOf(roundUsd(usdSumFigure(sum.usd)), sum.outputTokens ?? 'unknown', basis);
    const span = { startedAt: sum.startedAt, endedAt: sum.endedAt };
    return Object.freeze({
      ...totalsOf(sum.usage, sum.firstSeen, sum.lastSeen, cost, span),
      // The subagents under it: itself not counted (a leaf has none).
      subagents: sum.channels - 1,
      unknown: sum.usd.unknown,
    });
  }

  private change(ev: ChannelEvent): void {
    const id = ev.channel.id;
    if (id === null) return;
    // A subtree sum kept over the channel (a status) or its parent (a spawn under it) goes.
    this.subtrees.changed(ev.type === 'status' ? id : ev.channel.orphan ? null : ev.channel.parent);
    if (ev.type === 'open') {
      const channel = this.session.tree.get(id)!;
      const handle = new SubagentHandleImpl(this, channel);
      this.handles.set(id, handle);
      this.subagentList.add(handle);
      // Each handle is in exactly one `subagents` list, so a recursive walk meets it once: a
      // subagent seen before its spawn (an orphan) is listed at the top level, and stays there.
      const parent = ev.channel.orphan ? null : ev.channel.parent;
      this.childList(parent).add(handle);
      // The loop taking its parent may open the parent's `subagents` next: hold this one too.
      if (parent !== null && this.fresh.has(parent)) this.fresh.add(id);
    } else if (ev.type === 'status' && ev.channel.status !== 'running') {
      const figures = endFigures(ev);
      if (figures && !this.ends.has(id)) this.ends.set(id, figures);
      this.handles.get(id)?.ended();
      this.endLog(id);
      this.children.get(id)?.end();
    }
  }

  /** Adds the line to its channel; returns where the projection keeps it (see LineKept). */
  private append(id: string | null, rec: LineRecord | SpooledRecord): LineKept {
    const log = this.log(id);
    let kept: LineKept = null;
    // A derived line has no line of its own in the file; a mapped one has its event's there.
    const own = !(rec.kind === 'line' && rec.derived);
    const inFile = this.store !== null && own && !rec.mapped;
    log.runs.add(inFile, own);
    if (inFile) {
      kept = 'file';
    } else if (!log.givenUp) {
      // Copied into the buffer's chunks: `raw` is a view into the input chunk and would keep
      // the whole chunk alive. A line too long to hold is held as what was routed of it.
      const pack = (log.memory ??= new PackedLines());
      kept = { pack, at: pack.length };
      let bytes = pack.push(this.lineBytes(rec));
      if (rec.kind === 'spooled') {
        (log.cuts ??= new Map()).set(kept.at, this.cutOf(id, rec));
        bytes += CUT_BYTES;
      }
      this.countBuffered(bytes, log);
    }
    log.count++;
    if (log.readers.size > 0) {
      // Read only for a reader: a line's value may be parsed on first read. A line too long to
      // hold says so, and where it is whole.
      const value = rec.kind === 'spooled' ? withLineCut(rec.value!, this.cutOf(id, rec)) : rec.value!;
      const usage = rec.kind === 'line' ? (rec.usage ?? null) : null;
      for (const reader of log.readers) {
        if (reader.held) reader.held.push([value, usage]);
        else reader.take(value, usage);
        this.maybeBehind.add(reader);
      }
    }
    return kept;
  }

  /**
   * A line as a reader replays it: its bytes, or the JSON of what was routed for a mapped line
   * or a line too long to hold.
   */
  private lineBytes(rec: LineRecord | SpooledRecord): Buffer {
    return rec.kind === 'line' && !rec.mapped ? rec.raw : Buffer.from(JSON.stringify(rec.value));
  }

  /** How long a line too long to hold is, and where it is whole (its channel's `.jsonl`). */
  private cutOf(id: string | null, rec: SpooledRecord): LineCut {
    return { bytes: rec.spool.bytes, file: this.store?.jsonlPath?.(id) ?? null };
  }

  /** Counts bytes a channel's buffer (or, for null, the event log) now holds; sheds past the limit. */
  private countBuffered(bytes: number, log: ChannelLog | null): void {
    if (log) log.bytes += bytes;
    else this.eventLogBytes += bytes;
    this.bufferedBytes += bytes;
    if (this.bufferedBytes > this.opts.maxBufferedBytes) this.shed();
  }

  /**
   * Past `maxBufferedBytes`, buffers are given up channel by channel, not for the whole run:
   * first the event log (it shares the lines of every channel), then channels, the biggest
   * first, until half the limit is held. A subagent just given to an open loop keeps its
   * lines (its readers may open at once, and the input waits a turn for them: one batch at
   * most); one a loop has not taken after that goes last.
   */
  private shed(): void {
    if (this.eventLog) {
      this.bufferedBytes -= this.eventLogBytes;
      this.eventLogBytes = 0;
      this.eventLog = null;
    }
    const target = Math.floor(this.opts.maxBufferedBytes / 2);
    if (this.bufferedBytes <= target) return;
    // Queued handles, and the subagents under them (their loops open once those are taken).
    const queued = new Set<string | null>();
    const stack: string[] = [];
    for (const list of [this.subagentList, ...this.children.values()]) {
      for (const handle of list.untaken()) stack.push(handle.id);
    }
    while (stack.length > 0) {
      const id = stack.pop()!;
      if (queued.has(id)) continue;
      queued.add(id);
      for (const child of this.children.get(id)?.items ?? []) stack.push(child.id);
    }
    const candidates = [...this.logs]
      .filter(([id, log]) => log.memory && log.bytes > 0 && !(id !== null && this.fresh.has(id)))
      .sort(
        ([a, logA], [b, logB]) => Number(queued.has(a)) - Number(queued.has(b)) || logB.bytes - logA.bytes,
      );
    for (const [, log] of candidates) {
      if (this.bufferedBytes <= target) break;
      this.giveUp(log);
    }
  }

  /** Gives up a channel's buffer, and what it would have held later. */
  private giveUp(log: ChannelLog): void {
    if (log.givenUp) return;
    // Lines the event log still holds stay counted, as the event log's.
    if (this.eventLog) this.eventLogBytes += log.bytes;
    else this.bufferedBytes -= log.bytes;
    log.memory = null;
    log.cuts = null;
    log.bytes = 0;
    log.givenUp = true;
  }

  private log(id: string | null): ChannelLog {
    let log = this.logs.get(id);
    if (!log) {
      // A channel first asked for after the run finished (a subagent with no line of its own)
      // has ended already: its readers end at once.
      log = {
        count: 0,
        readers: new Set(),
        runs: new LineRuns(),
        memory: null,
        cuts: null,
        bytes: 0,
        givenUp: false,
        ended: this.finished,
      };
      this.logs.set(id, log);
    }
    return log;
  }

  private endLog(id: string | null): void {
    const log = this.log(id);
    if (log.ended) return;
    log.ended = true;
    for (const reader of log.readers) {
      if (reader.held) reader.endPending = true;
      else reader.end();
    }
  }

  private bufferGivenUpError(what: string): ProjectionError {
    return new ProjectionError(
      'ERR_PROJECTION_BUFFER',
      `cannot replay ${what} from the start: the run buffered more than maxBufferedBytes ` +
        `(${this.opts.maxBufferedBytes} bytes)` +
        (what === 'events' ? '; open the events loop earlier, or raise maxBufferedBytes' : ''),
    );
  }

  /** A channel's first `count` lines: those its file holds as routed from there, the rest from memory. */
  private async *replay(id: string | null, log: ChannelLog, count: number): AsyncGenerator<JsonObject> {
    // The lines so far, even should the buffer be given up meanwhile.
    const lines = log.memory;
    const cuts = log.cuts;
    if (log.runs.needsMemory(count) && !lines) {
      const files = this.store
        ? "its file does not hold its lines as they were routed (mapped from another producer's events)"
        : 'no files were written to replay from';
      throw new ProjectionError(
        'ERR_PROJECTION_BUFFER',
        `cannot replay channel ${id ?? 'main'} from its start: the run buffered more than ` +
          `maxBufferedBytes (${this.opts.maxBufferedBytes} bytes), and ${files}; open readers ` +
          `earlier, ${this.store ? '' : 'write files (out), '}or raise maxBufferedBytes`,
      );
    }
    for (const span of log.runs.spans(count)) {
      if (span.source === 'file') yield* this.store!.read(id, span.from, span.to);
      else {
        for (let at = span.from; at < span.to; at++) {
          const cut = cuts?.get(at);
          yield cut ? withLineCut(lineValue(lines!.line(at)), cut) : lineValue(lines!.line(at));
        }
      }
    }
  }

  private childList(id: string | null): HandleList {
    let list = this.children.get(id);
    if (!list) {
      list = new HandleList((handle) => this.fresh.add(handle.id));
      if (this.finished) list.end();
      this.children.set(id, list);
    }
    return list;
  }

  private checkDrain(): void {
    if (this.drains.listenerCount('drained') > 0 && !this.pressured) this.releaseDrain();
  }

  private releaseDrain(): void {
    clearTimeout(this.stallTimer ?? undefined);
    this.stallTimer = null;
    this.drains.emit('drained');
  }
}

