import { createReadStream } from 'node:fs';
import { SubteeError, UsageError } from '../errors.js';
import { withDefaults } from '../defaults.js';
import {
  asBlock,
  channelIdOf,
  isObject,
  lineTypeOf,
  nonEmpty,
  rawBlocks,
  resultText,
  usageNumbers,
  type JsonObject,
  type Usage,
} from '../model/message.js';
import { DISPLAY_DEFAULTS, type DisplayPolicy } from '../model/display.js';
import { MessageAssembler, type Message } from './message-stream.js';
import type { LineRecord, RecordBatch, SpooledRecord } from '../model/record.js';
import type { ChannelFiles, Session } from '../model/session.js';
import { LineSplitter } from '../model/lines.js';
import { lineValue, viewOf } from '../model/line-view.js';
import { StreamScanner } from '../model/stream-scan.js';
import {
  snapshotOf,
  type Channel,
  type ChannelEvent,
  type ChannelSnapshot,
  type ChannelStatus,
} from '../model/tree.js';
import { deepFreeze, Feed } from './feed.js';
import { channelTokens, elapsedMs } from './walk.js';
import { roundUsd, worse, type ModelCost, type OutputTokensBasis, type TokensBasis } from '../model/cost.js';

export const PROJECTION_DEFAULTS = Object.freeze({
  /**
   * Raw line bytes kept in memory so a reader opened late can start from a channel's first
   * line (or an `events` loop from the run's first), when no files are written (with files,
   * late readers replay the `.jsonl` files instead); the run's record order counts too.
   */
  maxBufferedBytes: 64 * 1024 * 1024,
  /** Lines queued for one open reader before the input waits for it to catch up. */
  readerHighWaterLines: 1000,
  /**
   * How long the input may wait for one reader before a READER_STALLED warning names it: a
   * loop that awaits something later in the run while it holds its reader would wait for ever.
   */
  readerStallMs: 10_000,
});

/** The least each projection option may be: a reader needs room for one line. */
const PROJECTION_OPTION_LEAST: ReadonlyArray<[keyof typeof PROJECTION_DEFAULTS, number]> = [
  ['maxBufferedBytes', 0],
  ['readerHighWaterLines', 1],
  ['readerStallMs', 1],
];

export interface ProjectionOptions {
  maxBufferedBytes?: number;
  readerHighWaterLines?: number;
  readerStallMs?: number;
}

export type SubagentStatus = ChannelStatus | 'interrupted';

export type ToolCallStatus = 'finished' | 'error' | 'interrupted';

/** A tool_use paired with its tool_result on the same channel. */
export interface ToolCall {
  readonly id: string;
  /** Alias of `id` under the name Deep Agents uses. */
  readonly callId: string;
  readonly name: string;
  readonly input: unknown;
  readonly channel: string | null;
  /** Partial `input_json` deltas streamed before the call (with --include-partial-messages). */
  readonly inputDeltas: AsyncIterable<string>;
  /** The result text; null when the call failed or the input ended first. */
  readonly output: Promise<string | null>;
  readonly status: Promise<ToolCallStatus>;
  /** The error text of a failed call; null otherwise. */
  readonly error: Promise<string | null>;
}

/** What a channel or a subtree cost so far (see docs/cost.md). */
export interface CostFigures {
  /** Dollars; null when a model it used has no price. */
  readonly usd: number | null;
  /** `result`: Claude Code's own dollars (the run has ended); `table`: the dated price table. */
  readonly basis: 'result' | 'table';
  /**
   * How the output tokens behind the dollars were found, as the cost ledger names it for the
   * channels counted (the least exact of them; see docs/cost.md).
   */
  readonly outputTokens: OutputTokensBasis | TokensBasis;
}

/** What the run cost: its total beside Claude Code's, per model, and what no channel shows. */
export interface RunCost extends CostFigures {
  /** The channels' dollars added up. */
  readonly channelsUsd: number | null;
  /** What the result counts and no channel shows; null without a result line. */
  readonly unattributedUsd: number | null;
  /** Claude Code's `total_cost_usd`; null without a result line. */
  readonly resultUsd: number | null;
  /** The price table's date when it priced anything. */
  readonly pricesDate: string | null;
  readonly models: Readonly<Record<string, Readonly<ModelCost>>>;
}

export interface Totals {
  /** Dollars, when the subagent ended (or the run, for the run's output). */
  readonly cost: CostFigures;
  readonly usage: Usage;
  /** Input plus output tokens. */
  readonly tokens: number;
  readonly firstSeen: string | null;
  readonly lastSeen: string | null;
  /** From the stream's own timestamps: last line minus first line. */
  readonly elapsedMs: number | null;
}

export interface SubagentOutput extends Totals {
  readonly status: SubagentStatus;
  /** The final report: the task notification's summary or the spawn call's result. */
  readonly summary: string | null;
  /** Why a failed subagent failed (the error its end carried); null unless `failed`. */
  readonly error: string | null;
  readonly lines: number;
  /** This subagent and every subagent under it, rolled up; `subagents` counts those under it. */
  readonly subtree: Totals & { readonly subagents: number };
}

