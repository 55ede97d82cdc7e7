import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Message, open, type RunEvent, type SubagentHandle, type ToolCall } from '../src/index.js';
import { RunModel, type Usage } from '../src/entry/model.js';
import { statusLine, summaryText } from '../src/views/summary.js';
import { checkDetails, checkOutput, chunked, FIXTURES, runToFiles, tmpDir } from './helpers/helpers.js';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';

const line = (v: Record<string, unknown>) => JSON.stringify(v);
const spawnLine = line({
  type: 'assistant',
  parent_tool_use_id: null,
  message: {
    id: 'm1',
    content: [{ type: 'tool_use', id: 'toolu_sub', name: 'Agent', input: { subagent_type: 'Explore' } }],
  },
});
const toolUse = (id: string) =>
  line({
    type: 'assistant',
    parent_tool_use_id: 'toolu_sub',
    message: {
      id: `m-${id}`,
      content: [{ type: 'tool_use', id, name: 'Bash', input: { command: 'false' } }],
    },
  });
const toolResult = (id: string, content: string, isError: boolean) =>
  line({
    type: 'user',
    parent_tool_use_id: 'toolu_sub',
    message: { content: [{ type: 'tool_result', tool_use_id: id, content, is_error: isError }] },
  });

test('a subagent still running when the input ends: its output and status say interrupted', async () => {
  // The stream stops mid-run: no task_notification, no result line.
  const input = Buffer.from([spawnLine, toolUse('toolu_a')].join('\n') + '\n');
  const run = open(chunked([input]));
  const handles: SubagentHandle[] = [];
  for await (const handle of run.subagents) handles.push(handle);
  const index = await run.done;
  assert.equal(handles.length, 1);
  const output = await handles[0].output;
  assert.equal(output.status, 'interrupted');
  assert.equal(output.error, null);
  assert.equal(handles[0].status, 'interrupted');
  // index.json keeps the tree's own word: the channel was still running.
  assert.equal(index.channels.find((c) => c.id === 'toolu_sub')?.status, 'running');
});

test('a subagent whose report came before its spawn line: the handle, index.json, the summary ' +
  'and a plain reading all say it ended as the report said', async () => {
  // Nested subagents, their spawn lines forwarded late: each report is on main before them.
  const nestedSpawn = (id: string, background: boolean) =>
    line({
      type: 'assistant',
      parent_tool_use_id: 'toolu_sub',
      message: {
        id: `m-${id}`,
        content: [{ type: 'tool_use', id, name: 'Agent', input: { run_in_background: background } }],
      },
    });
  const notice = (id: string, status: string, summary: string) =>
    line({ type: 'system', subtype: 'task_notification', tool_use_id: id, status, summary });
  const input = Buffer.from(
    [
      line({ type: 'system', subtype: 'init', session_id: 's', claude_code_version: '2.1.328' }),
      spawnLine,
      notice('toolu_failed', 'failed', 'Agent terminated early due to an API error'),
      toolResult('toolu_done', 'child report', false),
      nestedSpawn('toolu_failed', true),
      nestedSpawn('toolu_done', false),
      notice('toolu_sub', 'completed', 'all reported'),
      line({ type: 'result', subtype: 'success', is_error: false, result: 'ok' }),
    ].join('\n') + '\n',
  );
  const run = open(chunked([input]));
  const handles: SubagentHandle[] = [];
  for await (const handle of run.allSubagents) handles.push(handle);
  const index = await run.done;
  const expected = new Map([
    ['toolu_sub', ['completed', 'all reported']],
    ['toolu_failed', ['failed', 'Agent terminated early due to an API error']],
    ['toolu_done', ['completed', 'child report']],
  ]);
  assert.deepEqual(handles.map((h) => h.id).sort(), [...expected.keys()].sort());
  for (const handle of handles) {
    const outcome = await handle.outcome;
    const [status, summary] = expected.get(handle.id)!;
    assert.deepEqual([handle.status, outcome.status, outcome.summary], [status, status, summary], handle.id);
    assert.equal(handle.snapshot().status, status);
    const channel = index.channels.find((c) => c.id === handle.id)!;
    assert.deepEqual([channel.status, channel.summary], [status, summary], `index.json: ${handle.id}`);
  }
  await assert.rejects(handles.find((h) => h.id === 'toolu_failed')!.output, { status: 'failed' });
  assert.match(
    summaryText(run.session, 'out'),
    /^subtee: 3 subagents \(2 completed, 1 failed, 0 running\)/,
  );
  // The folder says the same as a plain reading of the stream, statuses and summaries included.
  const { out } = await runToFiles(input);
  const { index: written, expected: reading } = checkOutput(input, out, 'reports first');
  checkDetails(written, reading, 'reports first');
  assert.deepEqual(
    [...expected.keys()].map((id) => reading.channels.get(id)?.status),
    [...expected.values()].map(([status]) => status),
  );
});

