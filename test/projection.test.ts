import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { test } from 'node:test';
import {
  open,
  type IndexDocument,
  type Message,
  type RunEvent,
  type RunProjection,
  type SubagentHandle,
} from '../src/index.js';
import { DEFAULT_STAGES } from '../src/entry/chain.js';
import { type Usage } from '../src/entry/model.js';
import { writeStream } from '../bench/gen.js';
import { checkProjection, expectedOf } from './helpers/projection-check.js';
import { ROOT, chunked, fixtureFiles, splitEvery, tmpDir } from './helpers/helpers.js';

for (const file of fixtureFiles()) {
  for (const mode of ['memory', 'files'] as const) {
    test(`projection of ${file.split('/').pop()} (${mode}) equals a plain reading of the stream`, async () => {
      const text = readFileSync(file, 'utf8');
      const out = mode === 'files' ? join(tmpDir(), 'out') : undefined;
      const run = open(chunked(splitEvery(Buffer.from(text), 4096)), { out });
      const { index } = await checkProjection(text, run);
      if (out) assert.deepEqual(index, JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')));
    });
  }
}

test('subtree totals roll usage and time up from every descendant', async () => {
  const text = readFileSync(join(fixtureFiles().find((f) => f.includes('nested-depth-3.'))!), 'utf8');
  const run = open(chunked([Buffer.from(text)]));
  const handles: SubagentHandle[] = [];
  for await (const h of run.allSubagents) handles.push(h);
  const top = handles.find((h) => h.depth === 1)!;
  const out = await top.output;
  const all = await Promise.all(handles.map((h) => h.output));
  // The subagents under it, counted from the paths: itself not among them; a leaf has none.
  const under = (h: SubagentHandle) => handles.filter((o) => o.id !== h.id && o.path.includes(h.id)).length;
  assert.equal(out.subtree.subagents, under(top));
  assert.equal(under(top), 2);
  for (const [at, h] of handles.entries()) assert.equal(all[at].subtree.subagents, under(h), h.id);
  assert.equal((await run.output).subtree.subagents, handles.length);
  assert.equal(
    out.subtree.tokens,
    all.reduce((n, o) => n + o.tokens, 0),
  );
  assert.ok(out.subtree.tokens > out.tokens);
  assert.ok((out.subtree.elapsedMs ?? -1) >= (out.elapsedMs ?? 0));
});

/** Lines of a fixture, for feeding one at a time. */
function fixtureLines(name: string): string[] {
  const file = fixtureFiles().find((f) => f.endsWith(`/${name}.jsonl`))!;
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '');
}

test('live: a handle arrives at its spawn, before its first message; messages as their lines arrive', async () => {
  const lines = fixtureLines('nested-depth-3');
  const input = new PassThrough();
  const run = open(input);
  const subs = run.subagents[Symbol.asyncIterator]();
  const spawnAt = lines.findIndex((l) => l.includes('"name":"Agent"'));
  const firstId = JSON.parse(lines[spawnAt]).message.content.find(
    (b: { name?: string }) => b.name === 'Agent',
  ).id;
  for (const l of lines.slice(0, spawnAt + 1)) input.write(l + '\n');
  const first = await subs.next();
  assert.equal(first.value?.id, firstId);
  // The subagent's own lines have not been written yet: its reader waits for them.
  const messages = first.value!.messages[Symbol.asyncIterator]();
  const pending = messages.next();
  // Its first message is its first model call: its prompt (a user line) is no message.
  const own = lines.findIndex((line, at) => {
    const value = JSON.parse(line);
    return at > spawnAt && value.type === 'assistant' && value.parent_tool_use_id === firstId;
  });
  for (const l of lines.slice(spawnAt + 1, own + 1)) input.write(l + '\n');
  const m = await pending;
  assert.equal((m.value as Message).channel, firstId);
  assert.equal((m.value as Message).index, 0);
  for (const l of lines.slice(own + 1)) input.write(l + '\n');
  input.end();
  await messages.return!();
  await run.done;
});

