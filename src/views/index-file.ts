import type { ReadonlyCostReport, TokensBasis } from '../model/cost.js';
import type { Stall } from '../model/in-flight.js';
import type { CommandEnd, Producer, SinkRun, Warning } from '../model/session.js';
import { channelTimes, type ReadonlyChannel, type ChannelStatus, type ChannelTimes } from '../model/tree.js';
import {
  channelCosts,
  finalCost,
  indexCost,
  NO_USAGE_REASON,
  type ChannelCostView,
  type IndexCost,
  channelUsage,
} from './cost.js';
import type { DisplayPolicy, ThinkingMode } from '../model/display.js';
import { MadeOnDemand } from './json-pieces.js';

export const INDEX_FORMAT = 'subtee-index/1';

export interface ChannelPaths {
  log: string;
  jsonl: string;
  thinking_log?: string;
}

/** One channel of `index.json`: the main conversation (`id` null) or a subagent. */
export interface IndexChannel {
  id: string | null;
  parent: string | null;
  orphan: boolean;
  depth: number | null;
  agent: string | null;
  description: string | null;
  status: ChannelStatus;
  background: boolean | null;
  summary: string | null;
  /** Paths relative to the output folder; null without one. */
  log: string | null;
  jsonl: string | null;
  thinking_log?: string;
  lines: number;
  counts: { text: number; thinking: number; tool_use: number; tool_result: number };
  /**
   * Each API message's usage counted once; `output_tokens` is the true figure (or the
   * estimate, or the stream's own: see the run's `cost.output_tokens`).
   */
  usage: Record<string, number>;
  /** Models the channel used, in first-use order. */
  models: readonly string[];
  /**
   * Its own dollars and its subtree's (itself and every channel under it); null: a model is
   * unpriced, or its usage is unknown. `basis`: how its output tokens were found; `reason`:
   * why its usage is unknown (null otherwise).
   */
  cost: {
    usd: number | null;
    subtree_usd: number | null;
    /** Channels of its subtree (itself included) of unknown usage, not in `subtree_usd`. */
    subtree_unknown: number;
    basis: TokensBasis;
    reason: string | null;
  };
  first_seen: string | null;
  last_seen: string | null;
  /**
   * A subagent's span: from its spawn (the `Agent`/`Task` call, else the line that opened it)
   * to its report (tool_result or task notification), or to the run's latest line while it
   * runs; main's from the run's first line to its latest. Null where the stream gave no time.
   */
  started_at: string | null;
  ended_at: string | null;
  /** ended_at − started_at in milliseconds; null when either is unknown. */
  elapsed_ms: number | null;
  /** Fields stages add (the thinking truncator's `thinking`…). */
  [field: string]: unknown;
}

/** The index's members before `channels`, in the order they are written. */
export interface IndexHead {
  format: typeof INDEX_FORMAT;
  session_id: string | null;
  /** The first `uuid` of the stream: the same for every run of one recording (stats counts it once). */
  run_id: string | null;
  claude_code_version: string | null;
  producer: Producer | null;
  /** The producer's version as its stream states it (Claude Code's is `claude_code_version`). */
  producer_version: string | null;
  /** The run was stopped (a signal, an abort) before its input ended. */
  interrupted: boolean;
  /** Only under `subtee run`: how the command ended (a signal's death makes the run interrupted). */
  command?: CommandEnd;
  stalled: boolean;
  /** What the idle watchdog found when it fired; null when it did not. */
  stall: Stall | null;
  input: {
    lines: number;
    bytes: number;
    quarantined: number;
    blank_lines: number;
    failed: number;
    unwritten: number;
    dropped: number;
  };
  quarantine: string | null;
  quarantine_lines: readonly number[];
  quarantine_lines_omitted: number;
  warnings: readonly Warning[];
  /** Per code, its warnings counted and not listed (past the first WARNINGS_TOLD_PER_CODE). */
  warnings_omitted: Readonly<Record<string, number>>;
  /** What the run cost (see docs/cost.md). */
  cost: IndexCost;
  /** How the run's views showed it (`--thinking`): what `subtee report` applies to the page. */
  display?: { thinking: ThinkingMode; thinking_chars: number };
}

