/**
 * One `Message` per model call, as Deep Agents yields them. The CLI writes an API message as
 * several lines, one per content block, each with the same `message.id` and a copy of the
 * message's usage; a reader that took each line as a message would count that usage once per
 * block. Here the lines of one message (consecutive on their channel, as the channel router
 * counts usage) make one message whose blocks arrive as their lines do and whose usage is
 * counted once. User lines (a prompt, tool results) are no model call: their text reaches a
 * reader as tool calls' outputs and the subagent's description.
 */
import { EventEmitter, once } from 'node:events';
import {
  channelIdOf,
  isObject,
  isSyntheticMessage,
  lineTypeOf,
  nonEmpty,
  usageNumbers,
  type JsonObject,
  type Usage,
} from '../model/message.js';
import { CostLedger, type UsageEvent } from '../model/cost.js';
import { deepFreeze } from './feed.js';
import { lineContent } from '../model/content.js';
import { DISPLAY_DEFAULTS, type DisplayPolicy } from '../model/display.js';

/** A content block as the projection yields it: typed, frozen, field names in camelCase. */
export type MessageBlock =
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'thinking'; readonly text: string }
  | { readonly type: 'redacted_thinking' }
  | { readonly type: 'tool_use'; readonly id: string; readonly name: string; readonly input: unknown }
  | {
      readonly type: 'tool_result';
      readonly toolUseId: string;
      readonly text: string;
      readonly isError: boolean;
    };

/**
 * A line longer than the line parser holds (`maxLineBytes`): routed by its top-level scalar
 * members and the tool calls and results named in its content, whose input and text are never
 * read (`[…cut…]`), so a message on it shows those blocks alone. Where to read it whole.
 */
export interface LineCut {
  /** The line's length in bytes. */
  readonly bytes: number;
  /** The channel's `.jsonl` file, where the line is whole; null when no files are written. */
  readonly file: string | null;
}

/** Where a line's value carries its LineCut: a symbol, so no member of a JSON line can be it. */
export const LINE_CUT: unique symbol = Symbol('subtee.lineCut');

/** A copy of a too-long line's value (its scalar members) carrying its LineCut, not enumerable. */
export function withLineCut(value: JsonObject, cut: LineCut): JsonObject {
  return Object.defineProperty({ ...value }, LINE_CUT, { value: Object.freeze({ ...cut }) });
}

/** The LineCut a value carries: null for any line held whole. */
export function lineCutOf(value: JsonObject): LineCut | null {
  return (value as { [LINE_CUT]?: LineCut })[LINE_CUT] ?? null;
}

/** Values that arrive one by one: iterate for each as it comes, or await the whole. */
export interface LiveValues<T, Whole> extends AsyncIterable<T>, PromiseLike<Whole> {}

/** One model call of a channel: an assistant message, however many lines it took. */
export interface Message {
  /** Position of the message among its channel's messages (0 = the first). */
  readonly index: number;
  readonly channel: string | null;
  /** Always `assistant`: kept so code written against LangChain's messages reads the same. */
  readonly role: 'assistant';
  /** The API message id; null when the line has none. */
  readonly id: string | null;
  /** The timestamp of the message's first line. */
  readonly timestamp: string | null;
  /** Its blocks, from the first, as their lines arrive; awaited: all of them, once complete. */
  readonly blocks: LiveValues<MessageBlock, readonly MessageBlock[]>;
  /** Each text block's text as it arrives; awaited: the text blocks joined by newlines. */
  readonly text: LiveValues<string, string>;
  /**
   * The message's usage, counted once, as `index.json` counts its channel's: the numbers its
   * latest line states, with `output_tokens` as the cost ledger counts the message (a
   * `message_delta`'s exact figure when one came). Resolves when the message is complete;
   * null for a message with no id, no usage stated or a `<synthetic>` one (`index.json` counts none).
   */
  readonly usage: PromiseLike<Usage | null>;
  /**
   * Set when the message's line was longer than the line parser holds: a message of its own
   * (`id` null) whose blocks are its tool calls and results alone (the first 64), their input and
   * text `[…cut…]`, as they are in `toolCalls`; the line is whole in `file`.
   */
  readonly tooLong: LineCut | null;
}