test('without files, a reader opened after the memory limit fails with a coded error naming it', async () => {
  const text = readFileSync(
    fixtureFiles().find((f) => f.includes('background-fanout-12'))!,
    'utf8',
  );
  // Small chunks: a handle's lines after the batch that spawned it are no longer held for its loop.
  const run = open(chunked(splitEvery(Buffer.from(text), 512)), { maxBufferedBytes: 2048 });
  const handles: SubagentHandle[] = [];
  for await (const h of run.subagents) handles.push(h);
  await run.done;
  // Buffers are given up channel by channel: a late reader of one no longer held fails.
  const refusals: Array<{ code?: string; message?: string }> = [];
  for (const handle of handles) {
    try {
      for await (const _m of handle.messages);
    } catch (err) {
      refusals.push(err as { code?: string; message?: string });
    }
  }
  assert.ok(refusals.length > 0);
  for (const err of refusals) {
    assert.ok(err.code === 'ERR_PROJECTION_BUFFER' && /2048/.test(err.message ?? ''), String(err.message));
  }
  // So does a late events loop: the run's records are no longer held either.
  await assert.rejects(
    async () => {
      for await (const _ev of run.events);
    },
    { code: 'ERR_PROJECTION_BUFFER' },
  );
  // With files written, the same late reader replays the channel from its .jsonl file.
  const withFiles = open(chunked([Buffer.from(text)]), { maxBufferedBytes: 2048, out: join(tmpDir(), 'o') });
  const late: SubagentHandle[] = [];
  for await (const h of withFiles.subagents) late.push(h);
  await withFiles.done;
  let count = 0;
  for await (const _m of late[0].messages) count++;
  assert.ok(count > 0);
});

/** A source of many small lines that counts how many were pulled. */
function countingSource(total: number) {
  const state = { pulled: 0 };
  const line = (i: number) =>
    JSON.stringify({
      type: 'assistant',
      message: { id: `m${i}`, content: [{ type: 'text', text: `line ${i}` }] },
    }) + '\n';
  const stream = Readable.from(
    (function* () {
      for (let i = 0; i < total; i++) {
        state.pulled++;
        yield Buffer.from(line(i));
      }
    })(),
    { objectMode: false, highWaterMark: 1 },
  );
  return { stream, state };
}

test('backpressure: a slow reader holds the input; a projection nobody reads holds nothing', async () => {
  const total = 3000;
  const slow = countingSource(total);
  const run = open(slow.stream, { readerHighWaterLines: 20 });
  let seen = 0;
  let maxLead = 0;
  for await (const _m of run.messages) {
    seen++;
    maxLead = Math.max(maxLead, slow.state.pulled - seen);
    await new Promise((resolve) => setImmediate(resolve));
  }
  await run.done;
  assert.equal(seen, total);
  // Lead = the reader's high-water mark plus what the streams between hold (a few batches).
  assert.ok(maxLead < 500, `input ran ${maxLead} lines ahead of the reader`);

  const idle = countingSource(total);
  const unread = open(idle.stream, { readerHighWaterLines: 20 });
  const handles = unread.subagents; // taken, never iterated
  assert.ok(handles);
  await unread.done;
  assert.equal(idle.state.pulled, total);
});

test('break releases a reader: the run then finishes with nobody reading', async () => {
  const source = countingSource(3000);
  const run = open(source.stream, { readerHighWaterLines: 10 });
  for await (const _m of run.messages) break;
  await run.done;
  assert.equal(source.state.pulled, 3000);
});

test('iterators end and done rejects with the coded error when the run is aborted', async () => {
  const input = new PassThrough();
  const controller = new AbortController();
  const run = open(input, { signal: controller.signal });
  // Events are those routed after the loop starts: start it before writing.
  const events = run.events[Symbol.asyncIterator]();
  input.write(fixtureLines('nested-depth-3').slice(0, 3).join('\n') + '\n');
  const first = await events.next();
  assert.equal(first.done, false);
  const subs: SubagentHandle[] = [];
  const reading = (async () => {
    for await (const h of run.subagents) subs.push(h);
  })();
  controller.abort();
  await reading;
  await assert.rejects(run.done, (err: { name?: string }) => err.name === 'AbortError');
  for (;;) if ((await events.next()).done) break;
});