/** A routed line, with where it went. */
export interface LineEvent {
  readonly kind: 'line';
  /** 1-based input line number. */
  readonly lineNo: number;
  /** The channel (null: main). */
  readonly channel: string | null;
  /** Ids from the main conversation down to the channel (empty for main). */
  readonly path: readonly string[];
  /** The parsed line, frozen. */
  readonly line: JsonObject;
  /** Tree changes this line caused, as snapshots. */
  readonly changes: readonly ChannelEvent[];
}

/** Bytes that were not a JSON object line: they went to the quarantine. */
export interface QuarantineEvent {
  readonly kind: 'quarantine';
  readonly lineNo: number;
  /** Always empty: quarantined bytes belong to no channel. */
  readonly path: readonly string[];
  readonly changes: readonly ChannelEvent[];
}

/** Every record in arrival order; narrow on `kind`. */
export type RunEvent = LineEvent | QuarantineEvent;

/** How the run ended, from its `result` line (null fields: the line did not say, or never came). */
export interface RunOutput {
  /** `completed` or `failed` as the result line says; `interrupted` when the run ended without one. */
  readonly status: 'completed' | 'failed' | 'interrupted';
  /** The final answer (the last result line's `result`). */
  readonly result: string | null;
  /** The error text of a failed run (the last result line's `errors`, else its `result`). */
  readonly error: string | null;
  /** The whole run's dollars as Claude Code counts them (`total_cost_usd`, itself a running total). */
  readonly costUsd: number | null;
  /** The whole run's turns: every result line's `num_turns` added up (a run has one per turn). */
  readonly turns: number | null;
  /** The whole run's time in turns: every result line's `duration_ms` added up. */
  readonly durationMs: number | null;
  /** The whole run's usage as the result lines report it, each line's added up (null: none reported). */
  readonly usage: Usage | null;
  /** How many result lines the run had (one per turn: background subagents cause follow-up turns). */
  readonly results: number;
  /** The last result line's own figures (its turn only, but its running total of dollars). */
  readonly lastResult: {
    readonly costUsd: number | null;
    readonly turns: number | null;
    readonly durationMs: number | null;
    readonly usage: Usage | null;
  } | null;
  /** Every channel's usage from its lines, rolled up (each API message counted once). */
  readonly subtree: Totals & { readonly subagents: number };
  /** The run's dollars beside Claude Code's own. */
  readonly cost: RunCost;
}

export interface SubagentHandle {
  readonly id: string;
  /** The subagent type (`subagent_type`), null while unknown. */
  readonly name: string | null;
  readonly description: string | null;
  readonly depth: number | null;
  readonly background: boolean | null;
  /** The spawning tool call, in LangChain's words. */
  readonly cause: { readonly type: 'toolCall'; readonly tool_call_id: string };
  /** Ids from the main conversation down to this subagent (ancestors first, itself last). */
  readonly path: readonly string[];
  /** Live: changes as the run goes on. */
  readonly status: SubagentStatus;
  /** Each access starts a new reader from this subagent's first line. */
  readonly messages: AsyncIterable<Message>;
  readonly toolCalls: AsyncIterable<ToolCall>;
  /** Subagents this one spawned, as they are seen (see `RunProjection.subagents`). */
  readonly subagents: AsyncIterable<SubagentHandle>;
  /**
   * Settles when the subagent ends (or the run does), as Deep Agents' does: resolves for a
   * subagent that completed (or was interrupted by the run's end), rejects with a
   * `SubagentError` (`status`, `summary`, `error`, and the figures as `output`) for one that
   * failed. A rejection nobody awaits does not crash the program.
   */
  readonly output: Promise<SubagentOutput>;
  /** The same figures as `output` for every subagent, failed ones included; never rejects. */
  readonly outcome: Promise<SubagentOutput>;
  /** The channel as it is now, frozen. */
  snapshot(): ChannelSnapshot;
}

/** A reader could not start from the beginning: the memory buffer had to be given up. */
export class ProjectionError extends SubteeError {
  constructor(code: string, message: string) {
    super(code, message);
    this.name = 'ProjectionError';
  }
}

/** Why a subagent's `output` rejected: it failed. Carries what `outcome` resolves to. */
export class SubagentError extends SubteeError {
  /** The subagent's id (its spawning call's). */
  readonly id: string;
  readonly status: 'failed';
  /** Its final report (for a failed subagent, usually why it failed). */
  readonly summary: string | null;
  /** Why it failed. */
  readonly error: string;
  /** Its figures: usage, tokens, cost, time, lines, subtree. */
  readonly output: SubagentOutput;

