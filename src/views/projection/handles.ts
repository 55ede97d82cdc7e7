/** Subagent handles, the lists loops read them from, and a channel's readers. */
import type { JsonObject } from '../../model/message.js';
import type { SinkRun } from '../../model/session.js';
import {
  channelTimes,
  snapshotOf,
  type ReadonlyChannel,
  type ChannelSnapshot,
  type ChannelTimes,
} from '../../model/tree.js';
import type { CostBasis, TokensBasis, UsageEvent } from '../../model/cost.js';
import { channelUsage } from '../cost.js';
import { Feed } from '../feed.js';
import { MessageAssembler, type Message } from '../message-stream.js';
import { channelTokens, elapsedMs } from '../walk.js';
import type { ChannelFigures } from './subtree.js';
import { ToolCallPairing } from './tool-calls.js';
import {
  SubagentError,
  type CostFigures,
  type SubagentHandle,
  type SubagentOutput,
  type SubagentStatus,
  type ToolCall,
  type Totals,
} from './types.js';

/** What a handle and a channel's readers need of the projection that made them. */
export interface HandleHost {
  readonly session: SinkRun;
  readonly finished: boolean;
  /** Ids from main down to the channel, frozen. */
  pathOf(id: string | null): readonly string[];
  childrenOf(id: string | null): AsyncIterable<SubagentHandle>;
  costOf(usd: number | null, outputTokens: TokensBasis, basis: CostBasis): CostFigures;
  figuresOf(ch: ReadonlyChannel, atEnd: boolean): ChannelFigures;
  /** The channel and every channel under it, each as it ended (see Projection.totals). */
  totals(ch: ReadonlyChannel): SubagentOutput['subtree'];
  openReader<T>(
    what: string,
    id: string | null,
    take: (value: JsonObject, usage: UsageEvent | null | undefined, feed: Feed<T>) => void,
    end: (feed: Feed<T>) => void,
  ): Feed<T>;
}

/**
 * The subagents of one list (the run's top level, one subagent's children, or every
 * subagent), read from the first by any number of loops: each loop is a Feed that every
 * handle is pushed onto. `offered` hears of a handle given to at least one open loop: the
 * input then waits a turn for the loops to take it (see `Projection.drained`).
 */
export class HandleList {
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


function elapsed(first: string | null, last: string | null): number | null {
  if (!first || !last) return null;
  const [from, to] = [Date.parse(first), Date.parse(last)];
  return Number.isNaN(from) || Number.isNaN(to) ? null : elapsedMs(from, to);
}

export function totalsOf(
  usage: Record<string, number>,
  first: string | null,
  last: string | null,
  cost: CostFigures,
  span: Pick<ChannelTimes, 'startedAt' | 'endedAt'>,
): Totals {
  return {
    cost,
    usage: Object.freeze({ ...usage }),
    tokens: channelTokens({ usage }),
    firstSeen: first,
    lastSeen: last,
    startedAt: span.startedAt,
    endedAt: span.endedAt,
    elapsedMs: elapsed(span.startedAt, span.endedAt),
  };
}

export class SubagentHandleImpl implements SubagentHandle {
  readonly id: string;
  readonly cause: SubagentHandle['cause'];
  readonly outcome: Promise<SubagentOutput>;
  readonly output: Promise<SubagentOutput>;
  private resolveOutcome!: (output: SubagentOutput) => void;
  private done = false;

  constructor(
    private readonly projection: HandleHost,
    private readonly channel: ReadonlyChannel,
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
    return this.projection.pathOf(this.id);
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

  /**
   * The subagent ended (or the run did): settle its output once, with its figures as of the
   * line it ended on (those its status event froze; at the run's end, the final ones).
   */
  ended(): void {
    if (this.done) return;
    this.done = true;
    const { channel: ch, cost: own, basis } = this.projection.figuresOf(this.channel, true);
    this.resolveOutcome(
      Object.freeze({
        ...totalsOf(
          // As index.json shows it: the output tokens the ledger counted, a transcript's once read.
          channelUsage(ch.usage, own),
          ch.firstSeen,
          ch.lastSeen,
          // An unpriced model costs null; no usage known: null dollars, basis `unknown`.
          this.projection.costOf(own === null ? null : own.usd, own?.basis ?? 'unknown', basis),
          channelTimes(this.projection.session.tree, ch),
        ),
        status: this.status,
        summary: ch.summary,
        error: ch.status === 'failed' ? (ch.summary ?? 'failed') : null,
        lines: ch.lines,
        subtree: this.projection.totals(this.channel),
      }),
    );
  }
}

/** A channel's messages; the reader opens when iteration starts, so an unread one costs nothing. */
export function messagesOf(projection: HandleHost, id: string | null): AsyncIterable<Message> {
  return {
    [Symbol.asyncIterator]: () => {
      const assembler = new MessageAssembler(() => projection.session.display);
      return projection.openReader<Message>(
        'messages',
        id,
        (value, usage, feed) => {
          const message = assembler.take(value, usage);
          if (message) feed.push(message);
        },
        () => assembler.end(),
      );
    },
  };
}

/** A channel's tool calls, paired with their results as the lines arrive. */
export function toolCallsOf(projection: HandleHost, id: string | null): AsyncIterable<ToolCall> {
  return {
    [Symbol.asyncIterator]: () => {
      const pairing = new ToolCallPairing();
      return projection.openReader<ToolCall>(
        'toolCalls',
        id,
        (value, _usage, feed) => {
          for (const call of pairing.take(value)) feed.push(call);
        },
        () => pairing.end(),
      );
    },
  };
}