test('a subagent the user stopped: the handle, its output, index.json, the summary and a plain reading ' +
  'all say stopped, and none calls it a failure', async () => {
  const at = (v: Record<string, unknown>, second: number) =>
    line({ ...v, timestamp: `2026-12-06T11:00:${String(second).padStart(2, '0')}.000Z` });
  const input = Buffer.from(
    [
      at({ type: 'system', subtype: 'init', session_id: 's', claude_code_version: '2.1.328' }, 0),
      at(JSON.parse(spawnLine), 1),
      at({ type: 'system', subtype: 'task_started', tool_use_id: 'toolu_sub', is_backgrounded: true }, 1),
      at(JSON.parse(toolUse('toolu_a')), 2),
      at({
        type: 'system',
        subtype: 'task_notification',
        tool_use_id: 'toolu_sub',
        status: 'stopped',
        summary: 'Task stopped by user',
      }, 5),
      at({ type: 'result', subtype: 'success', is_error: false, result: 'ok' }, 6),
    ].join('\n') + '\n',
  );
  const run = open(chunked([input]));
  const handles: SubagentHandle[] = [];
  for await (const handle of run.subagents) handles.push(handle);
  const index = await run.done;
  assert.equal(handles.length, 1);
  const [handle] = handles;
  const output = await handle.output;
  assert.deepEqual(
    [handle.status, output.status, output.summary, output.error, output.elapsedMs],
    ['stopped', 'stopped', 'Task stopped by user', null, 4_000],
  );
  const channel = index.channels.find((c) => c.id === 'toolu_sub')!;
  assert.deepEqual(
    [channel.status, channel.summary, channel.ended_at],
    ['stopped', 'Task stopped by user', '2026-12-06T11:00:05.000Z'],
  );
  const summary = summaryText(run.session, 'out').split('\n');
  assert.match(summary[0], /^subtee: 1 subagent \(0 completed, 0 failed, 1 stopped, 0 running\), /);
  assert.match(summary[3], /^└─ .*  stopped  depth 1 /);
  const counts = / · 0 running · 0 done · 0 failed · 1 stopped · 0 quarantined$/;
  assert.match(statusLine(run.session, 0), counts);
  const { out } = await runToFiles(input);
  const { index: written, expected: reading } = checkOutput(input, out, 'stopped');
  checkDetails(written, reading, 'stopped');
  assert.equal(reading.channels.get('toolu_sub')?.status, 'stopped');
});

test('a failed tool call: its error carries the text, its output none; a good one the reverse', async () => {
  const input = Buffer.from(
    [
      spawnLine,
      toolUse('toolu_bad'),
      toolResult('toolu_bad', 'exit status 1', true),
      toolUse('toolu_good'),
      toolResult('toolu_good', 'listed', false),
    ].join('\n') + '\n',
  );
  const run = open(chunked([input]));
  const calls: ToolCall[] = [];
  for await (const handle of run.subagents) for await (const call of handle.toolCalls) calls.push(call);
  await run.done;
  const settled = await Promise.all(
    calls.map(async (c) => [c.callId, await c.status, await c.output, await c.error]),
  );
  assert.deepEqual(settled, [
    ['toolu_bad', 'error', null, 'exit status 1'],
    ['toolu_good', 'finished', 'listed', null],
  ]);
});

// The projection while a run is still going: what a subagent's end settles at once, before the
// input ends, as a consumer reading live sees it. Lines go in one at a time through a real
// stream; the next one is written only once the projection has taken the one before.

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
      // Its path from the raw lines: who spawned whom, up to the main conversation.
      const path: string[] = [];
      for (let up: string | null = entry.handle.id; up !== null; up = parentOf.get(up) ?? null) {
        path.unshift(up);
      }
      assert.deepEqual(entry.handle.path, path);
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
      return (
        value.subtype === 'task_notification' &&
        value.tool_use_id === id &&
        /^(completed|failed)$/.test(value.status)
      );
    }
    const content = value.type === 'user' ? value.message.content : null;
    return (
      Array.isArray(content) &&
      content.some((block) => block.type === 'tool_result' && block.tool_use_id === id)
    );
  });
}