  constructor(name: string | null, output: SubagentOutput & { readonly id: string }) {
    const error = output.error ?? 'failed';
    super('ERR_SUBAGENT_FAILED', `Subagent ${name ?? output.id} failed: ${error}`);
    this.name = 'SubagentError';
    this.id = output.id;
    this.status = 'failed';
    this.summary = output.summary;
    this.error = error;
    this.output = output;
  }
}

// Pure readers

interface PendingCall {
  settle(result: { text: string; isError: boolean } | null): void;
}

/**
 * Pairs tool_use blocks with their tool_result on one channel's lines, in order, and keeps
 * the partial input deltas that stream events carried for each call before it.
 */
export class ToolCallPairing {
  private readonly pending = new Map<string, PendingCall>();
  /** `message id:block index` → tool_use id, from content_block_start stream events. */
  private readonly streamingIds = new Map<string, string>();
  private readonly deltas = new Map<string, string[]>();

  /** The calls a line opens; results it carries settle earlier calls. */
  take(value: JsonObject): ToolCall[] {
    const calls: ToolCall[] = [];
    const kind = lineTypeOf(value);
    if (kind === 'stream_event' && isObject(value.event)) {
      this.streamEvent(value.event, nonEmpty(value.api_message_id) ?? '');
      return calls;
    }
    for (const raw of rawBlocks(value)) {
      const block = asBlock(raw);
      if (block?.type === 'tool_use' && kind === 'assistant' && !this.pending.has(block.id)) {
        calls.push(this.open(block.id, block.name, block.input, channelIdOf(value)));
      } else if (block?.type === 'tool_result') {
        const call = this.pending.get(block.tool_use_id);
        this.pending.delete(block.tool_use_id);
        call?.settle({ text: resultText(block), isError: block.is_error === true });
      }
    }
    return calls;
  }

  /** At the end of the channel: calls without a result were interrupted. */
  end(): void {
    for (const call of this.pending.values()) call.settle(null);
    this.pending.clear();
    this.deltas.clear();
    this.streamingIds.clear();
  }

  private streamEvent(event: JsonObject, messageId: string): void {
    const key = `${messageId}:${String(event.index)}`;
    if (event.type === 'message_start') {
      this.streamingIds.clear();
    } else if (event.type === 'content_block_start' && isObject(event.content_block)) {
      const id = nonEmpty(event.content_block.id);
      if (event.content_block.type === 'tool_use' && id) {
        this.streamingIds.set(key, id);
        this.deltas.set(id, []);
      }
    } else if (event.type === 'content_block_delta' && isObject(event.delta)) {
      const id = this.streamingIds.get(key);
      const partial = event.delta.partial_json;
      if (id && typeof partial === 'string') this.deltas.get(id)?.push(partial);
    }
  }

  private open(id: string, name: string, input: unknown, channel: string | null): ToolCall {
    const deltas = Object.freeze(this.deltas.get(id) ?? []);
    this.deltas.delete(id);
    let settle!: PendingCall['settle'];
    const settled = new Promise<{ text: string; isError: boolean } | null>((resolve) => (settle = resolve));
    this.pending.set(id, { settle });
    return Object.freeze({
      id,
      callId: id,
      name,
      input: deepFreeze(input),
      channel,
      inputDeltas: {
        async *[Symbol.asyncIterator]() {
          yield* deltas;
        },
      },
      output: settled.then((r) => (r && !r.isError ? r.text : null)),
      status: settled.then((r): ToolCallStatus =>
        r === null ? 'interrupted' : r.isError ? 'error' : 'finished',
      ),
      error: settled.then((r) => (r?.isError ? r.text : null)),
    });
  }
}

// Live state

/**
 * The subagents of one list (the run's top level, one subagent's children, or every
 * subagent), read from the first by any number of loops: each loop is a Feed that every
 * handle is pushed onto. `offered` hears of a handle given to at least one open loop: the
 * input then waits a turn for the loops to take it (see `Projection.drained`).
 */
class HandleList {
  readonly items: SubagentHandle[] = [];
  private readonly feeds = new Set<Feed<SubagentHandle>>();
  private ended = false;

  constructor(private readonly offered: (handle: SubagentHandle) => void) {}

  add(handle: SubagentHandle): void {
    this.items.push(handle);
    if (this.feeds.size === 0) return;
    for (const feed of this.feeds) feed.push(handle);
    this.offered(handle);
  }

  end(): void {
    this.ended = true;
    for (const feed of this.feeds) feed.end();
  }

  /** A loop from the first handle; it opens when iteration starts, so an unread list costs nothing. */
  reader(): AsyncIterable<SubagentHandle> {
    return { [Symbol.asyncIterator]: () => this.open() };
  }

  /** Handles some open loop was given and has not taken yet. */
  *untaken(): Generator<SubagentHandle> {
    for (const feed of this.feeds) yield* feed.queued();
  }

  private open(): Feed<SubagentHandle> {
    const feed: Feed<SubagentHandle> = new Feed(undefined, () => this.feeds.delete(feed));
    for (const handle of this.items) feed.push(handle);
    if (this.ended) feed.end();
    else this.feeds.add(feed);
    return feed;
  }
}