test('values are frozen snapshots: an event keeps the status it carried', async () => {
  const text = readFileSync(
    fixtureFiles().find((f) => f.includes('failing-beside-healthy'))!,
    'utf8',
  );
  const run = open(chunked([Buffer.from(text)]));
  const statuses: Array<{ id: string | null; status: string; event: { channel: { status: string } } }> = [];
  const messages: Message[] = [];
  const reading = (async () => {
    for await (const m of run.messages) messages.push(m);
  })();
  for await (const ev of run.events) {
    for (const change of ev.changes) {
      if (change.type === 'status')
        statuses.push({ id: change.channel.id, status: change.channel.status, event: change });
    }
  }
  await reading;
  await run.done;
  assert.ok(statuses.length >= 2);
  for (const s of statuses) {
    assert.equal(s.event.channel.status, s.status);
    assert.ok(Object.isFrozen(s.event.channel));
  }
  assert.ok(messages.length > 0);
  for (const m of messages) {
    const blocks = await m.blocks;
    assert.ok(Object.isFrozen(m) && Object.isFrozen(blocks) && blocks.every((b) => Object.isFrozen(b)));
    assert.throws(() => ((m as unknown as { text: string }).text = 'changed'));
  }
});

test('the changes of an event are frozen, so a loop cannot alter what another loop sees', async () => {
  const run = open(chunked([readFileSync(join(ROOT, 'test', 'fixtures', 'nested-depth-3.jsonl'))]));
  let changed = 0;
  for await (const ev of run.events) {
    if (ev.changes.length === 0) continue;
    assert.ok(Object.isFrozen(ev.changes) && ev.changes.every((c) => Object.isFrozen(c)));
    assert.throws(() => (ev.changes as unknown as unknown[]).push({}));
    assert.throws(() => ((ev.changes[0] as { type: string }).type = 'TAMPERED'));
    changed++;
  }
  await run.done;
  assert.ok(changed > 0);
  const later: string[] = [];
  for await (const ev of run.events) for (const c of ev.changes) later.push(c.type);
  assert.ok(later.length > 0 && !later.includes('TAMPERED'));
});

test('interleave merges projections in arrival order, each value tagged', async () => {
  const text = readFileSync(
    fixtureFiles().find((f) => f.includes('foreground-fanout-3'))!,
    'utf8',
  );
  const run = open(chunked(splitEvery(Buffer.from(text), 512)));
  const seen: string[] = [];
  for await (const [name, item] of run.interleave('messages', 'subagents')) {
    seen.push(name === 'subagents' ? `sub:${(item as SubagentHandle).id}` : 'message');
  }
  await run.done;
  assert.equal(seen.filter((s) => s.startsWith('sub:')).length, 3);
  // The first subagent is seen after the main message that spawned it.
  assert.ok(seen.indexOf('message') < seen.findIndex((s) => s.startsWith('sub:')));
});

/** Each numeric usage field summed over a channel's messages, each awaited once complete. */
async function usageOfMessages(messages: AsyncIterable<Message>): Promise<Record<string, number>> {
  const sum: Record<string, number> = {};
  for await (const m of messages) {
    const usage: Usage | null = await m.usage;
    for (const [key, n] of Object.entries(usage ?? {})) sum[key] = (sum[key] ?? 0) + (n ?? 0);
  }
  return sum;
}

for (const file of fixtureFiles()) {
  const name = file.split('/').pop();
  test(`usage summed over each channel's messages equals its index.json usage: ${name}`, async () => {
    const run = open(chunked(splitEvery(readFileSync(file), 4096)));
    const sums = new Map<string | null, Promise<Record<string, number>>>();
    sums.set(null, usageOfMessages(run.messages));
    for await (const sub of run.allSubagents) sums.set(sub.id, usageOfMessages(sub.messages));
    const index = await run.done;
    assert.equal(sums.size, index.channels.length);
    for (const channel of index.channels) {
      // A message's usage is its lines' (the message_start snapshot for output tokens);
      // index.json's output tokens are the true or estimated ones unless the basis is `stream`.
      const { output_tokens: output, ...usage } = await sums.get(channel.id)!;
      const { output_tokens: indexOutput, ...indexUsage } = channel.usage;
      assert.deepEqual(usage, indexUsage, `channel ${channel.id ?? 'main'}`);
      if (index.cost.output_tokens === 'stream') assert.equal(output, indexOutput);
    }
  });
}

