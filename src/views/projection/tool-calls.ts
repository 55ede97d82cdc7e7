/** Tool calls paired with their results on one channel's lines. */
import {
  asBlock,
  channelIdOf,
  isObject,
  lineTypeOf,
  nonEmpty,
  rawBlocks,
  resultText,
  type JsonObject,
} from '../../model/message.js';
import { deepFreeze } from '../feed.js';
import type { ToolCall, ToolCallStatus } from './types.js';


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

