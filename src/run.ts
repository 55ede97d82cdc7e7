import { ChannelTree, type Channel } from './tree.js';

export interface Warning {
  code: string;
  message: string;
}

/**
 * What one run knows about itself, shared by the stages of one chain: each stage adds what
 * it sees (the parser counts input, the router owns the tree, any stage may warn) and the
 * sinks read it to write `index.json` and the summary. Stages used on their own create one.
 */
export class Run {
  readonly tree = new ChannelTree();
  readonly input = { lines: 0, blankLines: 0, bytes: 0, quarantined: 0 };
  readonly quarantineLines: number[] = [];
  readonly warnings: Warning[] = [];
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