/**
 * One open reader of a channel. Lines are handed to `take` eagerly, as they are routed, not
 * when the consumer pulls: a tool call's result must settle its promise even while the
 * consumer is awaiting that very promise. The consumer's side is `feed`.
 */
interface ChannelReader {
  /** What the reader reads, for a warning: `messages of main`… */
  name: string;
  feed: Feed<unknown>;
  take(value: JsonObject): void;
  end(): void;
  /** Lines routed while the reader was still replaying the channel's earlier lines. */
  held: JsonObject[] | null;
  endPending: boolean;
}

/** What the projection keeps per channel: a line count, open readers, and the memory buffer. */
interface ChannelLog {
  count: number;
  readers: Set<ChannelReader>;
  /** Raw lines in memory mode; null once given up or when files are written. */
  memory: Buffer[] | null;
  /** The bytes `memory` holds. */
  bytes: number;
  /** Why `memory` was given up: the run's buffer limit, or a line too long to hold. */
  givenUp: 'limit' | 'long line' | null;
  ended: boolean;
}

/** A record as a late `events` loop replays it; `channel` undefined: quarantined bytes. */
interface EventEntry {
  lineNo: number;
  channel: string | null | undefined;
  changes: readonly ChannelEvent[];
  /** The line's bytes (parsed again on replay), or for a spooled line its scalar members. */
  raw: Buffer | null;
  value: JsonObject | null;
}

/** Bytes of one entry besides its line (two 4-byte columns, doubled while growing). */
const ENTRY_BYTES = 16;

const NO_CHANGES: readonly ChannelEvent[] = Object.freeze([]);

/**
 * The run's records in order, column by column: a few bytes a line, so keeping it costs
 * little beside the lines themselves (held only without files; with files they are read back).
 */
class EventLog {
  /** Per record: its line number, and its channel's slot (0: quarantined bytes). */
  private lineNos = new Uint32Array(1024);
  private slots = new Uint32Array(1024);
  private count = 0;
  private readonly slotOf = new Map<string | null, number>();
  private readonly ids: Array<string | null> = [null];
  private readonly raws: Array<Buffer | null> = [];
  private readonly changes = new Map<number, readonly ChannelEvent[]>();
  private readonly values = new Map<number, JsonObject>();

  get length(): number {
    return this.count;
  }

  push(entry: EventEntry): void {
    const at = this.count++;
    if (at === this.lineNos.length) {
      this.lineNos = grown(this.lineNos);
      this.slots = grown(this.slots);
    }
    this.lineNos[at] = entry.lineNo;
    this.slots[at] = entry.channel === undefined ? 0 : this.slot(entry.channel);
    if (entry.raw) this.raws[at] = entry.raw;
    if (entry.changes.length > 0) this.changes.set(at, entry.changes);
    if (entry.value) this.values.set(at, entry.value);
  }

  entry(at: number): EventEntry {
    return {
      lineNo: this.lineNos[at],
      channel: this.channelOf(at),
      changes: this.changes.get(at) ?? NO_CHANGES,
      raw: this.raws[at] ?? null,
      value: this.values.get(at) ?? null,
    };
  }

  channelOf(at: number): string | null | undefined {
    const slot = this.slots[at];
    return slot === 0 ? undefined : this.ids[slot];
  }

  private slot(id: string | null): number {
    let slot = this.slotOf.get(id);
    if (slot === undefined) {
      slot = this.ids.push(id) - 1;
      this.slotOf.set(id, slot);
    }
    return slot;
  }
}

function grown(array: Uint32Array<ArrayBuffer>): Uint32Array<ArrayBuffer> {
  const bigger = new Uint32Array(array.length * 2);
  bigger.set(array);
  return bigger;
}

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
  Object.freeze({ kind: 'quarantine', lineNo, path: Object.freeze([]), changes: Object.freeze([]) });

function elapsed(first: string | null, last: string | null): number | null {
  if (!first || !last) return null;
  const [from, to] = [Date.parse(first), Date.parse(last)];
  return Number.isNaN(from) || Number.isNaN(to) ? null : elapsedMs(from, to);
}

function totalsOf(
  usage: Record<string, number>,
  first: string | null,
  last: string | null,
  cost: CostFigures,
): Totals {
  return {
    cost,
    usage: Object.freeze({ ...usage }),
    tokens: channelTokens({ usage }),
    firstSeen: first,
    lastSeen: last,
    elapsedMs: elapsed(first, last),
  };
}

/**
 * The live projection of one run: handles for every subagent, and readers over each
 * channel's lines. Fed record batches by the projection sink at the end of the chain; holds
 * nothing per line unless a reader is open, or (without files) within `maxBufferedBytes`.
 */