/** The `index.json` document (format documented in docs/output-folder.md). */
export interface IndexDocument extends IndexHead {
  channels: IndexChannel[];
  /** Fields a newer writer adds. */
  [field: string]: unknown;
}

function timeFields(t: ChannelTimes): Pick<IndexChannel, 'started_at' | 'ended_at' | 'elapsed_ms'> {
  return { started_at: t.startedAt, ended_at: t.endedAt, elapsed_ms: t.elapsedMs };
}

/** A channel's `models` and `cost`; one the walk did not reach (none is left out) costs nothing. */
function costFields(view: ChannelCostView | undefined): Pick<IndexChannel, 'models' | 'cost'> {
  if (!view)
    return {
      models: [],
      cost: { usd: null, subtree_usd: null, subtree_unknown: 1, basis: 'unknown', reason: NO_USAGE_REASON },
    };
  return {
    models: view.models,
    cost: {
      usd: view.usd,
      subtree_usd: view.subtreeUsd,
      subtree_unknown: view.subtreeUnknown,
      basis: view.basis,
      reason: view.reason,
    },
  };
}

/** The `index.json` document (format documented in docs/output-folder.md). Plain data, no I/O. */
export function buildIndex(
  run: SinkRun,
  paths: (ch: ReadonlyChannel) => ChannelPaths | undefined,
  quarantine: string | null,
  display?: DisplayPolicy,
): IndexDocument {
  const { head, channels, entry } = indexParts(run, paths, quarantine);
  return { ...withDisplay(head, display), channels: channels.map(entry) };
}

/** The head with the display policy the views applied, when there is one. */
function withDisplay(head: IndexHead, display: DisplayPolicy | undefined): IndexHead {
  if (display === undefined) return head;
  return { ...head, display: { thinking: display.thinking, thinking_chars: display.thinkingChars } };
}

/**
 * The index as `buildIndex` gives it, except that each channel's entry is made only when
 * `jsonPieces` writes it: the document written from this is byte for byte the same.
 */
export function indexForWriting(
  run: SinkRun,
  paths: (ch: ReadonlyChannel) => ChannelPaths | undefined,
  quarantine: string | null,
  costs?: RunCosts,
  display?: DisplayPolicy,
): IndexHead & { channels: MadeOnDemand<IndexChannel> } {
  const { head, channels, entry } = indexParts(run, paths, quarantine, costs);
  const made = new MadeOnDemand(channels.length, (i) => entry(channels[i]));
  return { ...withDisplay(head, display), channels: made };
}

/** The run's final cost and each channel's: computed once at the end for all that show them. */
export interface RunCosts {
  report: ReadonlyCostReport;
  channels: Map<ReadonlyChannel, ChannelCostView>;
}

export function runCosts(run: SinkRun): RunCosts {
  const report = finalCost(run);
  return { report, channels: channelCosts(report, run.tree) };
}