/**
 * The typed blocks of an assistant or user line, frozen: what `lineContent` reads of it,
 * thinking as the run's display policy shows it.
 */
export function blocksOfLine(value: JsonObject, display: DisplayPolicy = DISPLAY_DEFAULTS): MessageBlock[] {
  const blocks: MessageBlock[] = [];
  for (const item of lineContent(value, display)) {
    switch (item.kind) {
      case 'prompt':
      case 'text':
        blocks.push({ type: 'text', text: item.text });
        break;
      case 'thinking':
        if (item.redacted) blocks.push({ type: 'redacted_thinking' });
        else blocks.push({ type: 'thinking', text: String(item.text) });
        break;
      case 'tool_use':
        blocks.push({ type: 'tool_use', id: item.id, name: item.name, input: item.input });
        break;
      case 'tool_result':
        blocks.push({
          type: 'tool_result',
          toolUseId: item.id,
          text: String(item.text),
          isError: item.isError,
        });
        break;
    }
  }
  return deepFreeze(blocks);
}

/** A message being assembled: its blocks so far, read from the first by any number of loops. */
class LiveMessage {
  private readonly blocks: MessageBlock[] = [];
  /** The usage its latest line states. */
  private stated: Record<string, number> | null = null;
  /** Its output tokens as the cost ledger counted them, line by line; null: never counted. */
  private output: number | null = null;
  private complete = false;
  /** Emits `change` when a block is added or the message completes; made when a loop first waits. */
  private changes: EventEmitter | null = null;
  private readonly completed: Promise<void>;
  private resolveCompleted!: () => void;
  readonly message: Message;

  /** `observed` runs when a program first awaits or iterates a part of the message. */
  constructor(
    index: number,
    channel: string | null,
    id: string | null,
    ts: string | null,
    cut: LineCut | null,
    observed: () => void,
  ) {
    this.completed = new Promise((resolve) => (this.resolveCompleted = resolve));
    const whole = () => {
      observed();
      return this.completed.then(() => Object.freeze(this.blocks.slice()));
    };
    const read = <T>(pick: (block: MessageBlock) => T | undefined) => {
      observed();
      return this.read(pick);
    };
    const blocks: Message['blocks'] = {
      [Symbol.asyncIterator]: () => read((b) => b),
      then: (onDone, onFail) => whole().then(onDone, onFail),
    };
    const text: Message['text'] = {
      [Symbol.asyncIterator]: () => read((b) => (b.type === 'text' ? b.text : undefined)),
      then: (onDone, onFail) => whole().then(joinedText).then(onDone, onFail),
    };
    const usage: Message['usage'] = {
      then: (onDone, onFail) =>
        whole()
          .then(() => this.usage(id))
          .then(onDone, onFail),
    };
    this.message = Object.freeze({
      index,
      channel,
      role: 'assistant',
      id,
      timestamp: ts,
      blocks: Object.freeze(blocks),
      text: Object.freeze(text),
      usage: Object.freeze(usage),
      tooLong: cut,
    });
  }

  add(value: JsonObject, display: DisplayPolicy): void {
    for (const block of blocksOfLine(value, display)) this.blocks.push(block);
    const message = value.message;
    // Every line of the message repeats its usage; the latest one stands, as in index.json,
    // which counts none of a <synthetic> message (no API call).
    if (isObject(message) && isObject(message.usage) && !isSyntheticMessage(message))
      this.stated = usageNumbers(message.usage);
    this.notify();
  }

  /** What the cost ledger counted for one of the message's lines (its delta included). */
  count(usage: UsageEvent): void {
    this.output = (this.output ?? 0) + usage.tokens.output_tokens;
  }

  private usage(id: string | null): Usage | null {
    if (id === null || this.stated === null) return null;
    const usage = { ...this.stated };
    if (this.output !== null) usage.output_tokens = this.output;
    return Object.freeze(usage) as Usage;
  }

