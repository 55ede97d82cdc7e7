import { UsageError } from '../errors.js';
import { ChannelTree, type Channel } from './tree.js';

export interface ChannelFiles {
  /** The output folder. */
  readonly out: string;
  /** The absolute path of a channel's `.jsonl` file, once the channel has one. */
  jsonlPath(id: string | null): string | undefined;
  /** Writes what is queued, so the files hold every line handed to the sink so far. */
  flush(): void;
}

/** Who wrote the input: Claude Code stream-json (the CLI or the Agent SDK), or a LangGraph run. */
export type Producer = 'claude' | 'langgraph';

export interface Warning {
  code: string;
  message: string;
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
  readonly input = { lines: 0, blankLines: 0, bytes: 0, quarantined: 0 };
  readonly quarantineLines: number[] = [];
  readonly warnings: Warning[] = [];
  /**
   * Set by a sink that writes each channel's raw lines to a file (the files sink), so a
   * reader that starts late can replay a channel from disk instead of from memory.
   */
  channelFiles: ChannelFiles | null = null;
  /** Set by the input-format stage; null when the chain has none or no line arrived. */
  producer: Producer | null = null;
  interrupted = false;
  stalled = false;
  /**
   * Set by runChain while a chain runs: stops reading input, lets what was read reach every
   * stage and sink (a partial last line goes to the quarantine), then fails the chain with
   * `reason`. Null for stages used outside a chain.
   */
  stopInput: ((reason: Error) => void) | null = null;
  /** Per-channel fields that stages add to index.json (the thinking truncator's counts…). */
  readonly channelFields: Array<(ch: Channel) => Record<string, unknown>> = [];
  private readonly listeners: Array<(w: Warning) => void> = [];

  /** Records a warning once per code; listeners (stderr, pino) hear it once. */
  warn(code: string, message: string): boolean {
    if (this.warnings.some((w) => w.code === code)) return false;
    const w = { code, message };
    this.warnings.push(w);
    for (const l of this.listeners) l(w);
    return true;
  }

  onWarning(listener: (w: Warning) => void): void {
    this.listeners.push(listener);
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
    `${factory} needs { session }: create one with new Session() and pass the same one to every stage of the chain`,
  );
}