function indexParts(
  run: SinkRun,
  paths: (ch: ReadonlyChannel) => ChannelPaths | undefined,
  quarantine: string | null,
  { report, channels: costs }: RunCosts = runCosts(run),
): { head: IndexHead; channels: ReadonlyChannel[]; entry: (ch: ReadonlyChannel) => IndexChannel } {
  const tree = run.tree;
  const usageOf = (ch: ReadonlyChannel) => channelUsage(ch.usage, costs.get(ch));
  const head: IndexHead = {
    format: INDEX_FORMAT,
    session_id: tree.sessionId,
    run_id: tree.runId,
    claude_code_version: tree.version,
    producer: run.producer,
    producer_version: run.producer === 'claude' ? tree.version : run.producerVersion,
    interrupted: run.interrupted,
    ...(run.command ? { command: run.command } : {}),
    stalled: run.stalled,
    stall: run.stall,
    input: {
      lines: run.input.lines,
      bytes: run.input.bytes,
      quarantined: run.input.quarantined,
      blank_lines: run.input.blankLines,
      failed: run.input.failed,
      unwritten: run.input.unwritten,
      dropped: run.input.dropped,
    },
    quarantine,
    quarantine_lines: run.quarantineLines.listed,
    quarantine_lines_omitted: run.quarantineLines.omitted,
    warnings: run.warnings,
    warnings_omitted: run.warningsOmitted,
    cost: indexCost(
      report,
      tree.channels().map((c) => c.id),
    ),
  };
  const entry = (ch: ReadonlyChannel): IndexChannel => ({
    id: ch.id,
    parent: ch.parent,
    orphan: ch.orphan,
    depth: ch.depth,
    agent: ch.id === null ? null : ch.agent,
    description: ch.description,
    status: ch.status,
    background: ch.background,
    summary: ch.summary,
    log: paths(ch)?.log ?? null,
    jsonl: paths(ch)?.jsonl ?? null,
    ...(paths(ch)?.thinking_log ? { thinking_log: paths(ch)!.thinking_log } : {}),
    lines: ch.lines,
    counts: ch.counts,
    usage: usageOf(ch),
    ...costFields(costs.get(ch)),
    first_seen: ch.firstSeen,
    last_seen: ch.lastSeen,
    ...timeFields(channelTimes(tree, ch)),
    ...(run.thinking.policy ? { thinking: run.thinking.of(ch.id) } : {}),
    ...(run.transcripts ? { transcript: run.transcripts.transcriptOf(ch.id) } : {}),
  });
  return { head, channels: tree.channels(), entry };
}

/**
 * What `index.json` is given room for on the disk as the run goes (the files sink keeps that
 * much reserved, see docs/output-folder.md): bytes for the document's head, for each channel
 * beyond the strings the stream chooses (its id, agent, description, parent, summary, which are
 * counted as their JSON text), for each model, warning and listed quarantine line.
 */
export const INDEX_ROOM = Object.freeze({
  headBytes: 16 * 1024,
  channelBytes: 2 * 1024,
  /** A path of a channel's files beyond its stem (`agents/`, the extension, quotes, the key). */
  pathBytes: 48,
  modelBytes: 1024,
  warningBytes: 64,
  quarantineLineBytes: 24,
});

/** Bytes `value` takes in the index as JSON text (null as `null`). */
export function jsonBytes(value: string | null): number {
  return value === null ? 4 : Buffer.byteLength(JSON.stringify(value));
}

/**
 * Room for one channel's entry when it appears: its fixed members, its id (in its entry and in
 * its children's `parent`), and its `log`, `jsonl` and `thinking_log` paths made from `stem`.
 */
export function channelRoom(id: string | null, stem: string): number {
  return INDEX_ROOM.channelBytes + 2 * jsonBytes(id) + 3 * (jsonBytes(stem) + INDEX_ROOM.pathBytes);
}

/** Room for what a channel's spawn or end says of it: its agent, description, parent and summary. */
export function describedRoom(ch: {
  agent: string | null;
  description: string | null;
  parent: string | null;
  summary: string | null;
}): number {
  return jsonBytes(ch.agent) + jsonBytes(ch.description) + jsonBytes(ch.parent) + jsonBytes(ch.summary);
}

/** Room for the run's warnings from `from` on (each `{code, message}` as written). */
export function warningsRoom(warnings: readonly Warning[], from: number): number {
  let bytes = 0;
  for (let i = from; i < warnings.length; i++)
    bytes += INDEX_ROOM.warningBytes + jsonBytes(warnings[i].code) + jsonBytes(warnings[i].message);
  return bytes;
}
