import { EventEmitter, once } from 'node:events';
import { SubteeError, UsageError } from '../errors.js';
import {
  CostLedger,
  type CostBasis,
  type CostView,
  type ReadonlyChannelCost,
  type UsageEvent,
} from './cost.js';
import { DISPLAY_DEFAULTS, displayPolicy, ThinkingCounts, type DisplayPolicy } from './display.js';
import type { Stall } from './in-flight.js';
import type { PriceTable } from './prices.js';
import type { JsonObject } from './message.js';
import {
  ChannelTree,
  type ChannelEvent,
  type ChannelPlace,
  type ReadonlyChannel,
  type ToolEvent,
} from './tree.js';

export interface Warning {
  readonly code: string;
  readonly message: string;
}

/** A line the model placed on a channel: what the channel router hands on with the line. */
export interface RoutedEvent {
  readonly type: 'routed';
  readonly lineNo: number;
  /**
   * The channel the line is on, the tree's own node, read only (see ReadonlyChannel): read it
   * while the line is handled (it changes as later lines arrive; `changes` carry snapshots
   * that do not).
   */
  readonly channel: ReadonlyChannel;
  /** Where the channel sat as this line was routed, frozen: what a view of the line names it by. */
  readonly place: ChannelPlace;
  /** The tree changes the line caused, in order: a channel opened, its spawn seen, its end. */
  readonly changes: readonly ChannelEvent[];
  /** What the cost ledger counted for the line; null for most lines (it counted nothing). */
  readonly usage: UsageEvent | null;
  /** The tool calls and results on the line, in block order; most lines share one empty list. */
  readonly tools: readonly ToolEvent[];
}

/**
 * A channel's cost figures as of the line it ended on (or changed its end on), frozen into
 * that line's status event: what a view tells of the end shows these, so a run read live
 * and its recording replayed show the same, whatever later lines the model has taken by the
 * time the view reads the event. The run's final figures are `index.json`'s.
 */
export interface EndFigures {
  /**
   * The ledger's `endCost` once the line was counted (its `channelCost` before a result line;
   * after one, priced without the whole report: see CostLedger.endCost); null: no usage yet.
   */
  readonly cost: ReadonlyChannelCost | null;
  /** How the dollars were found then: `result` once a result line was counted, else `table`. */
  readonly basis: CostBasis;
}

/** A status event as the run model hands it on: the tree's, with its channel's EndFigures. */
type StatusEvent = Extract<ChannelEvent, { type: 'status' }> & { readonly figures: EndFigures };

/**
 * The figures a status event froze (see EndFigures); null for an event that is not a status
 * or that the run model did not make (a plugin's or a test's own record).
 */
export function endFigures(ev: ChannelEvent): EndFigures | null {
  return ev.type === 'status' ? ((ev as Partial<StatusEvent>).figures ?? null) : null;
}

export type { UsageEvent } from './cost.js';
export type { ToolCallEvent, ToolEvent, ToolResultEvent } from './tree.js';

/**
 * What the run model says a line did, each a frozen object: the line routed (`take`'s
 * result), with the tree changes it caused (`open`, `spawn`, `status`: ChannelEvents), the
 * usage the cost ledger counted for it (`usage`) and its tool calls and results (`toolCall`,
 * `toolResult`). Warnings and stalls are not events: readers follow `warnings` with
 * `warningAt`, the run's one list of them.
 */
export type ModelEvent = RoutedEvent | ChannelEvent | UsageEvent | ToolEvent;

/** What the run read: index.json's `input` (see RunModel's counting methods). */
export interface InputCounts {
  lines: number;
  blankLines: number;
  bytes: number;
  quarantined: number;
  failed: number;
  unwritten: number;
  /** Lines a stage plugin dropped (its function returned `null`): in no file, by design. */
  dropped: number;
}

/** The subagent tree as its readers see it: its channels read-only, nothing to set. */
export type TreeView = Readonly<
  Pick<ChannelTree, 'size' | 'sessionId' | 'runId' | 'version' | 'firstTime' | 'lastTime'>
> & {
  readonly main: ReadonlyChannel;
  get(id: string): ReadonlyChannel | undefined;
  /** Every channel, main first, then in creation order. */
  channels(): ReadonlyChannel[];
};

