import { SubteeError, UsageError } from '../errors.js';
import type { Stall } from './in-flight.js';
import { ChannelTree } from './tree.js';
import { CostLedger } from './cost.js';
import { HELD_LINE_BYTES } from './lines.js';
import type { JsonObject } from './message.js';
import { ThinkingCounts } from './display.js';

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

export interface Warning {
  readonly code: string;
  readonly message: string;
}

/** How much of a channel a mapped producer's stream shows: all of it, or its spawn and result. */
export type ChannelTranscript = 'stream' | 'spawn-and-result';

/** What a mapped producer's stream says of each channel's transcript (its mapper answers). */
export interface TranscriptKinds {
  transcriptOf(channel: string | null): ChannelTranscript;
}

/**
 * What one run knows about itself, shared by the stages of one chain: each stage adds what
 * it sees (the parser counts input, the router owns the tree, any stage may warn) and the
 * sinks read it to write `index.json` and the summary. One session per chain, created by
 * whoever assembles the chain and handed to every stage: `buildChain` does it, and a
 * program composing the factories itself passes the same `session` to each.
 */
export class Session {
  readonly tree = new ChannelTree();
  /** Tokens and dollars per channel and model (fed by the channel router). */
  readonly cost: CostLedger = new CostLedger(undefined, (code, message, subject) =>
    this.warn(code, message, subject),
  );
  /**
   * `failed`: lines a stage could not handle (kept all the same, see `recordFailed`);
   * `unwritten`: after an output failed, lines read that are not in the output folder.
   */
  readonly input = { lines: 0, blankLines: 0, bytes: 0, quarantined: 0, failed: 0, unwritten: 0 };
  /**
   * Line numbers in the quarantine file: the first ones, then only a count (any stream keeps
   * a small index).
   */
  readonly quarantineLines = new CappedLineList(QUARANTINE_LINES_LISTED);
  readonly warnings: Warning[] = [];
  /**
   * The line parser's `maxLineBytes`: a longer line reached the stages as its top-level
   * scalars only, and a reader replaying the files reads it back the same way.
   */
  heldLineBytes = HELD_LINE_BYTES;
  /** Set by the input-format stage; null when the chain has none or no line arrived. */
  producer: Producer | null = null;
  /** The version a mapped producer's stream states (Claude Code's is the tree's); null when none. */
  producerVersion: string | null = null;
  /**
   * Under `subtee run`: the version the command printed for `--version`, once it met
   * `--require-version`. A stream that states none (Codex, Gemini CLI, opencode) is then not
   * refused for it.
   */
  checkedCommandVersion: string | null = null;
  /**
   * True when the routed lines are mapped from another producer's events whose own bytes are
   * what the `.jsonl` files keep: a reader replays such a run from memory, not from the files.
   */
  linesMapped = false;
  interrupted = false;
  /** Under `subtee run`, once the command has exited: how it ended. Null otherwise. */
  command: CommandEnd | null = null;
  stalled = false;
  /** What the idle watchdog found when it first fired: the silence, its allowance, what was in flight. */
  stall: Stall | null = null;
  /**
   * Per channel, the thinking the run's display policy kept and cut (index.json's
   * `thinking`), once a thinking truncator states the policy; none counted before.
   */
  readonly thinking = new ThinkingCounts();
  /**
   * Under a mapped producer (Copilot, Codex, Gemini CLI, opencode): how much of each channel
   * its stream shows (index.json's `transcript`). Null for Claude Code and LangGraph.
   */
  transcripts: TranscriptKinds | null = null;
  /** Readers waiting for a warning not recorded yet: index → resolvers (see warningAt). */
  readonly #waiting = new Map<number, Array<(w: Warning) => void>>();

  private readonly warnedKeys = new Set<string>();

  /**
   * Records a warning once per code (or once per `subject` of a code, such as a model without
   * a price). Warnings are an append-only list: a reader keeps its place in it (a cursor) and
   * reads each once, in order (`warningAt` waits for one not recorded yet).
   */
  warn(code: string, message: string, subject?: string): boolean {
    const key = subject === undefined ? code : `${code}\u0000${subject}`;
    if (this.warnedKeys.has(key)) return false;
    this.warnedKeys.add(key);
    const w = Object.freeze({ code, message });
    this.warnings.push(w);
    const waiting = this.#waiting.get(this.warnings.length - 1);
    if (waiting !== undefined) {
      this.#waiting.delete(this.warnings.length - 1);
      for (const resolve of waiting) resolve(w);
    }
    return true;
  }

  /**
   * The warning at `index` of `warnings` (0 the first): at once when it is recorded, else
   * once it is. A reader that follows the run's warnings keeps its own cursor into the list.
   */
  warningAt(index: number): Promise<Warning> {
    if (index < this.warnings.length) return Promise.resolve(this.warnings[index]);
    return new Promise((resolve) => {
      const list = this.#waiting.get(index);
      if (list) list.push(resolve);
      else this.#waiting.set(index, [resolve]);
    });
  }

  /**
   * A stage's logic threw on one record. A typed error (a refused version, a failed write, a
   * stall) ends the run as documented and is thrown on; anything else is a bug or a record
   * subtee cannot read, and must not cost the other records: it is counted, reported once
   * (`RECORD_FAILED`), and the stage keeps the record as docs/plugins.md says.
   */
  recordFailed(stage: string, lineNo: number, err: unknown): string {
    if (err instanceof SubteeError) throw err;
    this.input.failed++;
    const why = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    this.warn(
      'RECORD_FAILED',
      `${stage} could not handle input line ${lineNo} (${why}); ` +
        'the line is kept, see index.json input.failed for how many',
    );
    return why;
  }
}

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

  /** `count` consecutive line numbers from `first` on. */
  pushRun(first: number, count: number): void {
    const listed = Math.max(0, Math.min(count, this.limit - this.listed.length));
    for (let k = 0; k < listed; k++) this.listed.push(first + k);
    this.omitted += count - listed;
  }
}

/**
 * The session a stage factory was given. A factory never makes its own: stages that each
 * kept a private one would build separate trees and fight over the same files.
 */
export function requireSession(options: { session?: Session } | undefined, factory: string): Session {
  const session = options?.session;
  if (session instanceof Session) return session;
  throw new UsageError(
    'ERR_SESSION_REQUIRED',
    `${factory} needs { session }: create one with new Session() ` +
      'and pass the same one to every stage of the chain',
  );
}