export class Projection {
  /** The run's display policy (`--thinking`) for message blocks; the chain's projection sink sets it. */
  display: DisplayPolicy = DISPLAY_DEFAULTS;
  /** Every subagent at any depth, as first seen. */
  readonly subagentList = new HandleList((handle) => this.fresh.add(handle.id));
  private readonly handles = new Map<string, SubagentHandleImpl>();
  private readonly children = new Map<string | null, HandleList>();
  /**
   * Subagents given to an open loop (and those under them) since the input last waited a
   * turn for such loops to take them: their lines are held whatever the buffer limit.
   */
  private readonly fresh = new Set<string>();
  private readonly logs = new Map<string | null, ChannelLog>();
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
  private readonly opts: Required<ProjectionOptions>;
  /** Bytes the memory buffers hold: every channel's, and the event log's own. */
  private bufferedBytes = 0;
  private eventLogBytes = 0;
  private drainWaiters: Array<() => void> = [];
  private stallTimer: NodeJS.Timeout | null = null;
  finished = false;

  constructor(
    readonly session: Session,
    options: ProjectionOptions = {},
  ) {
    this.opts = withDefaults(PROJECTION_DEFAULTS, options);
    for (const [name, least] of PROJECTION_OPTION_LEAST) {
      const value = this.opts[name];
      // A negative high-water mark never let a reader's queue count as drained: the run hung.
      if (!Number.isSafeInteger(value) || value < least) {
        throw new UsageError(
          'ERR_OPEN_OPTIONS',
          `open(): ${name} must be an integer of at least ${least}, not ${String(value)}`,
        );
      }
    }
  }

