import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { open } from '../../src/index.js';
import { readTree, linesOf } from '../helpers/helpers.js';
import type { ChatReading, ReadChannel } from '../helpers/chat-reading.js';
import type { ChatRequestLog } from './fake-chat.js';

/** What each scenario must show, read from the stream alone. */
export interface ChatExpectation {
  subagents: number;
  maxDepth: number;
  completed: number;
  failed: number;
  /** Exit codes of the shell commands, in the order the stream shows them, over every agent. */
  shellExits: number[];
  /** The main agent's last message. */
  lastText: string;
}

export const subagentsOf = (reading: ChatReading): ReadChannel[] =>
  [...reading.channels.values()].filter((c) => c.id !== null);

/** The scenario's shape, checked on the independent reading of a stream. */
export function checkReading(reading: ChatReading, expect: ChatExpectation, name: string): void {
  const subs = subagentsOf(reading);
  assert.equal(reading.notObjects.length, 0, `${name}: every line is a JSON object`);
  assert.equal(subs.length, expect.subagents, `${name}: subagents`);
  assert.equal(Math.max(0, ...subs.map((c) => c.depth)), expect.maxDepth, `${name}: max depth`);
  assert.equal(subs.filter((c) => c.status === 'completed').length, expect.completed, `${name}: completed`);
  assert.equal(subs.filter((c) => c.status === 'failed').length, expect.failed, `${name}: failed`);
  const main = reading.channels.get(null)!;
  assert.equal(main.status, 'completed', `${name}: main status`);
  assert.equal(main.lastText, expect.lastText, `${name}: main's last message`);
  const shells = [...reading.channels.values()].flatMap((c) => c.tools.filter((t) => t.name === 'bash'));
  assert.deepEqual(
    shells.map((t) => t.exitCode).sort(),
    [...expect.shellExits].sort(),
    `${name}: shell exit codes`,
  );
  assert.ok(
    shells.every((t) => t.failed === (t.exitCode !== 0)),
    `${name}: a shell call fails exactly when it exits non-zero`,
  );
}

/**
 * The token counts the scripted server sent for a conversation started by `prompt` and, when
 * `withDescendants`, for every subagent it started (their prompts come from the reading).
 */
export function serverTokens(
  log: readonly ChatRequestLog[],
  reading: ChatReading,
  channel: ReadChannel,
  withDescendants: boolean,
): { input: number; output: number; total: number } {
  const sum = { input: 0, output: 0, total: 0 };
  for (const request of log) {
    if (request.directive === channel.prompt && request.usage) {
      sum.input += request.usage.prompt_tokens;
      sum.output += request.usage.completion_tokens;
      sum.total += request.usage.total_tokens;
    }
  }
  if (withDescendants) {
    for (const child of reading.channels.values()) {
      if (child.id === null || child.parent !== channel.id) continue;
      const below = serverTokens(log, reading, child, true);
      sum.input += below.input;
      sum.output += below.output;
      sum.total += below.total;
    }
  }
  return sum;
}

/**
 * Nothing lost, nothing let in: every non-blank line of the stream is in exactly one channel
 * .jsonl or the quarantine, byte for byte.
 */
export function checkConservation(reading: ChatReading, out: string, name: string): any {
  const files = readTree(out);
  const index = JSON.parse(files.get('index.json')!.toString('utf8'));
  const written = [
    ...index.channels.flatMap((c: any) => (c.jsonl ? linesOf(files.get(c.jsonl)) : [])),
    ...linesOf(files.get('quarantine.log')),
  ];
  assert.deepEqual(written.sort(), [...reading.nonBlank].sort(), `${name}: conservation`);
  assert.equal(index.input.lines, reading.nonBlank.length, `${name}: input lines`);
  return index;
}

/**
 * subtee's index.json against the independent reading: channels, nesting, statuses, tool calls,
 * usage and each channel's lines.
 */
export function checkIndex(reading: ChatReading, out: string, name: string): any {
  const index = checkConservation(reading, out, name);
  const files = readTree(out);
  assert.equal(index.producer, reading.producer, `${name}: producer`);
  assert.equal(index.producer_version, reading.version, `${name}: producer version`);
  assert.equal(index.input.quarantined, 0, `${name}: nothing quarantined`);
  const got = new Map<string | null, any>(index.channels.map((c: any) => [c.id, c]));
  assert.deepEqual([...got.keys()].sort(), [...reading.channels.keys()].sort(), `${name}: channel ids`);
  for (const [id, expected] of reading.channels) {
    const channel = got.get(id);
    assert.deepEqual(
      { parent: channel.parent, depth: channel.depth, status: channel.status },
      { parent: expected.parent, depth: expected.depth, status: expected.status },
      `${name}: channel ${id}`,
    );
    // Copilot shows every agent's own events; opencode shows the main session's only.
    assert.deepEqual(
      channel.jsonl ? linesOf(files.get(channel.jsonl)) : [],
      expected.lines,
      `${name}: lines of ${id}`,
    );
    const finished = expected.tools.filter((tool) => tool.failed !== null).length;
    assert.equal(channel.counts.tool_use, expected.tools.length, `${name}: tool calls of ${id}`);
    assert.equal(channel.counts.tool_result, finished, `${name}: tool results of ${id}`);
    if (reading.producer === 'copilot' && id !== null) {
      assert.equal(channel.usage.total_tokens ?? 0, expected.usage.total, `${name}: tokens of ${id}`);
    }
    if (reading.producer === 'opencode' && id === null) {
      assert.equal(channel.usage.input_tokens ?? 0, expected.usage.input, `${name}: input tokens of main`);
      assert.equal(channel.usage.output_tokens ?? 0, expected.usage.output, `${name}: output tokens of main`);
    }
  }
  return index;
}

/**
 * The library's projection of the same bytes (`open()`): every agent's tool calls, by id, name
 * and how they ended (`error` exactly for the calls the reading saw fail: a shell command's
 * non-zero exit, a failed subagent), and each subagent's status.
 */
export async function checkProjection(reading: ChatReading, input: Buffer, name: string): Promise<void> {
  const run = open(Readable.from([input]));
  const seen = new Map<string | null, Array<{ id: string; name: string; status: string }>>();
  const statuses = new Map<string, string>();
  const follow = async (id: string | null, calls: AsyncIterable<any>) => {
    const list: Array<{ id: string; name: string; status: string }> = [];
    seen.set(id, list);
    const pending: Array<Promise<void>> = [];
    for await (const call of calls) {
      pending.push(
        (async () => void list.push({ id: call.id, name: call.name, status: await call.status }))(),
      );
    }
    await Promise.all(pending);
  };
  const followers: Array<Promise<void>> = [follow(null, run.toolCalls)];
  for await (const sub of run.allSubagents) {
    followers.push(follow(sub.id, sub.toolCalls));
    followers.push(sub.outcome.then((out: any) => void statuses.set(sub.id, out.status)));
  }
  await Promise.all(followers);
  await run.done;
  for (const [id, channel] of reading.channels) {
    const expected = channel.tools.map((tool) => ({
      id: tool.id,
      name: tool.name === 'task' ? 'Task' : tool.name,
      status: tool.failed ? 'error' : 'finished',
    }));
    const got = [...(seen.get(id) ?? [])].sort((a, b) => a.id.localeCompare(b.id));
    expected.sort((a, b) => a.id.localeCompare(b.id));
    assert.deepEqual(got, expected, `${name}: tool calls of ${id}`);
    if (id !== null) assert.equal(statuses.get(id), channel.status, `${name}: projected status of ${id}`);
  }
}
