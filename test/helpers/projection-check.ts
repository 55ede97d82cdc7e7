import assert from 'node:assert/strict';
import type { RunProjection, SubagentHandle } from '../../src/index.js';
import { readStream } from './oracle.js';

/** What a reader of the raw stream expects per channel, written plainly from the lines. */
export function expectedOf(text: string) {
  const oracle = readStream(text);
  const parse = (line: string) => JSON.parse(line);
  const perChannel = new Map<
    string | null,
    { texts: string[]; calls: Map<string, string | null>; usage: number }
  >();
  for (const [id, ch] of oracle.channels) {
    const messageParts: string[][] = [];
    const calls = new Map<string, string | null>();
    const lastUsage = new Map<string, number>();
    // One message per model call: an assistant line with the id of the channel's assistant
    // message before it adds its text to that message, even past user lines (tool results),
    // which are no messages of their own: their text reaches a reader as a tool call's output.
    let current = null as { id: string | null; at: number } | null;
    for (const value of ch.lines.map(parse)) {
      if (value.type !== 'assistant' && value.type !== 'user') continue;
      const id = value.message?.id ? String(value.message.id) : null;
      const same = value.type === 'assistant' && id !== null && current?.id === id;
      if (value.type === 'assistant' && !same) current = { id, at: messageParts.length };
      const content = value.message?.content;
      const parts = typeof content === 'string' ? [content] : [];
      for (const b of Array.isArray(content) ? content : []) {
        if (b?.type === 'text' && typeof b.text === 'string') parts.push(b.text);
        if (value.type === 'assistant' && b?.type === 'tool_use') calls.set(b.id, null);
        if (b?.type === 'tool_result' && calls.has(b.tool_use_id) && b.is_error !== true) {
          const c = b.content;
          calls.set(
            b.tool_use_id,
            typeof c === 'string' ? c : c.map((x: { text?: string }) => x.text ?? '').join('\n'),
          );
        }
      }
      if (value.type === 'user') continue;
      if (same) messageParts[current!.at].push(...parts);
      else messageParts.push(parts);
      const u = value.message?.usage;
      if (value.type === 'assistant' && u && value.message.id) {
        lastUsage.set(value.message.id, (u.input_tokens ?? 0) + (u.output_tokens ?? 0));
      }
    }
    let usage = 0;
    for (const n of lastUsage.values()) usage += n;
    perChannel.set(id, { texts: messageParts.map((parts) => parts.join('\n')), calls, usage });
  }
  return { oracle, perChannel };
}

function pathOf(oracle: ReturnType<typeof readStream>, id: string): string[] {
  const path: string[] = [];
  for (let at: string | null = id; at !== null; at = oracle.channels.get(at)?.parent ?? null)
    path.unshift(at);
  return path;
}

export async function collect(run: RunProjection) {
  const subs: Array<{ handle: SubagentHandle; texts: string[]; calls: Map<string, string | null> }> = [];
  for await (const handle of run.allSubagents) {
    const texts: string[] = [];
    for await (const m of handle.messages) texts.push(await m.text);
    const calls = new Map<string, string | null>();
    for await (const call of handle.toolCalls) calls.set(call.id, await call.output);
    subs.push({ handle, texts, calls });
  }
  const main: string[] = [];
  for await (const m of run.messages) main.push(await m.text);
  return { subs, main, index: await run.done };
}

/** Reads everything a run projects and checks it against a plain reading of the raw text. */
export async function checkProjection(text: string, run: RunProjection) {
  return checkCollected(text, await collect(run));
}

export async function checkCollected(text: string, collected: Awaited<ReturnType<typeof collect>>) {
  const { oracle, perChannel } = expectedOf(text);
  const { subs, main, index } = collected;
  const expectedIds = [...oracle.channels.keys()].filter((id) => id !== null);
  assert.deepEqual(subs.map((s) => s.handle.id).sort(), [...expectedIds].sort());
  for (const { handle, texts, calls } of subs) {
    const o = oracle.channels.get(handle.id)!;
    const e = perChannel.get(handle.id)!;
    assert.equal(handle.name, o.agent, handle.id);
    assert.equal(handle.depth, o.depth, handle.id);
    assert.deepEqual(handle.path, pathOf(oracle, handle.id));
    assert.equal(handle.status, o.status === 'running' ? 'interrupted' : o.status);
    assert.deepEqual(texts, e.texts);
    assert.deepEqual(calls, e.calls);
    const output = await handle.outcome;
    assert.equal(output.tokens, e.usage, `usage of ${handle.id}`);
    assert.equal(output.lines, o.lines.length);
  }
  assert.deepEqual(main, perChannel.get(null)!.texts);
  const channels = (index as { channels: Array<{ id: string | null }> }).channels;
  assert.equal(channels.length, oracle.channels.size);
  return { index, subagents: subs.length };
}