  /** Takes one batch of routed records. */
  accept(batch: RecordBatch): void {
    for (const rec of batch) {
      if (rec.kind === 'quarantine' || (rec.kind === 'spooled' && rec.value === null)) {
        if (rec.kind === 'spooled') this.recordQuarantine(rec.lineNo);
        else if (rec.final) for (let k = 0; k < (rec.lines ?? 1); k++) this.recordQuarantine(rec.lineNo + k);
        continue;
      }
      for (const ev of rec.events ?? []) this.change(ev);
      const id = rec.channel?.id ?? null;
      const copy = this.append(id, rec);
      this.recordLine(id, rec, copy);
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

  /** The open readers the input waits for. */
  private *behind(): Generator<ChannelReader | EventReader> {
    // After the end (an abort drains what was read), nobody is waited for.
    if (this.finished) return;
    const limit = this.opts.readerHighWaterLines;
    const over = (reader: ChannelReader | EventReader) =>
      reader.feed.backlog + (reader.held?.length ?? 0) > limit;
    for (const reader of this.readers) if (over(reader)) yield reader;
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
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private warnStalled(): void {
    const names = [...new Set([...this.behind()].map((reader) => reader.name))];
    if (names.length === 0) return;
    const message =
      `the input has waited ${this.opts.readerStallMs} ms for ${names.join(', ')}: a loop that awaits ` +
      "something later in the run (a subagent's output, done) while it holds this reader waits for " +
      'ever; read such things in separate tasks, or with interleave()';
    // Also a process warning: a program that deadlocks this way may print nothing else.
    if (this.session.warn('READER_STALLED', message)) {
      process.emitWarning(message, { code: 'READER_STALLED' });
    }
  }

  /** The input ended, was interrupted, or the chain failed: every reader ends. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.fresh.clear();
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
      subtree: this.totals(this.session.tree.main),
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
    const channelFiles = this.replayFiles();
    const files = channelFiles
      ? new ChannelFileCursors(channelFiles, this.session.heldLineBytes, log, count)
      : null;
    try {
      for (let at = 0; at < count; at++) {
        if (reader.feed.closed) return;
        const entry = log.entry(at);
        const inFile = entry.channel !== undefined && !entry.raw && !entry.value;
        const line = inFile ? await files?.next(entry.channel as string | null) : null;
        reader.feed.push(this.eventOf(entry, line ?? null));
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
    return Object.freeze({
      kind: 'line',
      lineNo: entry.lineNo,
      channel: entry.channel,
      path: Object.freeze(this.pathOf(entry.channel)),
      line: deepFreeze(line),
      changes: entry.changes,
    });
  }

  private recordQuarantine(lineNo: number): void {
    if (this.eventLog) {
      this.eventLog.push({ lineNo, channel: undefined, changes: NO_CHANGES, raw: null, value: null });
      this.countBuffered(ENTRY_BYTES, null);
    }
    if (this.eventReaders.size > 0) this.deliverEvent(quarantineEvent(lineNo));
  }

  private recordLine(id: string | null, rec: LineRecord | SpooledRecord, copy: Buffer | null): void {
    if (this.eventLog) {
      // With files, a late loop reads lines back from the channel files; without, the copy the
      // channel's memory buffer holds is shared, not counted twice.
      const files = this.replayFiles() !== null;
      const raw = rec.kind === 'line' && !files ? (copy ?? this.lineBytes(rec)) : null;
      const value = rec.kind === 'spooled' && !files ? deepFreeze(rec.value) : null;
      this.eventLog.push({ lineNo: rec.lineNo, channel: id, changes: rec.events ?? NO_CHANGES, raw, value });
      this.countBuffered(ENTRY_BYTES + (raw && !copy ? raw.length : 0), null);
    }
    if (this.eventReaders.size === 0) return;
    this.deliverEvent(
      Object.freeze({
        kind: 'line',
        lineNo: rec.lineNo,
        channel: id,
        path: Object.freeze(this.pathOf(id)),
        line: deepFreeze(rec.value!),
        changes: rec.events ?? NO_CHANGES,
      }),
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
    take: (value: JsonObject, feed: Feed<T>) => void,
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
      take: (value) => take(value, feed),
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
    for (const value of held) reader.take(value);
    if (reader.endPending || log.ended) reader.end();
    this.checkDrain();
  }

  pathOf(id: string | null): string[] {
    const path: string[] = [];
    const seen = new Set<string>();
    for (let at = id; at !== null && !seen.has(at);) {
      seen.add(at);
      path.push(at);
      const ch = this.session.tree.get(at);
      if (!ch || ch.orphan) break;
      at = ch.parent;
    }
    return path.reverse();
  }

  /**
   * Dollars as the cost ledger has them now, with how they were found: `outputTokens` is the
   * ledger's own basis for the channels counted (the least exact of them).
   */
  costOf(usd: number | null, outputTokens: TokensBasis): CostFigures {
    const basis = this.session.cost.hasResult ? 'result' : 'table';
    return Object.freeze({ usd, basis, outputTokens });
  }

  totals(ch: Channel): SubagentOutput['subtree'] {
    const usage: Record<string, number> = {};
    let first: string | null = null;
    let last: string | null = null;
    let subagents = 0;
    let costUsd: number | null = 0;
    let outputTokens: TokensBasis | null = null;
    const seen = new Set<Channel>();
    const stack = [ch];
    while (stack.length > 0) {
      const at = stack.pop()!;
      if (seen.has(at)) continue;
      seen.add(at);
      subagents++;
      // As index.json's subtree_usd: channels with no usage known cost nothing here.
      const own = this.session.cost.channelCost(at.id);
      if (own && own.basis !== 'unknown') {
        costUsd = costUsd === null || own.usd === null ? null : costUsd + own.usd;
        outputTokens = outputTokens === null ? own.basis : worse(outputTokens, own.basis);
      }
      for (const key in at.usage) usage[key] = (usage[key] ?? 0) + at.usage[key];
      if (at.firstSeen && (!first || at.firstSeen < first)) first = at.firstSeen;
      if (at.lastSeen && (!last || at.lastSeen > last)) last = at.lastSeen;
      for (const childId of at.children) {
        const child = this.session.tree.get(childId);
        if (child) stack.push(child);
      }
    }
    // The subagents under it: itself not counted (a leaf has none).
    return Object.freeze({
      ...totalsOf(usage, first, last, this.costOf(roundUsd(costUsd), outputTokens ?? 'exact')),
      subagents: subagents - 1,
    });
  }

  private change(ev: ChannelEvent): void {
    const id = ev.channel.id;
    if (id === null) return;
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
      this.handles.get(id)?.ended();
      this.endLog(id);
      this.children.get(id)?.end();
    }
  }

  /** Adds the line to its channel; returns the copy kept in the memory buffer, if one was. */
  private append(id: string | null, rec: LineRecord | SpooledRecord): Buffer | null {
    const log = this.log(id);
    log.count++;
    // A reader opened before the chain started made its log before the files were known.
    if (log.memory && this.replayFiles()) this.giveUp(log, null);
    let copy: Buffer | null = null;
    if (log.memory && rec.kind === 'spooled') {
      // A line too long to hold cannot be replayed from memory: this channel's buffer goes.
      this.giveUp(log, 'long line');
    } else if (log.memory && rec.kind === 'line') {
      // A copy: `raw` is a view into the input chunk and would keep the whole chunk alive.
      copy = this.lineBytes(rec);
      log.memory.push(copy);
      this.countBuffered(copy.length, log);
    }
    if (log.readers.size > 0) {
      // Read only for a reader: a line's value may be parsed on first read.
      const value = rec.value!;
      for (const reader of log.readers) {
        if (reader.held) reader.held.push(value);
        else reader.take(value);
      }
    }
    return log.memory ? copy : null;
  }

  /**
   * The files a late reader replays from: none when the lines were mapped from another
   * producer's events, because the files keep those events, not the lines routed.
   */
  private replayFiles(): ChannelFiles | null {
    return this.session.linesMapped ? null : this.session.channelFiles;
  }

  /** A line as a reader replays it: its bytes, or for a mapped line the JSON of what was routed. */
  private lineBytes(rec: LineRecord): Buffer {
    return this.session.linesMapped ? Buffer.from(JSON.stringify(rec.value)) : Buffer.from(rec.raw);
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
      .sort(([a, logA], [b, logB]) => Number(queued.has(a)) - Number(queued.has(b)) || logB.bytes - logA.bytes);
    for (const [, log] of candidates) {
      if (this.bufferedBytes <= target) break;
      this.giveUp(log, 'limit');
    }
  }

  /** Gives up a channel's buffer (`why` null: its files replay it instead). */
  private giveUp(log: ChannelLog, why: ChannelLog['givenUp']): void {
    if (!log.memory) return;
    // Lines the event log still holds stay counted, as the event log's.
    if (this.eventLog) this.eventLogBytes += log.bytes;
    else this.bufferedBytes -= log.bytes;
    log.memory = null;
    log.bytes = 0;
    log.givenUp = why;
  }

  private log(id: string | null): ChannelLog {
    let log = this.logs.get(id);
    if (!log) {
      const memory = this.replayFiles() ? null : [];
      // A channel first asked for after the run finished (a subagent with no line of its own)
      // has ended already: its readers end at once.
      log = { count: 0, readers: new Set(), memory, bytes: 0, givenUp: null, ended: this.finished };
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

  private async *replay(id: string | null, log: ChannelLog, count: number): AsyncGenerator<JsonObject> {
    const files = this.replayFiles();
    if (files) {
      files.flush();
      const path = files.jsonlPath(id);
      if (path) {
        yield* readJsonLines(path, this.session.heldLineBytes, count, 0, id);
        return;
      }
    }
    if (!log.memory) {
      const why =
        log.givenUp === 'long line'
          ? 'it has a line longer than the line parser holds (maxLineBytes)'
          : `the run buffered more than maxBufferedBytes (${this.opts.maxBufferedBytes} bytes)`;
      throw new ProjectionError(
        'ERR_PROJECTION_BUFFER',
        `cannot replay channel ${id ?? 'main'} from its start: ${why}, and no files were written to ` +
          'replay from; open readers earlier, write files (out), or raise ' +
          (log.givenUp === 'long line' ? 'maxLineBytes' : 'maxBufferedBytes'),
      );
    }
    const lines = log.memory.slice(0, count);
    for (const raw of lines) yield lineValue(raw);
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
    if (this.drainWaiters.length > 0 && !this.pressured) this.releaseDrain();
  }

  private releaseDrain(): void {
    clearTimeout(this.stallTimer ?? undefined);
    this.stallTimer = null;
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const resolve of waiters) resolve();
  }
}

/** Channel files read at once by one late `events` loop; the rest are closed and reopened. */
const REPLAY_OPEN_FILES = 64;

/**
 * Reads channel files back in the order of the run's lines, for a late `events` loop when
 * files are written: each channel's file from its start, at most REPLAY_OPEN_FILES open at
 * once (one closed to make room is reopened at its place when its next line is due).
 */
class ChannelFileCursors {
  private readonly open = new Map<string | null, AsyncGenerator<JsonObject>>();
  private readonly read = new Map<string | null, number>();
  private readonly total = new Map<string | null, number>();

  constructor(
    private readonly files: ChannelFiles,
    private readonly heldLineBytes: number,
    log: EventLog,
    count: number,
  ) {
    for (let at = 0; at < count; at++) {
      const id = log.channelOf(at);
      if (id !== undefined) this.total.set(id, (this.total.get(id) ?? 0) + 1);
    }
    files.flush();
  }

  async next(id: string | null): Promise<JsonObject> {
    let lines = this.open.get(id);
    if (lines) {
      this.open.delete(id); // re-inserted last: the map's order is the order of use
    } else {
      if (this.open.size >= REPLAY_OPEN_FILES) {
        const [oldest, its] = this.open.entries().next().value!;
        this.open.delete(oldest);
        await its.return(undefined);
      }
      const path = this.files.jsonlPath(id);
      if (!path) throw new ProjectionError('ERR_PROJECTION_REPLAY', `no file for channel ${id ?? 'main'}`);
      lines = readJsonLines(path, this.heldLineBytes, this.total.get(id) ?? 0, this.read.get(id) ?? 0, id);
    }
    this.open.set(id, lines);
    const next = await lines.next();
    if (next.done) {
      throw new ProjectionError('ERR_PROJECTION_REPLAY', `the file of channel ${id ?? 'main'} ends early`);
    }
    this.read.set(id, (this.read.get(id) ?? 0) + 1);
    return next.value;
  }

  async close(): Promise<void> {
    for (const lines of this.open.values()) await lines.return(undefined);
    this.open.clear();
  }
}

/**
 * Lines `skip` to `count` of a `.jsonl` file, parsed. A line longer than `heldLineBytes` comes
 * back as a live reader saw it when the line parser spooled it: its top-level scalar members only.
 * A file with fewer whole lines (cut short, even mid-line) fails with ERR_PROJECTION_REPLAY.
 */
async function* readJsonLines(
  path: string,
  heldLineBytes: number,
  count: number,
  skip: number,
  channel: string | null,
): AsyncGenerator<JsonObject> {
  const values: JsonObject[] = [];
  let seen = 0;
  let scanner: StreamScanner | null = null;
  const wanted = () => seen >= skip && seen < count;
  const splitter = new LineSplitter(heldLineBytes, {
    line(raw) {
      if (wanted()) values.push(lineValue(raw));
      seen++;
    },
    overflow(piece, _lineNo, final) {
      if (seen < skip) {
        if (final) seen++;
        return;
      }
      (scanner ??= new StreamScanner()).push(piece);
      if (!final) return;
      const verdict = scanner.end();
      scanner = null;
      if (wanted()) values.push(verdict.ok ? (verdict.value as JsonObject) : {});
      seen++;
    },
  });
  const stream = createReadStream(path);
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      splitter.push(chunk);
      yield* values.splice(0);
      if (seen >= count) return;
    }
  } finally {
    stream.destroy();
  }
  if (seen >= count) return;
  throw new ProjectionError(
    'ERR_PROJECTION_REPLAY',
    `the file of channel ${channel ?? 'main'} (${path}) ends early: ${seen} whole lines of ${count}`,
  );
}

class SubagentHandleImpl implements SubagentHandle {
  readonly id: string;
  readonly cause: SubagentHandle['cause'];
  readonly outcome: Promise<SubagentOutput>;
  readonly output: Promise<SubagentOutput>;
  private resolveOutcome!: (output: SubagentOutput) => void;
  private done = false;