/** The run model as its readers see it: every figure, nothing to set. */
export interface RunView {
  readonly tree: TreeView;
  readonly cost: CostView;
  readonly input: Readonly<InputCounts>;
  readonly quarantineLines: {
    readonly listed: readonly number[];
    readonly omitted: number;
    readonly limit: number;
  };
  readonly warnings: readonly Warning[];
  /**
   * Per code, how many of its warnings were counted and not told: those past the first
   * WARNINGS_TOLD_PER_CODE (index.json's `warnings_omitted`).
   */
  readonly warningsOmitted: Readonly<Record<string, number>>;
  warningAt(index: number): Promise<Warning>;
  readonly thinking: Pick<ThinkingCounts, 'policy' | 'of'>;
  /**
   * How every view of the run shows what it said: the one policy stated for the run (see
   * RunModel.stateDisplay), thinking whole while none is.
   */
  readonly display: DisplayPolicy;
  readonly stall: Stall | null;
}

const NO_CHANGES: readonly ChannelEvent[] = Object.freeze([]);
/**
 * The run model: pure (no stream, no file, no clock), fed one line at a time. It owns the
 * subagent tree, the cost ledger, the input counts, the quarantine index, the warnings and
 * the thinking each channel showed, and says what each line did as frozen events
 * (`ModelEvent`). The channel router is a stream adapter over `take`; sinks and views read it
 * through `RunView`. Tests drive it with plain values.
 */
