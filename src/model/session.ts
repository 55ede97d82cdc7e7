import { UsageError } from '../errors.js';
import type { CostView } from './cost.js';
import { HELD_LINE_BYTES } from './lines.js';
import type { JsonObject, TranscriptKinds } from './message.js';
import { RunModel, type RunView, type TreeView } from './run-model.js';
import type { ChannelTree } from './tree.js';
import type { Stall } from './in-flight.js';

export {
  CappedLineList,
  QUARANTINE_LINES_LISTED,
  RunModel,
  type ModelEvent,
  type RunView,
  type Warning,
} from './run-model.js';

/**
 * Where a channel's routed lines can be read back from: the files sink's `.jsonl` files. The
 * projection replays a late reader through this, never through the sink.
 */
export interface ChannelStore {
  /**
   * Lines `from` (0-based) up to `to` (exclusive) of a channel, parsed, read only as fast as
   * they are taken; a channel with no lines there (gone, cut short) fails with
   * ERR_PROJECTION_REPLAY, naming it.
   */
  read(channel: string | null, from: number, to: number): AsyncIterable<JsonObject>;
}

/**
 * Who wrote the input: Claude Code stream-json (the CLI or the Agent SDK), a LangGraph run,
 * or another coding agent's JSON stream (GitHub Copilot CLI, Codex, Gemini CLI, opencode).
 */
export type Producer = 'claude' | 'langgraph' | AgentProducer;

/** The coding agents other than Claude Code whose streams are mapped, with their names. */
export const AGENT_NAMES = Object.freeze({
  copilot: 'GitHub Copilot CLI',
  codex: 'Codex',
  gemini: 'Gemini CLI',
  opencode: 'opencode',
});
export type AgentProducer = keyof typeof AGENT_NAMES;

/** The agent's name for a producer or a command's name; null when it is none of them. */
export function agentNameOf(name: string | null): string | null {
  return name !== null && Object.hasOwn(AGENT_NAMES, name) ? AGENT_NAMES[name as AgentProducer] : null;
}

/** How the command of `subtee run` ended. */
export interface CommandEnd {
  /** The command as given (its first word). */
  name: string;
  /** Its exit code; 128 + the signal's number when a signal ended it. */
  exit_code: number;
  /** The signal that ended it, or null when it exited on its own. */
  signal: string | null;
}

export type { ChannelTranscript, TranscriptKinds } from './message.js';

/**
 * One run: its model (RunModel: the tree, costs, counts, warnings) and what the chain around
 * it states (the producer, the command's end, an interrupt). The parser counts input, the
 * router feeds lines to the model, any stage may warn; sinks read it to write `index.json`
 * and the summary. One session per chain, created by
 * whoever assembles the chain and handed to every stage: `buildChain` does it, and a
 * program composing the factories itself passes the same `session` to each.
 */
export class Session extends RunModel {
  /**
   * The line parser's `maxLineBytes`: a longer line reached the stages as its top-level
   * scalars only, and a reader replaying the files reads it back the same way.
   */
  get heldLineBytes(): number {
    return this.#heldLineBytes;
  }
  #heldLineBytes = HELD_LINE_BYTES;
  /** Stated by the input-format stage; null when the chain has none or no line arrived. */
  get producer(): Producer | null {
    return this.#producer;
  }
  #producer: Producer | null = null;
  /**
   * The version a mapped producer's stream states (Claude Code's is the tree's); null when
   * none. Stated with the producer (see stateProducer).
   */
  get producerVersion(): string | null {
    return this.#producerVersion;
  }
  #producerVersion: string | null = null;
  /**
   * Under a mapped producer (Copilot, Codex, Gemini CLI, opencode): how much of each channel
   * its stream shows (index.json's `transcript`). Null for Claude Code and LangGraph. Stated
   * with the producer (see stateProducer).
   */
  get transcripts(): TranscriptKinds | null {
    return this.#transcripts;
  }
  #transcripts: TranscriptKinds | null = null;
  /**
   * Under `subtee run`: the version the command printed for `--version`, once it met
   * `--require-version`. A stream that states none (Codex, Gemini CLI, opencode) is then not
   * refused for it. Stated by the command line (stateCheckedCommandVersion).
   */
  get checkedCommandVersion(): string | null {
    return this.#checkedCommandVersion;
  }
  #checkedCommandVersion: string | null = null;
  /** Whether the run was interrupted (a signal, an abort): see stateInterrupted. */
  get interrupted(): boolean {
    return this.#interrupted;
  }
  #interrupted = false;
  /** Under `subtee run`, once the command has exited: how it ended. Null otherwise. */
  get command(): CommandEnd | null {
    return this.#command;
  }
  #command: CommandEnd | null = null;

  /** The line parser states its `maxLineBytes` (see heldLineBytes). */
  stateHeldLineBytes(bytes: number): void {
    this.#heldLineBytes = bytes;
  }

  /**
   * The input-format stage states who wrote the input (see producer) and, for a mapped
   * coding agent, what its stream stated so far: its version and how much of each channel it
   * shows (a read-only view: `transcriptOf`). Each statement replaces the last whole: a run
   * read as another producer has that one's facts, or none.
   */
  stateProducer(
    producer: Producer | null,
    agent: { readonly version: string | null; readonly transcripts: TranscriptKinds } | null = null,
  ): void {
    this.#producer = producer;
    this.#producerVersion = agent?.version ?? null;
    this.#transcripts = agent?.transcripts ?? null;
  }

  /** The command line states the version `subtee run`'s command printed and that met `--require-version`. */
  stateCheckedCommandVersion(version: string | null): void {
    this.#checkedCommandVersion = version;
  }