  constructor(
    private readonly projection: Projection,
    private readonly channel: Channel,
  ) {
    this.id = channel.id!;
    this.cause = Object.freeze({ type: 'toolCall', tool_call_id: this.id });
    this.outcome = new Promise((resolve) => (this.resolveOutcome = resolve));
    this.output = this.outcome.then((output) =>
      output.status === 'failed'
        ? Promise.reject(new SubagentError(this.name, { ...output, id: this.id }))
        : output,
    );
    // Handled here, so a failure nobody awaits is no unhandled rejection; awaiting still throws.
    this.output.catch(() => {});
  }

  get name(): string | null {
    return this.channel.agent;
  }
  get description(): string | null {
    return this.channel.description;
  }
  get depth(): number | null {
    return this.channel.depth;
  }
  get background(): boolean | null {
    return this.channel.background;
  }
  get path(): readonly string[] {
    return Object.freeze(this.projection.pathOf(this.id));
  }
  get status(): SubagentStatus {
    return this.channel.status === 'running' && this.projection.finished
      ? 'interrupted'
      : this.channel.status;
  }

  get messages(): AsyncIterable<Message> {
    return messagesOf(this.projection, this.id);
  }
  get toolCalls(): AsyncIterable<ToolCall> {
    return toolCallsOf(this.projection, this.id);
  }
  get subagents(): AsyncIterable<SubagentHandle> {
    return this.projection.childrenOf(this.id);
  }