  end(): void {
    if (this.complete) return;
    this.complete = true;
    this.resolveCompleted();
    this.notify();
  }

  private async *read<T>(pick: (block: MessageBlock) => T | undefined): AsyncGenerator<T> {
    for (let at = 0; ;) {
      if (at < this.blocks.length) {
        const picked = pick(this.blocks[at++]);
        if (picked !== undefined) yield picked;
      } else if (this.complete) {
        return;
      } else {
        if (!this.changes) {
          this.changes = new EventEmitter();
          // One listener per loop waiting on the message: how many is the program's to say.
          this.changes.setMaxListeners(0);
        }
        await once(this.changes, 'change');
      }
    }
  }

  private notify(): void {
    this.changes?.emit('change');
  }
}

const joinedText = (blocks: readonly MessageBlock[]): string =>
  blocks.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('\n');

/**
 * Turns one channel's lines, in order, into its messages. An assistant line with the id of
 * the channel's current assistant message adds to it, even past user lines: the CLI runs a
 * message's tool calls as their blocks arrive, so their results come between its lines. Any
 * other assistant line completes that message and starts the next.
 */
interface CurrentMessage {
  id: string | null;
  live: WeakRef<LiveMessage> | null;
  /** Set once a program awaits or iterates a part of the message. */
  kept: LiveMessage | null;
}

export class MessageAssembler {
  /**
   * The channel's current assistant message, held weakly until a program awaits or iterates
   * a part of it: one nobody looks at can go (with 2,000 subagents, each channel's last
   * message held strongly was 90 MB of large lines), one being awaited must stay.
   */
  private current: CurrentMessage | null = null;
  private count = 0;
  /**
   * Counts replayed lines, which carry no usage event, by the router's own rule: a cost ledger
   * over this channel's lines alone (a channel's figures depend on its own lines only).
   */
  private ledger: CostLedger | null = null;

  /** `display`: the run's display policy (`run.display`), read as each line is taken. */
  constructor(private readonly display: () => DisplayPolicy = () => DISPLAY_DEFAULTS) {}

  /**
   * The message the line starts, or null when it continues one (or is not a model call).
   * `usage`: what the cost ledger counted for the line as it was routed; undefined for a
   * line replayed, counted here the same way.
   */
  take(value: JsonObject, usage?: UsageEvent | null): Message | null {
    const counted = usage === undefined ? this.countAgain(value) : usage;
    const started = this.assemble(value);
    // The ledger's figure is its message's (a delta comes after its message's lines).
    if (counted && this.current !== null && counted.messageId === this.current.id) {
      this.current.live?.deref()?.count(counted);
    }
    return started;
  }

  private countAgain(value: JsonObject): UsageEvent | null {
    const ledger = (this.ledger ??= new CostLedger());
    try {
      return ledger.observe(value, channelIdOf(value));
    } catch {
      // The router counted this line as a failed record already.
      return null;
    }
  }

  private assemble(value: JsonObject): Message | null {
    if (lineTypeOf(value) !== 'assistant') return null;
    const message = isObject(value.message) ? value.message : {};
    const id = nonEmpty(message.id);
    const cut = lineCutOf(value);
    if (id !== null && cut === null && this.current?.id === id) {
      this.current.live?.deref()?.add(value, this.display());
      return null;
    }
    const slot: CurrentMessage = { id, live: null, kept: null };
    const ts = nonEmpty(value.timestamp);
    const live: LiveMessage = new LiveMessage(this.count++, channelIdOf(value), id, ts, cut, () => {
      slot.kept = live;
    });
    live.add(value, this.display());
    slot.live = new WeakRef(live);
    this.current?.live?.deref()?.end();
    this.current = slot;
    return live.message;
  }

  /** The channel ended (or the reader stopped): its last message is complete. */
  end(): void {
    this.current?.live?.deref()?.end();
    this.current = null;
  }
}