export class RunModel implements RunView {
  readonly tree = new ChannelTree();
  /** Tokens and dollars per channel and model (fed by the channel router). */
  readonly cost: CostLedger = new CostLedger(undefined, (code, message, subject) =>
    this.warn(code, message, subject),
  );
  /**
   * `failed`: lines a stage could not handle (kept all the same, see `recordFailed`);
   * `unwritten`: after an output failed, lines read that are not in the output folder.
   */
  get input(): Readonly<InputCounts> {
    return this.#input;
  }
  readonly #input = {
    lines: 0,
    blankLines: 0,
    bytes: 0,
    quarantined: 0,
    failed: 0,
    unwritten: 0,
    dropped: 0,
  };
  /**
   * Line numbers in the quarantine file: the first ones, then only a count (any stream keeps
   * a small index).
   */
  readonly quarantineLines = new CappedLineList(QUARANTINE_LINES_LISTED);
  /** The run's warnings, append-only (recorded by `warn`). */
  get warnings(): readonly Warning[] {
    return this.#warnings;
  }
  readonly #warnings: Warning[] = [];
  get warningsOmitted(): Readonly<Record<string, number>> {
    return Object.freeze(Object.fromEntries(this.#omitted));
  }
  readonly #omitted = new Map<string, number>();
  /**
   * Per channel, the thinking the run's display policy kept and cut (index.json's
   * `thinking`), once a thinking truncator states the policy; none counted before.
   */
  readonly thinking = new ThinkingCounts();
  get display(): DisplayPolicy {
    return this.#display ?? DISPLAY_DEFAULTS;
  }
  #display: DisplayPolicy | null = null;
  /** Whether the run went silent past its allowance (see recordStall). */
  get stalled(): boolean {
    return this.#stall !== null;
  }
  /** What the idle watchdog found when it first fired: the silence, its allowance, what was in flight. */
  get stall(): Stall | null {
    return this.#stall;
  }
  #stall: Stall | null = null;
  /**
   * Emits `warning` as one is recorded, for the readers waiting for one not recorded yet (see
   * warningAt): one listener each, as many as follow the warnings.
   */
  readonly #recorded = new EventEmitter().setMaxListeners(0);

  /** Per code, the subjects warned of (`undefined`: the code without one). */
  readonly #warned = new Map<string, Set<string | undefined>>();

  /**
   * One JSON line, routed: onto its channel in the tree, its usage into the cost ledger (a
   * reading that fails is counted as a failed record, the line stays routed). Throws when the
   * tree cannot take the line (the router quarantines it). The event says what the line did:
   * its channel, the tree changes (a status event with its channel's EndFigures), the usage
   * counted and the tool calls and results on it. `onEnd(id)` is called for each subagent
   * that ends on the line, before its figures are frozen.
   */
  take(value: JsonObject, lineNo: number, onEnd?: (channel: string) => void): RoutedEvent {
    const { channel, events, tools } = this.tree.route(value, lineNo);
    let usage: UsageEvent | null = null;
    try {
      usage = this.cost.observe(value, channel.id, lineNo);
    } catch (err) {
      this.recordFailed('channel-router', lineNo, err);
    }
    return Object.freeze({
      type: 'routed',
      lineNo,
      channel,
      place: channel.place,
      changes: events.length > 0 ? this.withFigures(events, lineNo, onEnd) : NO_CHANGES,
      usage,
      tools,
    });
  }

  /**
   * The line's tree changes, each status event with its channel's figures as of this line
   * (EndFigures). `onEnd` is told of each subagent that ends first: what it adds to the
   * ledger (the router reads the subagent's transcript there) is in its figures.
   */
  private withFigures(
    events: readonly ChannelEvent[],
    lineNo: number,
    onEnd: ((channel: string) => void) | undefined,
  ): readonly ChannelEvent[] {
    if (!events.some((ev) => ev.type === 'status')) return events;
    return Object.freeze(
      events.map((ev): ChannelEvent => {
        if (ev.type !== 'status') return ev;
        const id = ev.channel.id;
        if (onEnd !== undefined && id !== null) {
          try {
            onEnd(id);
          } catch (err) {
            this.recordFailed('channel-router', lineNo, err);
          }
        }
        let cost: ReadonlyChannelCost | null = null;
        try {
          cost = frozenCost(this.cost.endCost(id));
        } catch (err) {
          this.recordFailed('channel-router', lineNo, err);
        }
        const figures: EndFigures = Object.freeze({ cost, basis: this.cost.hasResult ? 'result' : 'table' });
        return Object.freeze({ ...ev, figures });
      }),
    );
  }

  /**
   * States the run's one display policy (`display`), which every view reads from the run:
   * the thinking truncator states its options (`buildChain` states them before it makes any
   * component). The same policy stated again changes nothing; a different one is refused
   * (ERR_DISPLAY_POLICY), so two views of one run never show it two ways.
   */
  stateDisplay(policy: DisplayPolicy): void {
    const stated = displayPolicy(policy);
    const was = this.#display;
    if (was === null) this.#display = stated;
    else if (was.thinking !== stated.thinking || was.thinkingChars !== stated.thinkingChars)
      throw new UsageError(
        'ERR_DISPLAY_POLICY',
        `the run's display policy is stated once: thinking ${shownPolicy(was)} already, ` +
          `not ${shownPolicy(stated)}`,
      );
  }

  /**
   * The price table the cost ledger prices the run with (the shipped one until stated): the
   * channel router states the one its `prices` file makes, before the run's first line, so
   * every line is priced by one table.
   */
  statePrices(table: PriceTable): void {
    if (this.#input.lines > 0)
      throw new UsageError('ERR_PRICES', 'prices are stated before the run reads its first line');
    this.cost.prices = table;
  }

  /** `count` input lines read (blank ones are counted apart, see countBlankLine). */
  countLines(count = 1): void {
    this.#input.lines += count;
  }

  /** One blank input line, skipped. */
  countBlankLine(): void {
    this.#input.blankLines++;
  }

  /** `count` input bytes read. */
  countBytes(count: number): void {
    this.#input.bytes += count;
  }

  /** `count` input lines from `lineNo` on kept in the quarantine file, listed in input order. */
  countQuarantined(lineNo: number, count = 1): void {
    this.#input.quarantined += count;
    if (count === 1) this.quarantineLines.push(lineNo);
    else this.quarantineLines.pushRun(lineNo, count);
  }

  /** `count` input lines a stage plugin dropped: in no file, and not unwritten. */
  countDropped(count = 1): void {
    this.#input.dropped += count;
  }

  /**
   * The run failed (an output, or anything that cut the chain short) with `written` lines in
   * the output folder, `quarantined` of them in its quarantine file: the lines read that are
   * neither there nor dropped are `input.unwritten`. A line bound for the quarantine file that
   * never reached it (read after the failed write, or queued when it failed) is unwritten only:
   * `input.quarantined` and the listed line numbers are cut to the lines the file holds: the
   * first ones counted, as lines reach the file in the order they are counted (`quarantined`
   * left out: none is cut). Returns the unwritten.
   */
  recordUnwritten(written: number, quarantined?: number): number {
    this.#input.unwritten = Math.max(0, this.#input.lines - this.#input.dropped - written);
    if (quarantined !== undefined && quarantined < this.#input.quarantined) {
      this.#input.quarantined = quarantined;
      this.quarantineLines.keepFirst(quarantined);
    }
    return this.#input.unwritten;
  }

  /** The watchdog's finding: the run is stalled; the first stall is the one kept. */
  recordStall(stall: Stall, message: string): void {
    this.#stall ??= stall;
    this.warn('STALL', message);
  }

  /**
   * Records a warning once per code (or once per `subject` of a code, such as a model without
   * a price). Warnings are an append-only list: a reader keeps its place in it (a cursor) and
   * reads each once, in order (`warningAt` waits for one not recorded yet). A stream chooses
   * how many subjects there are: past WARNINGS_TOLD_PER_CODE of one code, the rest are counted
   * (`warningsOmitted`), not listed, and one WARNINGS_OMITTED says so. So every view, which
   * follows this list, tells a bounded number of lines. False when not listed.
   */
  warn(code: string, message: string, subject?: string): boolean {
    let subjects = this.#warned.get(code);
    if (subjects === undefined) this.#warned.set(code, (subjects = new Set()));
    if (subjects.has(subject)) return false;
    subjects.add(subject);
    if (subjects.size <= WARNINGS_TOLD_PER_CODE) {
      this.#record(code, message);
      return true;
    }
    const omitted = (this.#omitted.get(code) ?? 0) + 1;
    this.#omitted.set(code, omitted);
    if (omitted === 1) {
      this.#record(
        'WARNINGS_OMITTED',
        `more than ${WARNINGS_TOLD_PER_CODE} ${code} warnings: the rest are not told one by one; ` +
          "index.json's warnings_omitted counts them",
      );
    }
    return false;
  }

  #record(code: string, message: string): void {
    this.#warnings.push(Object.freeze({ code, message }));
    this.#recorded.emit('warning');
  }

  /**
   * The warning at `index` of `warnings` (0 the first): at once when it is recorded, else
   * once it is. A reader that follows the run's warnings keeps its own cursor into the list.
   */
  async warningAt(index: number): Promise<Warning> {
    while (!(index < this.#warnings.length)) await once(this.#recorded, 'warning');
    return this.#warnings[index];
  }

  /**
   * A stage's logic threw on one record. A typed error (a refused version, a failed write, a
   * stall) ends the run as documented and is thrown on; anything else is a bug or a record
   * subtee cannot read, and must not cost the other records: it is counted, reported once
   * (`RECORD_FAILED`), and the stage keeps the record as docs/plugins.md says.
   */
  recordFailed(stage: string, lineNo: number, err: unknown): string {
    if (err instanceof SubteeError) throw err;
    this.#input.failed++;
    const why = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    this.warn(
      'RECORD_FAILED',
      `${stage} could not handle input line ${lineNo} (${why}); ` +
        'the line is kept, see index.json input.failed for how many',
    );
    return why;
  }
}

const shownPolicy = (p: DisplayPolicy): string =>
  p.thinking === 'truncate' ? `truncate to ${p.thinkingChars} chars` : p.thinking;

/** A channel's cost as its own frozen object (one read from a report is frozen already). */
function frozenCost(cost: ReadonlyChannelCost | null): ReadonlyChannelCost | null {
  if (cost === null || Object.isFrozen(cost)) return cost;
  Object.freeze(cost.models);
  Object.freeze(cost.tokens);
  return Object.freeze(cost);
}

/**
 * How many warnings of one code are told (listed, on stderr, in pino, in index.json); the
 * rest are counted in index.json's `warnings_omitted`.
 */
export const WARNINGS_TOLD_PER_CODE = 10;

/** How many quarantined line numbers index.json lists; the rest are counted. */
export const QUARANTINE_LINES_LISTED = 1000;

/** Line numbers kept up to a limit, then only counted: memory stays flat on any stream. */
export class CappedLineList {
  readonly listed: number[] = [];
  omitted = 0;

  constructor(readonly limit: number) {}

  push(lineNo: number): void {
    if (this.listed.length < this.limit) this.listed.push(lineNo);
    else this.omitted++;
  }

  /**
   * Only the first `count` line numbers stay, listed or counted. The first in input order: the
   * lines reach their file in that order, but a line the router could not place is counted
   * after the parser's junk lines of the same batch.
   */
  keepFirst(count: number): void {
    this.listed.sort((a, b) => a - b);
    if (count < this.listed.length) this.listed.length = count;
    this.omitted = Math.min(this.omitted, count - this.listed.length);
  }

  /** `count` consecutive line numbers from `first` on. */
  pushRun(first: number, count: number): void {
    const listed = Math.max(0, Math.min(count, this.limit - this.listed.length));
    for (let k = 0; k < listed; k++) this.listed.push(first + k);
    this.omitted += count - listed;
  }
}