  /** The run was interrupted (a signal, an abort): stays so. */
  stateInterrupted(): void {
    this.#interrupted = true;
  }

  /** Under `subtee run`: how the command ended, once it has exited. */
  stateCommandEnd(end: CommandEnd): void {
    this.#command = end;
  }
}

/**
 * The run as subtee's own sinks and views read it: every figure of the model (RunView), what
 * the chain stated about the run (read-only here), and the few things a sink records: a
 * warning, a record it could not handle, and (the files sink) how many lines its folder lacks
 * after an output failed. A sink cannot count input, route a line, record a stall or state
 * the chain's facts: those are the writers' (the line parser, the router, the input format,
 * the watchdog), which take the Session itself.
 */
export interface SinkRun extends RunView {
  /** See Session.heldLineBytes. */
  readonly heldLineBytes: number;
  readonly producer: Producer | null;
  readonly producerVersion: string | null;
  readonly interrupted: boolean;
  readonly command: CommandEnd | null;
  readonly transcripts: TranscriptKinds | null;
  readonly stalled: boolean;
  warn(code: string, message: string, subject?: string): boolean;
  recordFailed(stage: string, lineNo: number, err: unknown): string;
  recordUnwritten(written: number, quarantined?: number): number;
}

/** The run as a plugin is handed it (`ctx.session`): every figure, and `warn`. */
export interface PluginRun extends RunView {
  /** Whether the run was interrupted (Ctrl-C, an abort). */
  readonly interrupted: boolean;
  warn(code: string, message: string, subject?: string): boolean;
}

/**
 * A facade over the model for plugins: counts and lists read as frozen copies, the tree and
 * the thinking counts through read-only views (no `route`, no `add`; the tree's channels are
 * its own nodes, which have no field to set), so a plugin cannot set a count, change the tree
 * or add a warning but through `warn`.
 */
export function pluginRunOf(model: Session): PluginRun {
  const ledger = model.cost;
  const cost: CostView = Object.freeze({
    // The report's objects are frozen; its channels' map is copied, not handed out.
    report: () => {
      const report = ledger.report();
      return Object.freeze({ ...report, channels: new Map(report.channels) });
    },
    reportSoFar: () => {
      const report = ledger.reportSoFar();
      return Object.freeze({ ...report, channels: new Map(report.channels) });
    },
    channelCost: (channel: string | null) => ledger.channelCost(channel),
    get hasResult() {
      return ledger.hasResult;
    },
    get seenUsage() {
      return ledger.seenUsage;
    },
    get prices() {
      return ledger.prices;
    },
    unattributedUsd: () => ledger.unattributedUsd(),
    fromTranscript: (key: string | null) => ledger.fromTranscript(key),
  });
  return Object.freeze({
    tree: readonlyTree(model.tree),
    cost,
    get input() {
      return Object.freeze({ ...model.input });
    },
    get quarantineLines() {
      const { listed, omitted, limit } = model.quarantineLines;
      return Object.freeze({ listed: Object.freeze(listed.slice()) as number[], omitted, limit });
    },
    get warnings() {
      return Object.freeze(model.warnings.slice());
    },
    get warningsOmitted() {
      return model.warningsOmitted;
    },
    warningAt: (index: number) => model.warningAt(index),
    thinking: Object.freeze({
      get policy() {
        return model.thinking.policy;
      },
      of: (channel: string | null) => model.thinking.of(channel),
    }),
    get display() {
      return model.display;
    },
    get stall() {
      return frozenStall(model.stall);
    },
    get interrupted() {
      return model.interrupted;
    },
    warn: (code: string, message: string, subject?: string) => {
      // A code is shown as it stands on stderr and in index.json: capitals, digits and `_`.
      if (typeof code !== 'string' || !WARNING_CODE.test(code)) {
        const shown = typeof code === 'string' ? JSON.stringify(code.slice(0, 80)) : typeof code;
        throw new TypeError(`warn: a warning code is capitals, digits and _, not ${shown}`);
      }
      return model.warn(code, message, subject);
    },
  });
}

const WARNING_CODE = /^[A-Z][A-Z0-9_]{0,63}$/;

/**
 * The tree as a plugin reads it: its scalar fields, `size`, and its channels, never the tree
 * itself, whose `route` would add a line to the run. A channel is the tree's own node, read
 * only at run time (see ReadonlyChannel): the same object as a record's `channel`.
 */
function readonlyTree(tree: ChannelTree): TreeView {
  return Object.freeze({
    get main() {
      return tree.main;
    },
    get: (id: string | null) => tree.get(id),
    channels: () => tree.channels(),
    get size() {
      return tree.size;
    },
    get sessionId() {
      return tree.sessionId;
    },
    get runId() {
      return tree.runId;
    },
    get version() {
      return tree.version;
    },
    get firstTime() {
      return tree.firstTime;
    },
    get lastTime() {
      return tree.lastTime;
    },
  });
}

function frozenStall(stall: Stall | null): Stall | null {
  if (stall === null || Object.isFrozen(stall)) return stall;
  const waitingOn = Object.freeze(stall.waitingOn.map((w) => Object.freeze({ ...w })));
  return Object.freeze({ ...stall, waitingOn });
}

/**
 * The session a stage factory was given, as the type the factory takes it as (a sink: SinkRun).
 * A factory never makes its own: stages that each kept a private one would build separate
 * trees and fight over the same files.
 */
export function requireSession<R extends SinkRun = Session>(
  options: { session?: R } | undefined,
  factory: string,
): R {
  const session = options?.session;
  if (session instanceof Session) return session;
  throw new UsageError(
    'ERR_SESSION_REQUIRED',
    `${factory} needs { session }: create one with new Session() ` +
      'and pass the same one to every stage of the chain',
  );
}