test('one message per API message: its blocks arrive as its lines do, from the first', async () => {
  const lines = fixtureLines('binary-tree-depth-3');
  // The first API message of main written as several lines (one per block).
  const first = JSON.parse(lines.find((l) => l.includes('"type":"assistant"'))!);
  const blockLines = lines.filter((l) => l.includes(`"id":"${first.message.id}"`));
  assert.ok(blockLines.length >= 2, 'the fixture writes a message as several lines');
  const input = new PassThrough();
  const run = open(input);
  const messages = run.messages[Symbol.asyncIterator]();
  const upTo = lines.indexOf(blockLines[0]);
  input.write(lines.slice(0, upTo + 1).join('\n') + '\n');
  let next = await messages.next();
  while ((next.value as Message).role !== 'assistant') next = await messages.next();
  const message = next.value as Message;
  assert.equal(message.id, first.message.id);
  // The first block is there before the message's other lines are written.
  const blocks = message.blocks[Symbol.asyncIterator]();
  assert.equal((await blocks.next()).done, false);
  const rest = blocks.next();
  input.write(lines.slice(upTo + 1).join('\n') + '\n');
  input.end();
  assert.equal((await rest).done, false);
  assert.equal((await message.blocks).length, blockLines.length);
  for (let m = await messages.next(); !m.done; m = await messages.next()) {
    assert.notEqual((m.value as Message).id, first.message.id, 'no second message with the same id');
  }
  await run.done;
});

test('cause names the spawning call as LangChain does: { type: "toolCall", tool_call_id }', async () => {
  const run = open(fixtureFiles().find((f) => f.includes('nested-depth-3.'))!);
  for await (const sub of run.allSubagents) {
    assert.deepEqual({ ...sub.cause }, { type: 'toolCall', tool_call_id: sub.id });
  }
  await run.done;
});

/** A Deep Agents program, as written for Deep Agents: top-level handles, nested ones from each. */
async function deepAgentsWalk(run: RunProjection): Promise<string[]> {
  const visited: string[] = [];
  const walk = async (sub: SubagentHandle): Promise<void> => {
    visited.push(sub.cause.tool_call_id);
    const children: Promise<void>[] = [];
    for await (const nested of sub.subagents) children.push(walk(nested));
    await Promise.all(children);
  };
  const top: Promise<void>[] = [];
  for await (const sub of run.subagents) top.push(walk(sub));
  await Promise.all(top);
  return visited;
}

for (const file of fixtureFiles()) {
  test(`a Deep Agents walk meets every subagent exactly once: ${file.split('/').pop()}`, async () => {
    const run = open(file);
    const visited = await deepAgentsWalk(run);
    const index = await run.done;
    const ids = index.channels.flatMap((c) => (c.id === null ? [] : [c.id]));
    assert.equal(visited.length, new Set(visited).size, 'visited twice');
    assert.deepEqual([...visited].sort(), [...ids].sort());
    const top = index.channels.filter((c) => c.id !== null && (c.parent === null || c.orphan));
    const seenTop: string[] = [];
    const again = open(file);
    for await (const sub of again.subagents) seenTop.push(sub.id);
    await again.done;
    assert.deepEqual(seenTop.sort(), top.map((c) => c.id).sort());
  });
}

test("run.output: the result line's result, cost, turns, duration, usage; a failure's error", async () => {
  const file = fixtureFiles().find((f) => f.includes('failing-beside-healthy'))!;
  const results = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.includes('"type":"result"'))
    .map((l) => JSON.parse(l));
  const result = results.at(-1);
  assert.ok(results.length >= 3, 'a run of several turns');
  const sum = (read: (line: { num_turns: number; duration_ms: number; usage: Usage }) => number) =>
    results.reduce((total, line) => total + read(line), 0);
  const run = open(file);
  const outputs: Array<Awaited<SubagentHandle['output']>> = [];
  for await (const sub of run.allSubagents) outputs.push(await sub.outcome);
  const output = await run.output;
  await run.done;
  assert.equal(output.status, 'completed');
  assert.equal(output.result, result.result);
  // The whole run: Claude Code's running total of dollars, every turn's turns, time and usage.
  assert.equal(output.costUsd, result.total_cost_usd);
  assert.equal(output.turns, sum((line) => line.num_turns));
  assert.equal(output.durationMs, sum((line) => line.duration_ms));
  assert.equal(output.usage?.input_tokens, sum((line) => line.usage.input_tokens ?? 0));
  assert.equal(output.usage?.output_tokens, sum((line) => line.usage.output_tokens ?? 0));
  assert.equal(output.results, results.length);
  // The last result line's own figures, under their own name.
  assert.deepEqual(
    { ...output.lastResult, usage: output.lastResult?.usage?.input_tokens },
    {
      costUsd: result.total_cost_usd,
      turns: result.num_turns,
      durationMs: result.duration_ms,
      usage: result.usage.input_tokens,
    },
  );
  assert.equal(output.error, null);
  assert.ok(Object.isFrozen(output));
  const failed = outputs.filter((o) => o.status === 'failed');
  const healthy = outputs.filter((o) => o.status === 'completed');
  assert.ok(failed.length > 0 && healthy.length > 0);
  for (const o of failed) assert.match(o.error ?? '', /scripted failure/);
  for (const o of healthy) assert.equal(o.error, null);
});