test('a reader replaying the .jsonl when its subagent ends reads every message, then ends', async () => {
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

/** open() with the default stages, its channel router pricing each model of `models` at one rate. */
function openPriced(input: string, models: string[]) {
  const prices = join(tmpDir(), 'prices.json');
  const rate = { input: 3, output: 15, cache_read: 0.3, cache_write_5m: 3.75, cache_write_1h: 3.75 };
  const rates = Object.fromEntries(models.map((model) => [model, rate]));
  writeFileSync(prices, JSON.stringify({ date: '2026-01-02', models: rates }));
  const stages = ['line-parser', 'input-format', 'version-guard', 'channel-router', 'thinking-truncator'].map(
    (use) => (use === 'channel-router' ? { use, prices } : { use }),
  );
  return open(Readable.from([Buffer.from(input)]), { spec: { stages, sinks: [] } });
}

test('whichever subagent has a model no price covers, every subtree above it costs null', async () => {
  const lines = fixtureLines('binary-tree-depth-3').filter((line) => !line.includes('"type":"result"'));
  const { parentOf } = plainReading(lines);
  const models = new Set<string>();
  for (const line of lines) {
    const value = JSON.parse(line);
    if (value.type === 'assistant') models.add(value.message.model);
  }
  const leaves = [...parentOf.keys()].filter((id) => ![...parentOf.values()].includes(id));
  assert.ok(leaves.length > 2);
  // Each leaf in turn: the walk over a subtree meets it first, last, or between priced ones.
  for (const unpriced of leaves) {
    const renamed = lines.map((line) => {
      const value = JSON.parse(line);
      if (value.type !== 'assistant' || value.parent_tool_use_id !== unpriced) return line;
      value.message.model = 'model-without-price';
      return JSON.stringify(value);
    });
    const run = openPriced(renamed.join('\n') + '\n', [...models]);
    const handles: SubagentHandle[] = [];
    for await (const handle of run.allSubagents) handles.push(handle);
    const output = await run.output;
    await run.done;
    assert.equal(output.subtree.cost.usd, null, unpriced);
    const ancestors = new Set<string>();
    for (let at: string | null = unpriced; at !== null; at = parentOf.get(at) ?? null) ancestors.add(at);
    for (const handle of handles) {
      const { subtree } = await handle.output;
      const why = `${handle.id} with ${unpriced} unpriced`;
      assert.equal(subtree.cost.usd === null, ancestors.has(handle.id), why);
    }
  }
});

test("a subagent first seen after another channel's buffer was given up replays from memory", async () => {
  const lines = fixtureLines('nested-depth-3');
  // The run stops at the first subagent's first model call: its lines alone would fit the buffer.
  const first = lines.findIndex((line) => {
    const value = JSON.parse(line);
    return value.type === 'assistant' && value.parent_tool_use_id;
  });
  const cut = lines.slice(0, first + 1);
  const maxBufferedBytes = 2000;
  // The first line alone is more than the buffer holds: main's buffer goes before any subagent is seen.
  assert.ok(Buffer.byteLength(cut[0]) > maxBufferedBytes);
  const subagentBytes = cut
    .filter((line) => JSON.parse(line).parent_tool_use_id)
    .reduce((sum, line) => sum + Buffer.byteLength(line) + 1, 0);
  assert.ok(subagentBytes > 0 && subagentBytes < maxBufferedBytes);
  const run = open(Readable.from([Buffer.from(cut.join('\n') + '\n')]), { maxBufferedBytes });
  const handles: SubagentHandle[] = [];
  for await (const handle of run.allSubagents) handles.push(handle);
  await run.done;
  assert.equal(handles.length, 1);
  const messages: Message[] = [];
  for await (const message of handles[0].messages) messages.push(message);
  assert.equal(messages.length, 1);
  await assert.rejects(async () => {
    for await (const _message of run.messages);
  }, (err: { code?: string }) => err.code === 'ERR_PROJECTION_BUFFER');
});

/** Every subagent's outcome of a run read from `input`, by id. */
async function outcomesOf(input: Readable): Promise<Map<string, unknown>> {
  const run = open(input);
  const handles: SubagentHandle[] = [];
  for await (const handle of run.allSubagents) handles.push(handle);
  await run.done;
  return new Map(await Promise.all(handles.map(async (h) => [h.id, await h.outcome] as const)));
}

for (const name of ['nested-depth-3', 'partial-messages', 'background-fanout-12']) {
  test(`a subagent's outcome is its figures as of the line it ended on, the same however fast ` +
    `the input is read: ${name}`, async () => {
    const text = readFileSync(join(FIXTURES, `${name}.jsonl`), 'utf8');
    const lines = text.split('\n').filter((line) => line.trim() !== '');
    // At once: the run model is far past each subagent's end (the result line too) by the time
    // the projection settles its outcome; a line a turn: it is not.
    const atOnce = await outcomesOf(chunked([Buffer.from(text)]));
    const trickled = await outcomesOf(
      Readable.from(
        (async function* () {
          for (const line of lines) {
            yield Buffer.from(line + '\n');
            await new Promise((resolve) => setImmediate(resolve));
          }
        })(),
      ),
    );
    assert.deepEqual(atOnce, trickled);
    // Independently: each channel's output tokens as the run model's usage events count them up
    // to the line of its status event, and whether a result line had come by then.
    const model = new RunModel();
    const output = new Map<string | null, number>();
    const atEnd = new Map<string, { output: number; result: boolean }>();
    let result = false;
    lines.forEach((line, at) => {
      const value = JSON.parse(line);
      const routed = model.take(value, at + 1);
      if (value.type === 'result') result = true;
      const id = routed.channel.id;
      if (routed.usage) output.set(id, (output.get(id) ?? 0) + routed.usage.tokens.output_tokens);
      for (const change of routed.changes) {
        const ended = change.channel.id;
        if (change.type === 'status' && ended !== null && !atEnd.has(ended)) {
          atEnd.set(ended, { output: output.get(ended) ?? 0, result });
        }
      }
    });
    assert.ok(atEnd.size > 0);
    for (const [id, end] of atEnd) {
      const outcome = atOnce.get(id) as { usage: Usage; cost: { basis: string } };
      assert.equal(outcome.usage.output_tokens ?? 0, end.output, id);
      assert.equal(outcome.cost.basis, end.result ? 'result' : 'table', id);
    }
  });
}
