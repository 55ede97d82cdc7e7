// The projection while a run is still going: what a subagent's end settles at once, before the
// input ends, as a consumer reading live sees it. Lines go in one at a time through a real
// stream; the next one is written only once the projection has taken the one before.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { open, type RunEvent, type SubagentHandle } from '../src/index.js';
import { FIXTURES, tmpDir } from './helpers.js';

/** Lines of a recorded fixture. */
function fixtureLines(name: string): string[] {
  return readFileSync(join(FIXTURES, `${name}.jsonl`), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '');
}

/** Resolves once `ready()` holds, checking after each turn of the event loop. */
async function until(ready: () => boolean): Promise<void> {
  while (!ready()) await new Promise((resolve) => setImmediate(resolve));
}

/** Who spawned whom and how many model calls each channel made, from the raw lines. */
function plainReading(lines: string[]) {
  const parentOf = new Map<string, string | null>();
  const calls = new Map<string, Set<string>>();
  for (const line of lines) {
    const value = JSON.parse(line);
    if (value.type !== 'assistant') continue;
    const channel = value.parent_tool_use_id ?? null;
    if (channel !== null) {
      if (!calls.has(channel)) calls.set(channel, new Set());
      calls.get(channel)!.add(value.message.id);
    }
    for (const block of value.message.content) {
      if (block.type === 'tool_use' && block.name === 'Agent') parentOf.set(block.id, channel);
    }
  }
  return { parentOf, calls };
}

/** What a live consumer of one handle has seen so far. */
interface Watched {
  handle: SubagentHandle;
  messages: number;
  messagesEnded: boolean;
  children: string[];
  childrenEnded: boolean;
  outputSettled: boolean;
  /** The input line count when the handle's status first left `running`. */
  endedAtLine: number | null;
}

test("a subagent's output, messages and subagents end when it does, while the run goes on", async () => {
  const lines = fixtureLines('nested-depth-3');
  const { parentOf, calls } = plainReading(lines);
  assert.equal(parentOf.size, 3);
  const input = new PassThrough();
  const run = open(input);
  let taken = 0;
  const events: RunEvent[] = [];
  const reading = (async () => {
    for await (const event of run.events) {
      events.push(event);
      taken = event.lineNo;
    }
  })();
  const watched = new Map<string, Watched>();
  const watch = (handle: SubagentHandle) => {
    const entry: Watched = {
      handle,
      messages: 0,
      messagesEnded: false,
      children: [],
      childrenEnded: false,
      outputSettled: false,
      endedAtLine: null,
    };
    watched.set(handle.id, entry);
    void handle.output.then(() => (entry.outputSettled = true));
    void (async () => {
      for await (const _message of handle.messages) entry.messages++;
      entry.messagesEnded = true;
    })();
    void (async () => {
      for await (const child of handle.subagents) entry.children.push(child.id);
      entry.childrenEnded = true;
    })();
  };
  const listing = (async () => {
    for await (const handle of run.allSubagents) watch(handle);
  })();
  for (let at = 0; at < lines.length; at++) {
    input.write(lines[at] + '\n');
    await until(() => taken === at + 1);
    for (const entry of watched.values()) {
      if (entry.endedAtLine !== null || entry.handle.status === 'running') continue;
      entry.endedAtLine = at + 1;
      // Its end is settled by the line that ended it, with lines of the run still to come.
      assert.ok(at + 1 < lines.length, entry.handle.id);
      assert.equal(entry.outputSettled, true, `output of ${entry.handle.id} settled at its end`);
      assert.equal(entry.messagesEnded, true, `messages of ${entry.handle.id} ended at its end`);
      assert.equal(entry.childrenEnded, true, `subagents of ${entry.handle.id} ended at its end`);
      assert.equal(entry.messages, calls.get(entry.handle.id)?.size ?? 0);
      const expected = [...parentOf].filter(([, parent]) => parent === entry.handle.id).map(([id]) => id);
      assert.deepEqual(entry.children, expected);
    }
  }
  input.end();
  await run.done;
  await reading;
  await listing;
  assert.equal(events.length, lines.length);
  assert.deepEqual([...watched.keys()].sort(), [...parentOf.keys()].sort());
  for (const entry of watched.values()) {
    assert.notEqual(entry.endedAtLine, null, entry.handle.id);
    assert.equal((await entry.handle.output).status, 'completed');
  }
});

/** The first line that ends subagent `id`: its tool_result, or a notification that it completed or failed. */
function endLineOf(lines: string[], id: string): number {
  return lines.findIndex((line) => {
    const value = JSON.parse(line);
    if (value.type === 'system') {
      return value.subtype === 'task_notification' && value.tool_use_id === id && /^(completed|failed)$/.test(value.status);
    }
    const content = value.type === 'user' ? value.message.content : null;
    return Array.isArray(content) && content.some((block) => block.type === 'tool_result' && block.tool_use_id === id);
  });
}

test('a reader still replaying the .jsonl when its subagent ends reads every message, then ends', async () => {
  const lines = fixtureLines('nested-depth-3');
  const { parentOf, calls } = plainReading(lines);
  // The innermost subagent: it has lines of its own before it ends.
  const leaf = [...parentOf.keys()].find((id) => ![...parentOf.values()].includes(id))!;
  const endAt = endLineOf(lines, leaf);
  assert.ok(endAt > 0 && endAt < lines.length - 1);
  const expected = calls.get(leaf)!.size;
  assert.ok(expected > 1);
  const input = new PassThrough();
  const run = open(input, { out: join(tmpDir(), 'out') });
  let taken = 0;
  const reading = (async () => {
    for await (const event of run.events) taken = event.lineNo;
  })();
  const handles = new Map<string, SubagentHandle>();
  const listing = (async () => {
    for await (const handle of run.allSubagents) handles.set(handle.id, handle);
  })();
  for (let at = 0; at < endAt; at++) {
    input.write(lines[at] + '\n');
    await until(() => taken === at + 1);
  }
  const handle = handles.get(leaf)!;
  assert.equal(handle.status, 'running');
  // The reader starts replaying the channel file; the line that ends the subagent goes in at once.
  const messages = handle.messages[Symbol.asyncIterator]();
  input.write(lines[endAt] + '\n');
  await until(() => taken === endAt + 1);
  assert.equal(handle.status, 'completed');
  let count = 0;
  for (let next = await messages.next(); !next.done; next = await messages.next()) count++;
  // Ended before the run did: the rest of the input is still to come.
  assert.equal(count, expected);
  input.end(lines.slice(endAt + 1).join('\n') + '\n');
  await run.done;
  await reading;
  await listing;
});
