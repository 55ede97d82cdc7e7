/** The projection's public types, defaults and errors. */
import { SubteeError } from '../../errors.js';
import { escapeOneLine } from '../escape.js';
import type { JsonObject, Usage } from '../../model/message.js';
import type { Message } from '../message-stream.js';
import type { ChannelEvent, ChannelSnapshot, ChannelStatus } from '../../model/tree.js';
import type { ChannelStore } from '../../model/session.js';
import type { ModelCost, OutputTokensBasis, TokensBasis } from '../../model/cost.js';

export const PROJECTION_DEFAULTS = Object.freeze({
  /**
   * Memory kept so a reader opened late can start from a channel's first line (or an `events`
   * loop from the run's first), when no files are written (with files, late readers replay the
   * `.jsonl` files instead): the lines packed (their bytes in chunks, unused room included, 4
   * bytes a line and a few hundred a channel and a chunk beside) and the run's record order.
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
export const PROJECTION_OPTION_LEAST: ReadonlyArray<[keyof typeof PROJECTION_DEFAULTS, number]> = [
  ['maxBufferedBytes', 0],
  ['readerHighWaterLines', 1],
  ['readerStallMs', 1],
];

export interface ProjectionOptions {
  maxBufferedBytes?: number | undefined;
  readerHighWaterLines?: number | undefined;
  readerStallMs?: number | undefined;
}

export type SubagentStatus = ChannelStatus | 'interrupted';

/**
 * Where late readers replay from: a channel store, which may say how many files it reads at
 * once over all its replays and where each channel's `.jsonl` is (the files sink's does).
 */
export type ReplayStore = ChannelStore & {
  readonly maxOpenFiles?: number;
  jsonlPath?(channel: string | null): string | undefined;
};

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
  /** The first and last line's own timestamps. */
  readonly firstSeen: string | null;
  readonly lastSeen: string | null;
  /**
   * A subagent's span from its spawn to its report (or the run's latest line while it runs);
   * the run's from its first line to its latest; a subtree's from the first start to the last end.
   */
  readonly startedAt: string | null;
  readonly endedAt: string | null;
  /** endedAt − startedAt, from the stream's own timestamps. */
  readonly elapsedMs: number | null;
}

/**
 * A channel and every channel under it, rolled up. `cost.usd` is the dollars of those whose
 * usage is known, null when one is unpriced or none is known (`outputTokens` `unknown`), as
 * index.json's `subtree_usd`; `unknown` counts the others, as its `subtree_unknown`.
 */
export interface SubtreeOutput extends Totals {
  /** Subagents under it (a leaf has none). */
  readonly subagents: number;
  /** Channels in it, itself included, whose usage is unknown: not in `cost.usd`. */
  readonly unknown: number;
}

export interface SubagentOutput extends Totals {
  readonly status: SubagentStatus;
  /** The final report: the task notification's summary or the spawn call's result. */
  readonly summary: string | null;
  /** Why a failed subagent failed (the error its end carried); null unless `failed`. */
  readonly error: string | null;
  readonly lines: number;
  /**
   * This subagent and every subagent under it, rolled up; `subagents` counts those under it,
   * `unknown` those of unknown usage (itself included), not in `cost.usd` (see SubtreeOutput).
   */
  readonly subtree: SubtreeOutput;
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
  readonly subtree: SubtreeOutput;
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
  /**
   * Live: changes as the run goes on. `stopped`: it was stopped before it finished (not a
   * failure); `interrupted`: the run ended while it was still running.
   */
  readonly status: SubagentStatus;
  /** Each access starts a new reader from this subagent's first line. */
  readonly messages: AsyncIterable<Message>;
  readonly toolCalls: AsyncIterable<ToolCall>;
  /** Subagents this one spawned, as they are seen (see `RunProjection.subagents`). */
  readonly subagents: AsyncIterable<SubagentHandle>;
  /**
   * Settles when the subagent ends (or the run does), as Deep Agents' does: resolves for a
   * subagent that completed or was stopped (or was interrupted by the run's end), rejects with a
   * `SubagentError` (`status`, `summary`, `error`, and the figures as `output`) for one that
   * failed. A rejection nobody awaits does not crash the program.
   */
  readonly output: Promise<SubagentOutput>;
  /** The same figures as `output` for every subagent, failed ones included; never rejects. */
  readonly outcome: Promise<SubagentOutput>;
  /** The channel as it is now, frozen. */
  snapshot(): ChannelSnapshot;
}

/**
 * A reader could not start from the beginning: the memory buffer had to be given up. The message
 * names a channel by its id, which the stream chose: its controls are escaped, so a program that
 * logs the message replays no terminal sequence.
 */
export class ProjectionError extends SubteeError {
  constructor(code: string, message: string) {
    super(code, escapeOneLine(message));
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
    // The label and the reason are the stream's text: escaped in the message, raw in the fields.
    super('ERR_SUBAGENT_FAILED', escapeOneLine(`Subagent ${name ?? output.id} failed: ${error}`));
    this.name = 'SubagentError';
    this.id = output.id;
    this.status = 'failed';
    this.summary = output.summary;
    this.error = error;
    this.output = output;
  }
}