for (const mode of ['memory', 'files'] as const) {
  test(`events replay from the run's first record for a loop that starts late (${mode})`, async () => {
    const dir = tmpDir();
    // Many subagents at once: with files, more channel files than a late loop keeps open.
    const generated = join(dir, 'fanout.jsonl');
    await writeStream({ sizeBytes: 2 * 1024 * 1024, fanout: 100, shape: 'small', seed: 5 }, generated);
    for (const file of [fixtureFiles().find((f) => f.includes('nested-depth-3.'))!, generated]) {
      const run = open(file, { out: mode === 'files' ? join(dir, `out-${file.length}`) : undefined });
      const early: RunEvent[] = [];
      const reading = (async () => {
        for await (const ev of run.events) early.push(ev);
      })();
      await run.done;
      await reading;
      const late: RunEvent[] = [];
      for await (const ev of run.events) late.push(ev);
      assert.ok(early.length > 0);
      assert.deepEqual(late, early);
      // The kind narrows the event: a line event has its line and channel.
      const types = late.flatMap((ev) => (ev.kind === 'line' ? [ev.line.type] : []));
      assert.equal(types.length, late.filter((ev) => ev.kind === 'line').length);
      assert.ok(types.every((type) => typeof type === 'string'));
    }
  });
}

test('an abort is recorded in index.json as an interrupt: interrupted, channels running', async () => {
  const lines = fixtureLines('nested-depth-3');
  const input = new PassThrough();
  const controller = new AbortController();
  const out = join(tmpDir(), 'out');
  const run = open(input, { signal: controller.signal, out });
  const subs = run.allSubagents[Symbol.asyncIterator]();
  const spawnAt = lines.findIndex((l) => l.includes('"name":"Agent"'));
  input.write(lines.slice(0, spawnAt + 1).join('\n') + '\n');
  const first = await subs.next();
  assert.equal(first.done, false);
  controller.abort();
  await assert.rejects(run.done, { name: 'AbortError', code: 'ABORT_ERR' });
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')) as IndexDocument;
  assert.equal(index.interrupted, true);
  assert.equal(index.channels.find((c) => c.id === first.value!.id)?.status, 'running');
  assert.equal((await subs.next()).done, true);
});

const STALL_TEST = { timeout: 20_000 };
test('a reader holding the input while its loop awaits a later thing is warned of', STALL_TEST, async () => {
  const source = countingSource(3000);
  const run = open(source.stream, { readerHighWaterLines: 20, readerStallMs: 50 });
  const warned = new Promise<{ code: string }>((resolve) => run.session.onWarning(resolve));
  const messages = run.messages[Symbol.asyncIterator]();
  await messages.next(); // the loop holds its reader, as one awaiting a later subagent would
  assert.equal((await warned).code, 'READER_STALLED');
  await messages.return!();
  const index = await run.done;
  assert.deepEqual(
    index.warnings.map((w) => w.code),
    ['READER_STALLED'],
  );
  assert.equal(source.state.pulled, 3000);
});