  snapshot(): ChannelSnapshot {
    return snapshotOf(this.channel);
  }

  /** The subagent ended (or the run did): settle its output once. */
  ended(): void {
    if (this.done) return;
    this.done = true;
    const ch = this.channel;
    // Its cost as the ledger has it: an unpriced model or no usage known costs null, not 0.
    const own = this.projection.session.cost.channelCost(ch.id);
    this.resolveOutcome(
      Object.freeze({
        ...totalsOf(
          ch.usage,
          ch.firstSeen,
          ch.lastSeen,
          // No usage known: null dollars, basis `unknown`, as index.json says.
          this.projection.costOf(own === null ? null : own.usd, own?.basis ?? 'unknown'),
        ),
        status: this.status,
        summary: ch.summary,
        error: ch.status === 'failed' ? (ch.summary ?? 'failed') : null,
        lines: ch.lines,
        subtree: this.projection.totals(ch),
      }),
    );
  }
}

/** A channel's messages; the reader opens when iteration starts, so an unread one costs nothing. */
export function messagesOf(projection: Projection, id: string | null): AsyncIterable<Message> {
  return {
    [Symbol.asyncIterator]: () => {
      const assembler = new MessageAssembler(() => projection.display);
      return projection.openReader<Message>(
        'messages',
        id,
        (value, feed) => {
          const message = assembler.take(value);
          if (message) feed.push(message);
        },
        () => assembler.end(),
      );
    },
  };
}

/** A channel's tool calls, paired with their results as the lines arrive. */
export function toolCallsOf(projection: Projection, id: string | null): AsyncIterable<ToolCall> {
  return {
    [Symbol.asyncIterator]: () => {
      const pairing = new ToolCallPairing();
      return projection.openReader<ToolCall>(
        'toolCalls',
        id,
        (value, feed) => {
          for (const call of pairing.take(value)) feed.push(call);
        },
        () => pairing.end(),
      );
    },
  };
}
