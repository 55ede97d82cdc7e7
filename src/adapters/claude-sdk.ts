/**
 * The Claude Agent SDK (`@anthropic-ai/claude-agent-sdk`): `query()` returns an async iterable
 * of `SDKMessage` objects, which are Claude Code's stream-json objects (`parent_tool_use_id`
 * included), so they need no mapping: `open(query(…))` reads them through the object source.
 * subtee does not depend on the SDK; the types here are the few fields it relies on.
 */
import { once } from 'node:events';
import type { Writable } from 'node:stream';

/** What subtee reads of an SDK message; every `SDKMessage` has this shape. */
export interface SdkMessageLike {
  type: string;
  subtype?: string;
  parent_tool_use_id?: string | null;
  [field: string]: unknown;
}

/**
 * Passes the messages of a `query()` on unchanged while writing each as one JSON line to
 * `out`: the recording that `subtee FILE` later replays to the same `index.json` as the live
 * run. Waits for `out` to drain when it is slow, so a slow disk holds the run, not memory.
 */
export async function* teeJsonl<T>(messages: AsyncIterable<T>, out: Writable): AsyncGenerator<T> {
  for await (const message of messages) {
    if (!out.write(JSON.stringify(message) + '\n')) await once(out, 'drain');
    yield message;
  }
}