/** The README's way: every handle's messages opened as the handle is yielded, nested ones too. */
async function readAtOnce(run: RunProjection): Promise<Map<string | null, string[]>> {
  const texts = new Map<string | null, string[]>();
  const read = async (id: string | null, messages: AsyncIterable<Message>) => {
    const mine: string[] = [];
    texts.set(id, mine);
    for await (const m of messages) mine.push(await m.text);
  };
  const follow = async (sub: SubagentHandle): Promise<void> => {
    const nested: Promise<void>[] = [];
    const spawning = (async () => {
      for await (const child of sub.subagents) nested.push(follow(child));
    })();
    await read(sub.id, sub.messages);
    await spawning;
    await Promise.all(nested);
  };
  const main = read(null, run.messages);
  const top: Promise<void>[] = [];
  for await (const sub of run.subagents) top.push(follow(sub));
  await Promise.all([main, ...top]);
  return texts;
}

const BIG_RUN = { sizeBytes: 3 * 1024 * 1024, fanout: 24, shape: 'small', seed: 11 } as const;
test('a file several times maxBufferedBytes: messages read at once never need a replay', async () => {
  const dir = tmpDir();
  const file = join(dir, 'big.jsonl');
  const { bytes } = await writeStream(BIG_RUN, file);
  const maxBufferedBytes = Math.floor(bytes / 6);
  const { perChannel } = expectedOf(readFileSync(file, 'utf8'));
  for (const input of ['path', 'one chunk'] as const) {
    const run = open(input === 'path' ? file : chunked([readFileSync(file)]), { maxBufferedBytes });
    const texts = await readAtOnce(run);
    const index = await run.done;
    assert.equal(texts.size, index.channels.length, input);
    for (const [id, expected] of perChannel) assert.deepEqual(texts.get(id), expected.texts, `${id} (${input})`);

    // Late: channels whose buffer was kept replay whole; the others fail with the coded error.
    let replayed = 0;
    let refused = 0;
    for await (const sub of run.allSubagents) {
      try {
        const late: string[] = [];
        for await (const m of sub.messages) late.push(await m.text);
        assert.deepEqual(late, perChannel.get(sub.id)!.texts);
        replayed++;
      } catch (err) {
        assert.equal((err as { code?: string }).code, 'ERR_PROJECTION_BUFFER', String(err));
        refused++;
      }
    }
    assert.ok(replayed > 0 && refused > 0, `${replayed} replayed, ${refused} refused (${input})`);
  }
  // With files written, every late reader replays its channel from the .jsonl file.
  const run = open(file, { maxBufferedBytes, out: join(dir, 'out') });
  await readAtOnce(run);
  await run.done;
  for await (const sub of run.allSubagents) {
    const late: string[] = [];
    for await (const m of sub.messages) late.push(await m.text);
    assert.deepEqual(late, perChannel.get(sub.id)!.texts);
  }
});

test("a subagent's messages show thinking as --thinking says: drop leaves it out, keep shows it whole", async () => {
  const file = join(ROOT, 'test', 'fixtures', 'nested-depth-3.jsonl');
  const thought = 'Worker leaf plans: echo, then report.';
  const thinkingOf = async (mode: string) => {
    const stages = DEFAULT_STAGES.map((s) => (s.use === 'thinking-truncator' ? { ...s, mode } : { ...s }));
    const run = open(file, { spec: { stages, sinks: [] } });
    const seen: string[] = [];
    for await (const handle of run.allSubagents)
      for await (const message of handle.messages)
        for (const block of await message.blocks) if (block.type === 'thinking') seen.push(block.text);
    await run.done;
    return seen;
  };
  assert.deepEqual(await thinkingOf('keep'), [thought]);
  assert.deepEqual(await thinkingOf('drop'), []);
  assert.deepEqual(await thinkingOf('file'), [`(${thought.length} chars, in the .thinking.log beside this transcript)`]);
});

for (const file of fixtureFiles()) {
  const name = file.split('/').pop();
  test(`each subagent's outputTokens basis is its channel's, as index.json names it: ${name}`, async () => {
    const run = open(file);
    const handles: SubagentHandle[] = [];
    for await (const handle of run.allSubagents) handles.push(handle);
    const index = await run.done;
    for (const handle of handles) {
      const channel = index.channels.find((c) => c.id === handle.id)!;
      const { cost } = await handle.outcome;
      assert.equal(cost.outputTokens, channel.cost.basis, handle.id);
      if (channel.cost.basis === 'unknown') assert.equal(cost.usd, null, handle.id);
    }
    assert.equal((await run.output).cost.outputTokens, index.cost.output_tokens);
  });
}
