import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { test } from 'node:test';
import {
  type IndexDocument,
  type Message,
  open,
  type RunEvent,
  type RunProjection,
  type SubagentHandle,
  type ToolCall,
} from '../src/index.js';
import { DEFAULT_STAGES } from '../src/entry/chain.js';
import { RunModel, type Usage } from '../src/entry/model.js';
import { writeStream } from '../bench/gen.js';
import { checkProjection, expectedOf } from './helpers/projection-check.js';
import {
  chunked,
  fixtureFiles,
  FIXTURES,
  processWarnings,
  ROOT,
  splitEvery,
  tmpDir,
} from './helpers/helpers.js';
import { readStream } from './helpers/oracle.js';
import { bufferedBytes, fixtureLines, HANG, longMainRun, STALL, until } from './helpers/projection-runs.js';

for (const file of fixtureFiles()) {
  for (const mode of ['memory', 'files'] as const) {
    test(`projection of ${file.split('/').pop()} (${mode}) equals a plain reading of the ` +
      `stream`, async () => {
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
test('live: a handle arrives at its spawn, before its ' +
  'first message; messages as their lines arrive', async () => {
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
  test(`usage summed over each channel's messages equals its index.json usage, ` +
    `read live or replayed: ${name}`, async () => {
    const run = open(chunked(splitEvery(readFileSync(file), 4096)));
    const sums = new Map<string | null, Promise<Record<string, number>>>();
    sums.set(null, usageOfMessages(run.messages));
    const handles = new Map<string | null, { messages: AsyncIterable<Message> }>([[null, run]]);
    for await (const sub of run.allSubagents) {
      sums.set(sub.id, usageOfMessages(sub.messages));
      handles.set(sub.id, sub);
    }
    const index = await run.done;
    assert.equal(sums.size, index.channels.length);
    // Output tokens as the run model's usage events count them (each API message once, a
    // message_delta's exact figure), by an independent run of the model over the lines.
    const model = new RunModel();
    const eventOutput = new Map<string | null, number>();
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((text, at) => {
        if (text.trim() === '') return;
        const routed = model.take(JSON.parse(text), at + 1);
        const id = routed.channel.id;
        if (routed.usage) eventOutput.set(id, (eventOutput.get(id) ?? 0) + routed.usage.tokens.output_tokens);
      });
    for (const channel of index.channels) {
      const name = `channel ${channel.id ?? 'main'}`;
      const live = await sums.get(channel.id)!;
      // Replayed from memory after the run: counted again by the same rule.
      const late = await usageOfMessages(handles.get(channel.id)!.messages);
      assert.deepEqual(late, live, name);
      const { output_tokens: output, ...usage } = live;
      const { output_tokens: indexOutput, ...indexUsage } = channel.usage;
      assert.deepEqual(usage, indexUsage, name);
      // index.json's output is the ledger's: the events' sum, unless the result line estimated it.
      assert.equal(output ?? 0, eventOutput.get(channel.id) ?? indexOutput ?? 0, name);
      if (channel.cost.basis !== 'estimated') assert.equal(output, indexOutput, name);
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

test('a message read by 1,000 loops at once gives every loop each block in order, ' +
  'with no listener-leak warning', async () => {
  const warnings = processWarnings();
  const lines = fixtureLines('binary-tree-depth-3');
  const first = JSON.parse(lines.find((l) => l.includes('"type":"assistant"'))!);
  const upTo = lines.findIndex((l) => l.includes(`"id":"${first.message.id}"`));
  const input = new PassThrough();
  const run = open(input);
  input.write(lines.slice(0, upTo + 1).join('\n') + '\n');
  // The loop on messages stays open: it is what feeds the message its lines.
  const messages = run.messages[Symbol.asyncIterator]();
  let message = (await messages.next()).value as Message;
  while (message.id !== first.message.id) message = (await messages.next()).value as Message;
  // Every loop waits for the message's second block before it is written.
  const loops = Array.from({ length: 1000 }, async () => {
    const seen = [];
    for await (const block of message.blocks) seen.push(block);
    return seen;
  });
  input.end(lines.slice(upTo + 1).join('\n') + '\n');
  const all = await message.blocks;
  assert.ok(all.length >= 2);
  for (const seen of await Promise.all(loops)) assert.deepEqual(seen, all);
  while (!(await messages.next()).done);
  await run.done;
  assert.deepEqual(await warnings.settled(), []);
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
  const warned = run.session.warningAt(run.session.warnings.length);
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
    for (const [id, expected] of perChannel)
      assert.deepEqual(texts.get(id), expected.texts, `${id} (${input})`);

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

test("a subagent's messages show thinking as --thinking says: drop leaves it out, keep shows it " +
  "whole", async () => {
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
  const note = `(${thought.length} chars, in the .thinking.log beside this transcript)`;
  assert.deepEqual(await thinkingOf('file'), [note]);
});

for (const file of fixtureFiles()) {
  const name = file.split('/').pop();
  test(`each subagent's outputTokens basis is its channel's when it ended; the run's, index.json's: ` +
    `${name}`, async () => {
    const run = open(file);
    const handles: SubagentHandle[] = [];
    for await (const handle of run.allSubagents) handles.push(handle);
    const index = await run.done;
    // Independently: the run model over the lines, each channel's basis read at its first end.
    const model = new RunModel();
    const atEnd = new Map<string, string>();
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((text, at) => {
        if (text.trim() === '') return;
        for (const change of model.take(JSON.parse(text), at + 1).changes) {
          const id = change.channel.id;
          if (change.type !== 'status' || id === null || atEnd.has(id)) continue;
          atEnd.set(id, model.cost.channelCost(id)?.basis ?? 'unknown');
        }
      });
    for (const handle of handles) {
      const channel = index.channels.find((c) => c.id === handle.id)!;
      const { cost } = await handle.outcome;
      // A subagent that never ended is settled at the run's end, with index.json's figures.
      assert.equal(cost.outputTokens, atEnd.get(handle.id) ?? channel.cost.basis, handle.id);
      if (cost.outputTokens === 'unknown') assert.equal(cost.usd, null, handle.id);
    }
    assert.equal((await run.output).cost.outputTokens, index.cost.output_tokens);
  });
}

// The projection's tool-call pairing, its growing lists and record log, and how a reader starts
// (replayed, then live): inputs a plain reading of the fixtures does not reach.

const input = (lines: string[]) => Buffer.from(lines.join('\n') + '\n');

/** The main channel's tool calls of a run, each settled, with its streamed input deltas. */
async function mainCalls(run: ReturnType<typeof open>) {
  const calls: ToolCall[] = [];
  for await (const call of run.toolCalls) calls.push(call);
  await run.done;
  return Promise.all(
    calls.map(async (call) => {
      const deltas: string[] = [];
      for await (const delta of call.inputDeltas) deltas.push(delta);
      return { id: call.id, deltas, status: await call.status, output: await call.output };
    }),
  );
}

/** A plain reading: the `partial_json` strings streamed for the tool_use block that opened as `id`. */
function streamedParts(lines: string[], id: string): string[] {
  let index: unknown;
  const parts: string[] = [];
  for (const line of lines) {
    const value = JSON.parse(line);
    if (value.type !== 'stream_event') continue;
    const event = value.event;
    if (event.type === 'content_block_start' && event.content_block.id === id) index = event.index;
    if (event.type === 'content_block_delta' && event.index === index) parts.push(event.delta.partial_json);
  }
  return parts;
}

/** The main channel's two streamed Agent calls in partial-messages: line numbers of their events. */
function partialMessagesShape(lines: string[]) {
  const values = lines.map((line) => JSON.parse(line));
  const starts = values.flatMap((value, at) =>
    value.type === 'stream_event' && value.event.type === 'content_block_start' &&
    value.event.content_block.type === 'tool_use' ? [at] : [],
  );
  const [first, second] = starts.map((at) => values[at].event.content_block.id as string);
  const deltasOf = (at: number) =>
    values.flatMap((value, line) =>
      value.type === 'stream_event' && value.event.type === 'content_block_delta' &&
      value.event.index === values[at].event.index ? [line] : [],
    );
  const [firstDeltas, secondDeltas] = [deltasOf(starts[0]), deltasOf(starts[1])];
  return { values, starts, first, second, firstDeltas, secondDeltas };
}

test('tool-call input deltas follow their block index when two blocks stream interleaved', async () => {
  const lines = fixtureLines('partial-messages');
  const { starts, first, second, firstDeltas, secondDeltas } = partialMessagesShape(lines);
  assert.equal(firstDeltas.length, secondDeltas.length);
  // Both blocks start, then their deltas alternate, all before the first call's assistant line.
  const moved = new Set([starts[1], ...secondDeltas]);
  const interleaved = firstDeltas.flatMap((at, k) => [lines[at], lines[secondDeltas[k]]]);
  const reordered: string[] = [];
  for (let at = 0; at < lines.length; at++) {
    if (moved.has(at) || firstDeltas.includes(at)) continue;
    reordered.push(lines[at]);
    if (at === starts[0]) reordered.push(lines[starts[1]], ...interleaved);
  }
  assert.equal(reordered.length, lines.length);
  const expected = { [first]: streamedParts(lines, first), [second]: streamedParts(lines, second) };
  assert.equal(expected[first].length, 6);
  assert.notDeepEqual(expected[first], expected[second]);
  for (const out of [undefined, join(tmpDir(), 'out')]) {
    const calls = await mainCalls(open(chunked([input(reordered)]), { out }));
    assert.deepEqual(
      Object.fromEntries(calls.filter((call) => call.id in expected).map((call) => [call.id, call.deltas])),
      expected,
    );
  }
});

test('malformed stream events beside a streamed tool call are skipped: its deltas stay whole', async () => {
  const lines = fixtureLines('partial-messages');
  const { values, starts, first, firstDeltas } = partialMessagesShape(lines);
  const sample = values[firstDeltas[0]];
  const index = sample.event.index;
  const eventLine = (event: unknown) => JSON.stringify({ ...sample, event });
  const serverTool = { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: {} };
  const noted = { type: 'tool_use', id: 'toolu_noted', name: 'Bash', input: {} };
  const jsonDelta = (partial: unknown) => ({ type: 'input_json_delta', partial_json: partial });
  const malformed = [
    eventLine(null),
    eventLine([1, 2]),
    eventLine({ type: 'content_block_start', index, content_block: null }),
    eventLine({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: '' } }),
    eventLine({ type: 'content_block_delta', index, delta: null }),
    eventLine({ type: 'content_block_delta', index, delta: jsonDelta(42) }),
    eventLine({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: 'not json' } }),
    // Only a tool_use block re-points its index; an event of another type carries no input delta.
    eventLine({ type: 'content_block_start', index, content_block: serverTool }),
    eventLine({ type: 'content_block_note', index, content_block: noted, delta: jsonDelta('"x"') }),
  ];
  // A delta that comes after its call's assistant line is not the call's: the call opened without it.
  const opened = values.findIndex(
    (value) => value.type === 'assistant' && JSON.stringify(value).includes(first),
  );
  const late = eventLine({ type: 'content_block_delta', index, delta: jsonDelta('}') });
  const broken = [
    ...lines.slice(0, firstDeltas[1]),
    ...malformed,
    ...lines.slice(firstDeltas[1], opened + 1),
    late,
    ...lines.slice(opened + 1),
  ];
  assert.ok(starts.length >= 2 && opened > firstDeltas.at(-1)!);
  for (const out of [undefined, join(tmpDir(), 'out')]) {
    const calls = await mainCalls(open(chunked(splitEvery(input(broken), 997)), { out }));
    const call = calls.find((each) => each.id === first)!;
    assert.deepEqual(call.deltas, streamedParts(lines, first));
    assert.equal(call.status, 'finished');
  }
});

test('only assistant lines open tool calls, whatever other fields a line carries', async () => {
  const lines = fixtureLines('partial-messages');
  const values = lines.map((line) => JSON.parse(line));
  const calling = values.findIndex((value) =>
    value.type === 'assistant' && value.parent_tool_use_id == null &&
    value.message.content.some((block: { type: string }) => block.type === 'tool_use'),
  );
  // A user line holding a tool_use block (as a resent prompt might) is no call; an assistant
  // line with a field named `event` is still an assistant line.
  const use = { type: 'tool_use', id: 'toolu_in_user_line', name: 'Bash', input: { command: 'ls' } };
  const user = { ...values[calling], type: 'user', message: { role: 'user', content: [use] } };
  const marked = { ...values[calling], event: { type: 'message_start', index: 0 } };
  const changed = [
    ...lines.slice(0, calling),
    JSON.stringify(user),
    JSON.stringify(marked),
    ...lines.slice(calling + 1),
  ];
  // A plain reading: the ids of tool_use blocks in main assistant lines, each once.
  const expected = new Set<string>();
  for (const value of changed.map((line) => JSON.parse(line))) {
    if (value.type !== 'assistant' || value.parent_tool_use_id != null) continue;
    for (const block of value.message.content) if (block.type === 'tool_use') expected.add(block.id);
  }
  assert.ok(expected.size >= 2 && !expected.has(use.id));
  const calls = await mainCalls(open(chunked([input(changed)])));
  assert.deepEqual(calls.map((call) => call.id).sort(), [...expected].sort());
  assert.ok(calls.every((call) => call.status === 'finished'));
});

// The projection's edges that a plain reading of the fixtures does not reach: readers that start
// late and replay a channel's `.jsonl`, readers that stop early, and what the handles report.

test('a stalled reader is named in the warning: what it reads, of which channel', STALL, async () => {
  const input = longMainRun(3000);
  const run = open(chunked([input]), { readerHighWaterLines: 20, readerStallMs: 50 });
  const warned = run.session.warningAt(run.session.warnings.length);
  const calls = run.toolCalls[Symbol.asyncIterator]();
  const messages = run.messages[Symbol.asyncIterator]();
  await messages.next();
  const warning = await warned;
  assert.equal(warning.code, 'READER_STALLED');
  assert.match(warning.message, /for messages of main[,:]/);
  assert.doesNotMatch(warning.message, /toolCalls/);
  await messages.return!();
  await calls.return!();
  await run.done;
});

/** Every tool call of a stream as a plain reading of its lines settles it, per channel. */
function expectedCalls(lines: string[]) {
  const calls = new Map<string, { channel: string | null; name: string; input: unknown; deltas: string[] }>();
  const settled = new Map<string, { status: string; output: string | null; error: string | null }>();
  const streaming = new Map<string, string>();
  const deltas = new Map<string, string[]>();
  for (const line of lines) {
    const value = JSON.parse(line);
    const channel = value.parent_tool_use_id ?? null;
    if (value.type === 'stream_event') {
      const event = value.event;
      const key = `${channel}:${value.api_message_id}:${event.index}`;
      if (event.type === 'content_block_start' && event.content_block.type === 'tool_use') {
        streaming.set(key, event.content_block.id);
        deltas.set(event.content_block.id, []);
      }
      if (event.type === 'content_block_delta' && typeof event.delta.partial_json === 'string') {
        deltas.get(streaming.get(key)!)?.push(event.delta.partial_json);
      }
      continue;
    }
    const content = Array.isArray(value.message?.content) ? value.message.content : [];
    for (const block of content) {
      if (value.type === 'assistant' && block.type === 'tool_use' && !calls.has(block.id)) {
        const streamed = deltas.get(block.id) ?? [];
        calls.set(block.id, { channel, name: block.name, input: block.input, deltas: streamed });
      }
      if (block.type === 'tool_result' && calls.has(block.tool_use_id) && !settled.has(block.tool_use_id)) {
        const text =
          typeof block.content === 'string'
            ? block.content
            : block.content.map((part: { text: string }) => part.text).join('\n');
        settled.set(
          block.tool_use_id,
          block.is_error === true
            ? { status: 'error', output: null, error: text }
            : { status: 'finished', output: text, error: null },
        );
      }
    }
  }
  return [...calls].map(([id, call]) => ({
    id,
    ...call,
    ...(settled.get(id) ?? { status: 'interrupted', output: null, error: null }),
  }));
}

/** Every tool call a run projects, on every channel, settled, in the order of `expectedCalls`. */
async function projectedCalls(run: ReturnType<typeof open>) {
  const readers = [run.toolCalls];
  for await (const handle of run.allSubagents) readers.push(handle.toolCalls);
  const calls: ToolCall[] = [];
  for (const reader of readers) for await (const call of reader) calls.push(call);
  await run.done;
  return Promise.all(
    calls.map(async (call) => {
      assert.equal(call.callId, call.id);
      const deltas: string[] = [];
      for await (const delta of call.inputDeltas) deltas.push(delta);
      return {
        id: call.id,
        channel: call.channel,
        name: call.name,
        input: call.input,
        deltas,
        status: await call.status,
        output: await call.output,
        error: await call.error,
      };
    }),
  );
}

const byId = <T extends { id: string }>(list: T[]) => [...list].sort((a, b) => a.id.localeCompare(b.id));

test('tool calls carry the input deltas streamed before them, as a plain reading finds them', async () => {
  const lines = fixtureLines('partial-messages');
  const expected = expectedCalls(lines);
  assert.ok(expected.filter((call) => call.deltas.length > 0).length >= 2);
  for (const call of expected.filter((each) => each.deltas.length > 0)) {
    assert.deepEqual(JSON.parse(call.deltas.join('')), call.input);
  }
  for (const out of [undefined, join(tmpDir(), 'out')]) {
    const run = open(chunked([Buffer.from(lines.join('\n') + '\n')]), { out });
    assert.deepEqual(byId(await projectedCalls(run)), byId(expected));
  }
});

test('a failed tool call settles as error with its text; an unanswered one as interrupted', async () => {
  // The recording with one tool result turned into a failure, and the run cut before the last
  // subagent call's result: every way a call can settle, on main and on subagents.
  const lines = fixtureLines('nested-depth-3');
  const isResult = (line: string) => line.includes('"tool_result"');
  const failing = lines.findIndex((line) => isResult(line) && JSON.parse(line).parent_tool_use_id != null);
  const value = JSON.parse(lines[failing]);
  for (const block of value.message.content) if (block.type === 'tool_result') block.is_error = true;
  // A result whose call was never seen (the stream was picked up midway) settles nothing.
  const orphan = structuredClone(value);
  for (const block of orphan.message.content) {
    if (block.type === 'tool_result') block.tool_use_id = 'toolu_unseen';
  }
  lines.splice(failing, 1, JSON.stringify(value), JSON.stringify(orphan));
  // A tool_use line seen twice (a resent line) is still one call; a block subtee does not know
  // (a server tool's call) is no tool call.
  const use = lines.findIndex((line) => {
    const parsed = JSON.parse(line);
    return parsed.parent_tool_use_id != null && line.includes('"tool_use"') && !line.includes('"Agent"');
  });
  const server = JSON.parse(lines[use]);
  const serverCall = { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: {} };
  server.message.content.unshift(serverCall);
  lines.splice(use, 1, JSON.stringify(server), lines[use]);
  const lastResult = lines.length - 1 - [...lines].reverse().findIndex(isResult);
  const cut = lines.slice(0, lastResult);
  const expected = expectedCalls(cut);
  const statuses = new Set(expected.map((call) => call.status));
  assert.deepEqual([...statuses].sort(), ['error', 'finished', 'interrupted']);
  for (const out of [undefined, join(tmpDir(), 'out')]) {
    const run = open(chunked([Buffer.from(cut.join('\n') + '\n')]), { out });
    assert.deepEqual(byId(await projectedCalls(run)), byId(expected));
  }
});

test('run.output with no result line is interrupted; a failed one gives its errors, or subtype', async () => {
  const lines = fixtureLines('foreground-fanout-3');
  const results = lines.filter((line) => JSON.parse(line).type === 'result');
  const before = lines.filter((line) => JSON.parse(line).type !== 'result');
  const failedWith = (fields: Record<string, unknown>) => {
    const value = { ...JSON.parse(results[results.length - 1]), is_error: true, ...fields };
    delete value.result;
    for (const [key, field] of Object.entries(fields)) if (field === undefined) delete value[key];
    return JSON.stringify(value);
  };
  const outputOf = async (input: string[]) => {
    const run = open(chunked([Buffer.from(input.join('\n') + '\n')]));
    const output = await run.output;
    await run.done;
    return output;
  };
  const cut = await outputOf(before);
  assert.equal(cut.status, 'interrupted');
  const figures = [cut.result, cut.error, cut.costUsd, cut.turns, cut.durationMs, cut.usage];
  assert.deepEqual(figures, [null, null, null, null, null, null]);
  const withErrors = failedWith({ subtype: 'error_during_execution', errors: ['one', 2, 'two'] });
  const errors = await outputOf([...before, withErrors]);
  assert.equal(errors.status, 'failed');
  assert.equal(errors.error, 'one\ntwo');
  assert.equal(errors.result, null);
  const subtype = await outputOf([...before, failedWith({ subtype: 'error_max_turns', errors: [] })]);
  assert.equal(subtype.error, 'error_max_turns');
  const bareLine = failedWith({ subtype: undefined, errors: undefined, usage: 'none' });
  const bare = await outputOf([...before, bareLine]);
  assert.equal(bare.error, 'failed');
  assert.equal(bare.usage, null);
  // The channels' figures are there whatever the result line says.
  assert.equal(bare.subtree.subagents, cut.subtree.subagents);
  assert.ok(cut.subtree.tokens > 0);
});

for (const name of ['failing-beside-healthy', 'binary-tree-depth-3', 'background-fanout-12']) {
  test(`each handle's output and subtree equal a plain reading of the stream: ${name}`, async () => {
    const text = readFileSync(join(FIXTURES, `${name}.jsonl`), 'utf8');
    const oracle = readStream(text);
    // Cut before the result lines and the last notifications: some subagents never end.
    const lines = text.split('\n').filter((line) => line.trim() !== '');
    const cut = lines.slice(0, Math.floor(lines.length * 0.8));
    const partial = readStream(cut.join('\n') + '\n');
    for (const [input, expected] of [
      [lines, oracle],
      [cut, partial],
    ] as const) {
      const run = open(chunked([Buffer.from(input.join('\n') + '\n')]));
      const handles: SubagentHandle[] = [];
      for await (const handle of run.allSubagents) handles.push(handle);
      await run.done;
      const outputs = new Map(await Promise.all(handles.map(async (h) => [h.id, await h.outcome] as const)));
      const parsed = input.map((line): any => {
        try {
          return JSON.parse(line);
        } catch {
          return null;
        }
      });
      const under = (id: string): string[] => [
        id,
        ...[...expected.channels.values()].filter((ch) => ch.parent === id).flatMap((ch) => under(ch.id!)),
      ];
      for (const handle of handles) {
        const channel = expected.channels.get(handle.id)!;
        const output = outputs.get(handle.id)!;
        const status = channel.status === 'running' ? 'interrupted' : channel.status;
        assert.equal(output.status, status, handle.id);
        assert.equal(handle.status, status);
        assert.equal(output.summary, channel.summary);
        assert.equal(output.error, channel.status === 'failed' ? (channel.summary ?? 'failed') : null);
        assert.equal(output.lines, channel.lines.length);
        assert.equal(handle.background, channel.background);
        assert.deepEqual(handle.cause, { type: 'toolCall', tool_call_id: handle.id });
        assert.equal(handle.snapshot().id, handle.id);
        const subtree = under(handle.id);
        assert.equal(output.subtree.subagents, subtree.length - 1, `subagents under ${handle.id}`);
        const tokens = subtree.reduce((sum, id) => sum + outputs.get(id)!.tokens, 0);
        assert.equal(output.subtree.tokens, tokens);
        const seen = subtree.flatMap((id) => [outputs.get(id)!.firstSeen, outputs.get(id)!.lastSeen]);
        const stamps = seen.filter((stamp): stamp is string => stamp !== null).sort();
        assert.equal(output.subtree.firstSeen, stamps[0] ?? null);
        assert.equal(output.subtree.lastSeen, stamps.at(-1) ?? null);
        // Its time runs from its spawn line to its report.
        const spawnLine = parsed.find((v) =>
          v?.message?.content?.some?.((b: any) => b?.type === 'tool_use' && b.id === handle.id),
        );
        if (typeof spawnLine?.timestamp === 'string') assert.equal(output.startedAt, spawnLine.timestamp);
        if (output.startedAt && output.endedAt) {
          assert.equal(output.elapsedMs, Date.parse(output.endedAt) - Date.parse(output.startedAt));
        }
      }
    }
  });
}

test('a slow live reader holds an input of many-line chunks: it leads by what streams hold', async () => {
  const total = 20_000;
  const perChunk = 50;
  const state = { pulled: 0 };
  const line = (at: number) =>
    JSON.stringify({
      type: 'assistant',
      message: { id: `m${at}`, content: [{ type: 'text', text: `line ${at}` }] },
    });
  const chunks = function* () {
    for (let at = 0; at < total; at += perChunk) {
      const lines = Array.from({ length: perChunk }, (_, offset) => line(at + offset));
      state.pulled += perChunk;
      yield Buffer.from(lines.join('\n') + '\n');
    }
  };
  const input = Readable.from(chunks(), { objectMode: false, highWaterMark: 1 });
  const run = open(input, { readerHighWaterLines: 20 });
  let seen = 0;
  let maxLead = 0;
  for await (const _message of run.messages) {
    seen++;
    maxLead = Math.max(maxLead, state.pulled - seen);
    await new Promise((resolve) => setImmediate(resolve));
  }
  await run.done;
  assert.equal(seen, total);
  // The lead is bounded by the chunks the streams between hold, not by the input's length.
  assert.ok(maxLead < total / 4, `input ran ${maxLead} lines ahead of the reader`);
});

/** The spawning `Agent` tool_use blocks of a stream, by id, read from its lines. */
function spawnInputs(lines: string[]): Map<string, { description?: string; subagent_type?: string }> {
  const spawns = new Map<string, { description?: string; subagent_type?: string }>();
  for (const line of lines) {
    const value = JSON.parse(line);
    if (value.type !== 'assistant') continue;
    for (const block of value.message.content) {
      if (block.type === 'tool_use' && block.name === 'Agent') spawns.set(block.id, block.input);
    }
  }
  return spawns;
}

test('a subagent whose failure notification has no summary ' +
  'fails with "failed"; handles name their spawn', async () => {
  // A background worker's notification turned into a failure that carries no summary.
  const lines = fixtureLines('background-fanout-12');
  const at = lines.findIndex((line) => line.includes('"task_notification"'));
  const notification = JSON.parse(lines[at]);
  notification.status = 'failed';
  delete notification.summary;
  lines[at] = JSON.stringify(notification);
  const spawns = spawnInputs(lines);
  assert.equal(spawns.size, 12);
  const run = open(chunked([Buffer.from(lines.join('\n') + '\n')]));
  const handles: SubagentHandle[] = [];
  for await (const handle of run.allSubagents) handles.push(handle);
  await run.done;
  assert.deepEqual(handles.map((handle) => handle.id).sort(), [...spawns.keys()].sort());
  for (const handle of handles) {
    const spawn = spawns.get(handle.id)!;
    assert.equal(handle.description, spawn.description);
    assert.equal(handle.name, spawn.subagent_type);
    const output = await handle.outcome;
    if (handle.id === notification.tool_use_id) {
      assert.equal(output.status, 'failed');
      assert.equal(output.summary, null);
      assert.equal(output.error, 'failed');
      await assert.rejects(handle.output, { code: 'ERR_SUBAGENT_FAILED', error: 'failed', summary: null });
    } else {
      assert.equal(await handle.output, output);
      assert.equal(output.status, 'completed');
      assert.equal(output.error, null);
    }
  }
});

/** Test rates, USD per million tokens: both cache writes alike, so their 5m/1h split does not matter. */
const TEST_RATES = { input: 3, output: 15, cache_read: 0.3, cache_write_5m: 3.75, cache_write_1h: 3.75 };

/** A channel's dollars at TEST_RATES from its usage (each API message once, its last line's). */
function dollarsOf(usage: Record<string, number>): number {
  return (
    ((usage.input_tokens ?? 0) * TEST_RATES.input +
      (usage.output_tokens ?? 0) * TEST_RATES.output +
      (usage.cache_read_input_tokens ?? 0) * TEST_RATES.cache_read +
      (usage.cache_creation_input_tokens ?? 0) * TEST_RATES.cache_write_5m) /
    1e6
  );
}

/** open() with the default stages, its channel router pricing every model of `models` at TEST_RATES. */
function openPriced(input: Buffer, models: string[]) {
  const prices = join(tmpDir(), 'prices.json');
  const rates = Object.fromEntries(models.map((model) => [model, TEST_RATES]));
  writeFileSync(prices, JSON.stringify({ date: '2026-01-02', models: rates }));
  const stages = ['line-parser', 'input-format', 'version-guard', 'channel-router', 'thinking-truncator'].map(
    (use) => (use === 'channel-router' ? { use, prices } : { use }),
  );
  return open(chunked([input]), { spec: { stages, sinks: [] } });
}

test('a subagent output prices its own tokens, and its subtree adds up those under it', async () => {
  // Cut before the result line: the dollars are the price table's, not Claude Code's.
  const text = readFileSync(join(FIXTURES, 'binary-tree-depth-3.jsonl'), 'utf8');
  const lines = text.split('\n').filter((line) => line.trim() !== '' && !line.includes('"type":"result"'));
  const oracle = readStream(lines.join('\n') + '\n');
  const models = new Set<string>();
  for (const line of lines) {
    const value = JSON.parse(line);
    if (value.type === 'assistant') models.add(value.message.model);
  }
  const run = openPriced(Buffer.from(lines.join('\n') + '\n'), [...models]);
  const handles: SubagentHandle[] = [];
  for await (const handle of run.allSubagents) handles.push(handle);
  await run.done;
  assert.equal(handles.length, oracle.channels.size - 1);
  const under = (id: string): string[] => [
    id,
    ...[...oracle.channels.values()].filter((ch) => ch.parent === id).flatMap((ch) => under(ch.id!)),
  ];
  for (const handle of handles) {
    const output = await handle.output;
    const usage = oracle.channels.get(handle.id)!.usage;
    assert.deepEqual(output.usage, usage);
    const own = dollarsOf(usage);
    assert.ok(own > 0);
    assert.ok(Math.abs(output.cost.usd! - own) < 1e-12, `${handle.id}: ${output.cost.usd} for ${own}`);
    assert.deepEqual({ ...output.cost, usd: 0 }, { usd: 0, basis: 'table', outputTokens: 'stream' });
    const subtree = under(handle.id).reduce((sum, id) => sum + dollarsOf(oracle.channels.get(id)!.usage), 0);
    assert.ok(Math.abs(output.subtree.cost.usd! - subtree) < 1e-12, `${handle.id} subtree`);
  }
});

test('a stalled tool-call reader of a subagent is named: toolCalls of its id', STALL, async () => {
  const lines = fixtureLines('binary-tree-depth-3');
  const input = new PassThrough();
  // One queued call is all a reader may hold: the subagent's two calls put the input on hold.
  const run = open(input, { readerHighWaterLines: 1, readerStallMs: 50 });
  const warned = run.session.warningAt(run.session.warnings.length);
  // Also a process warning: a program stuck this way may print nothing else.
  const processWarned = new Promise<Error & { code?: string }>((resolve) => process.once('warning', resolve));
  const subagents = run.subagents[Symbol.asyncIterator]();
  const spawnAt = lines.findIndex((line) => line.includes('"name":"Agent"'));
  input.write(lines.slice(0, spawnAt + 1).join('\n') + '\n');
  const handle = (await subagents.next()).value as SubagentHandle;
  const ownCalls = lines.flatMap((line) => {
    const value = JSON.parse(line);
    if (value.type !== 'assistant' || value.parent_tool_use_id !== handle.id) return [];
    return value.message.content.filter((block: { type: string }) => block.type === 'tool_use');
  });
  assert.equal(ownCalls.length, 2);
  const calls = handle.toolCalls[Symbol.asyncIterator]();
  input.end(lines.slice(spawnAt + 1).join('\n') + '\n');
  const warning = await warned;
  assert.equal(warning.code, 'READER_STALLED');
  assert.equal(
    warning.message,
    `the input has waited 50 ms for toolCalls of ${handle.id}: a loop that awaits something later in the ` +
      "run (a subagent's output, done) while it holds this reader waits for ever; read such things in " +
      'separate tasks, or with interleave()',
  );
  const processWarning = await processWarned;
  assert.equal(processWarning.code, 'READER_STALLED');
  assert.equal(processWarning.message, warning.message);
  await calls.return!();
  await subagents.return!();
  await run.done;
});

test("run.output.cost: the price table before a result line, Claude Code's dollars once it " +
  "came", async () => {
  const lines = fixtureLines('binary-tree-depth-3');
  const result = JSON.parse(lines.find((line) => line.includes('"type":"result"'))!);
  const cut = lines.filter((line) => !line.includes('"type":"result"'));
  const [model] = Object.keys(result.modelUsage);
  // Cut: every channel priced at the test rates, their sum the run's.
  const oracle = readStream(cut.join('\n') + '\n');
  const channelsUsd = [...oracle.channels.values()].reduce((sum, ch) => sum + dollarsOf(ch.usage), 0);
  const cutRun = openPriced(Buffer.from(cut.join('\n') + '\n'), [model]);
  const before = (await cutRun.output).cost;
  await cutRun.done;
  const { usd, channelsUsd: sum, models, ...rest } = before;
  assert.ok(Math.abs(usd! - channelsUsd) < 1e-12 && Math.abs(sum! - channelsUsd) < 1e-12, `${usd} ${sum}`);
  assert.deepEqual(rest, {
    basis: 'table',
    outputTokens: 'stream',
    unattributedUsd: null,
    resultUsd: null,
    pricesDate: '2026-01-02',
  });
  const tokens = (key: string) =>
    [...oracle.channels.values()].reduce((total, ch) => total + (ch.usage[key] ?? 0), 0);
  assert.deepEqual(Object.keys(models), [model]);
  assert.equal(models[model].input_tokens, tokens('input_tokens'));
  assert.equal(models[model].output_tokens, tokens('output_tokens'));
  assert.equal(models[model].result_usd, null);
  // Whole: the result line's dollars are the run's; what no channel shows is the difference.
  const run = openPriced(Buffer.from(lines.join('\n') + '\n'), [model]);
  const after = (await run.output).cost;
  await run.done;
  // Dollars are kept to 1e-12.
  assert.ok(Math.abs(after.usd! - result.total_cost_usd) < 1e-12, `${after.usd}`);
  assert.ok(Math.abs(after.resultUsd! - result.total_cost_usd) < 1e-12, `${after.resultUsd}`);
  assert.equal(after.basis, 'result');
  assert.equal(after.outputTokens, 'estimated');
  assert.equal(after.pricesDate, '2026-01-02');
  assert.ok(Math.abs(after.models[model].result_usd! - result.modelUsage[model].costUSD) < 1e-12);
  assert.ok(after.channelsUsd! > 0 && after.unattributedUsd !== null);
  assert.ok(Math.abs(after.channelsUsd! + after.unattributedUsd! - result.total_cost_usd) < 1e-9);
});

test('run.output follows the last result line: a failed turn then a completed one, and back', async () => {
  const lines = fixtureLines('foreground-fanout-3');
  const at = lines.findIndex((line) => line.includes('"type":"result"'));
  const result = JSON.parse(lines[at]);
  const failed = JSON.stringify({
    ...result,
    is_error: true,
    subtype: 'error_during_execution',
    result: 'it broke',
  });
  const outputOf = async (input: string[]) => {
    const run = open(chunked([Buffer.from(input.join('\n') + '\n')]));
    const output = await run.output;
    await run.done;
    return output;
  };
  const healed = await outputOf([...lines.slice(0, at), failed, ...lines.slice(at)]);
  assert.deepEqual([healed.status, healed.result, healed.error], ['completed', result.result, null]);
  const broken = await outputOf([...lines.slice(0, at + 1), failed]);
  assert.deepEqual([broken.status, broken.result, broken.error], ['failed', 'it broke', 'it broke']);
  // Figures that are not finite numbers are not given.
  // 1e999 parses as Infinity.
  const odd = JSON.stringify({
    ...result,
    total_cost_usd: 'a lot',
    num_turns: null,
    duration_ms: '5',
  }).replace('"duration_ms":"5"', '"duration_ms":1e999');
  const oddOutput = await outputOf([...lines.slice(0, at), odd]);
  assert.deepEqual([oddOutput.costUsd, oddOutput.turns, oddOutput.durationMs], [null, null, null]);
  assert.equal(oddOutput.usage?.output_tokens, result.usage.output_tokens);
});

test('a subagent whose spawn timestamp does not parse has no elapsed time, not NaN', async () => {
  const lines = fixtureLines('nested-depth-3');
  const spawn = spawnInputs(lines);
  const [id] = spawn.keys();
  const first = lines.findIndex((line) => JSON.parse(line).parent_tool_use_id === id);
  const spawnAt = lines.findIndex((line) => line.includes(`"id":"${id}"`));
  for (const at of [first, spawnAt]) {
    const value = JSON.parse(lines[at]);
    value.timestamp = 'soon';
    lines[at] = JSON.stringify(value);
  }
  const last = lines.filter((line) => JSON.parse(line).parent_tool_use_id === id).at(-1)!;
  const run = open(chunked([Buffer.from(lines.join('\n') + '\n')]));
  const handles: SubagentHandle[] = [];
  for await (const handle of run.allSubagents) handles.push(handle);
  await run.done;
  const output = await handles.find((handle) => handle.id === id)!.output;
  assert.equal(output.firstSeen, 'soon');
  assert.equal(output.lastSeen, JSON.parse(last).timestamp);
  assert.equal(output.startedAt, 'soon');
  assert.equal(output.elapsedMs, null);
});

test('the memory buffer holds exactly maxBufferedBytes: lines packed by channel, ' +
  'and the record order', async () => {
  const lines = fixtureLines('nested-depth-3');
  const input = Buffer.from(lines.join('\n') + '\n');
  // What a run without files keeps for late readers: each channel's lines packed, the record order.
  const read = open(chunked([input]));
  await read.done;
  const all: RunEvent[] = [];
  for await (const event of read.events) all.push(event);
  const held = bufferedBytes(all, lines);
  const payload = lines.reduce((sum, line) => sum + Buffer.byteLength(line), 0);
  assert.ok(held > payload, `${held} bytes held for ${payload} of lines`);
  const fits = open(chunked([input]), { maxBufferedBytes: held });
  await fits.done;
  const events: RunEvent[] = [];
  for await (const event of fits.events) events.push(event);
  assert.deepEqual(
    events.map((event) => (event.kind === 'line' ? event.line : null)),
    lines.map((line) => JSON.parse(line)),
  );
  let messages = 0;
  for await (const _message of fits.messages) messages++;
  assert.ok(messages > 0);
  const over = open(chunked([input]), { maxBufferedBytes: held - 1 });
  await over.done;
  await assert.rejects(
    async () => {
      for await (const _event of over.events);
    },
    (err: { code?: string; message?: string }) =>
      err.code === 'ERR_PROJECTION_BUFFER' &&
      err.message ===
        'cannot replay events from the start: the run buffered more than maxBufferedBytes ' +
          `(${held - 1} bytes); open the events loop earlier, or raise maxBufferedBytes`,
  );
  await assert.rejects(
    async () => {
      for await (const _message of over.messages);
    },
    { code: 'ERR_PROJECTION_BUFFER' },
  );
});

test('a subtree with a model no price covers costs null; the subtrees beside it are priced', async () => {
  const lines = fixtureLines('binary-tree-depth-3').filter((line) => !line.includes('"type":"result"'));
  const oracle = readStream(lines.join('\n') + '\n');
  // One leaf subagent answers with a model the prices do not cover.
  const leaf = [...oracle.channels.values()].find(
    (ch) => ch.id !== null && ![...oracle.channels.values()].some((other) => other.parent === ch.id),
  )!;
  const renamed = lines.map((line) => {
    const value = JSON.parse(line);
    if (value.type !== 'assistant' || value.parent_tool_use_id !== leaf.id) return line;
    value.message.model = 'model-without-price';
    return JSON.stringify(value);
  });
  const run = openPriced(Buffer.from(renamed.join('\n') + '\n'), ['claude-opus-5-5']);
  const handles: SubagentHandle[] = [];
  for await (const handle of run.allSubagents) handles.push(handle);
  const output = await run.output;
  await run.done;
  const ancestors = new Set<string | null>();
  for (let at: string | null = leaf.id; at !== null; at = oracle.channels.get(at)!.parent) ancestors.add(at);
  const under = (id: string | null): string[] => [
    ...(id === null ? [] : [id]),
    ...[...oracle.channels.values()]
      .filter((ch) => ch.id !== null && ch.parent === id)
      .flatMap((ch) => under(ch.id)),
  ];
  assert.equal(output.subtree.cost.usd, null);
  assert.equal(output.cost.usd, null);
  let priced = 0;
  for (const handle of handles) {
    const { cost, subtree } = await handle.output;
    assert.equal(cost.usd === null, handle.id === leaf.id, `${handle.id}: ${cost.usd}`);
    if (ancestors.has(handle.id)) {
      assert.equal(subtree.cost.usd, null, handle.id);
    } else {
      const sum = under(handle.id).reduce(
        (total, id) => total + dollarsOf(oracle.channels.get(id)!.usage),
        0,
      );
      assert.ok(Math.abs(subtree.cost.usd! - sum) < 1e-12, handle.id);
      priced++;
    }
  }
  assert.ok(priced > 0 && ancestors.size > 1);
});

test('a run of junk lines and a long line that is no JSON are quarantined each at its number', async () => {
  const lines = fixtureLines('nested-depth-3');
  const junk = ['not json', 'nor this', 'nor that'];
  // Longer than the line parser holds here: spooled, then found not to be JSON.
  const cut = `{"type":"user","cut":"${'y'.repeat(8000)}`;
  // As long, but JSON: spooled and routed (a memory buffer gives up for it: files only).
  const long = JSON.stringify({ ...JSON.parse(lines[1]), padding: 'z'.repeat(8000) });
  const stages = ['line-parser', 'input-format', 'version-guard', 'channel-router', 'thinking-truncator'].map(
    (use) => (use === 'line-parser' ? { use, maxLineBytes: 4096 } : { use }),
  );
  const bad = new Set([...junk, cut]);
  /** The input as chunks: the junk lines in one, the rest cut shorter than the long lines. */
  const chunksOf = (input: string[]) => {
    const head = Buffer.from(input.slice(0, 4).join('\n') + '\n');
    return chunked([head, ...splitEvery(Buffer.from(input.slice(4).join('\n') + '\n'), 1024)]);
  };
  const eventsOf = async (run: ReturnType<typeof open>, input: string[], quarantined: number[]) => {
    const early: RunEvent[] = [];
    const reading = (async () => {
      for await (const event of run.events) early.push(event);
    })();
    const index = await run.done;
    await reading;
    assert.deepEqual(index.quarantine_lines, quarantined);
    const late: RunEvent[] = [];
    for await (const event of run.events) late.push(event);
    for (const events of [early, late]) {
      assert.deepEqual(
        events.map((event) => event.lineNo),
        input.map((_line, at) => at + 1),
      );
      assert.deepEqual(
        events.filter((event) => event.kind === 'quarantine').map((event) => event.lineNo),
        quarantined,
      );
    }
    return late;
  };
  const input = [lines[0], ...junk, ...lines.slice(1, 5), cut, ...lines.slice(5)];
  assert.deepEqual(
    input.flatMap((line, at) => (bad.has(line) ? [at + 1] : [])),
    [2, 3, 4, 9],
  );
  // Without files: what the memory buffer holds, each channel's routed lines packed and the
  // record order of every record, quarantined ones included.
  const read = open(chunksOf(input), { spec: { stages, sinks: [] } });
  const held = bufferedBytes(await eventsOf(read, input, [2, 3, 4, 9]), input);
  const fits = open(chunksOf(input), { maxBufferedBytes: held, spec: { stages, sinks: [] } });
  await eventsOf(fits, input, [2, 3, 4, 9]);
  // One byte less and the record order no longer fits.
  const over = open(chunksOf(input), { maxBufferedBytes: held - 1, spec: { stages, sinks: [] } });
  await over.done;
  await assert.rejects(
    async () => {
      for await (const _event of over.events);
    },
    { code: 'ERR_PROJECTION_BUFFER' },
  );
  // Given up at the first line: the quarantined lines after it are still seen live.
  const givenUp = open(chunksOf(input), { maxBufferedBytes: 1024, spec: { stages, sinks: [] } });
  const live: RunEvent[] = [];
  const readingLive = (async () => {
    for await (const event of givenUp.events) live.push(event);
  })();
  await givenUp.done;
  await readingLive;
  assert.deepEqual(
    live.filter((event) => event.kind === 'quarantine').map((event) => event.lineNo),
    [2, 3, 4, 9],
  );
  const withLong = [...input.slice(0, 6), long, ...input.slice(6)];
  const files = open(chunksOf(withLong), { out: join(tmpDir(), 'out'), spec: { stages, sinks: [] } });
  const events = await eventsOf(files, withLong, [2, 3, 4, 10]);
  assert.equal(events[6].kind, 'line');
});

test(
  'a live events loop read slowly lets the input on as it reads; one that stalls is named',
  STALL,
  async () => {
    const lines = fixtureLines('binary-tree-depth-3');
    const input = Buffer.from(lines.join('\n') + '\n');
    // The only reader, taking one event a turn: each read makes room for the input.
    const slow = open(chunked(splitEvery(input, 512)), { readerHighWaterLines: 2 });
    const seen: number[] = [];
    for await (const event of slow.events) {
      seen.push(event.lineNo);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await slow.done;
    assert.deepEqual(
      seen,
      lines.map((_line, at) => at + 1),
    );
    // A loop that takes one event and holds on: the input waits for it, and says so.
    const held = open(chunked(splitEvery(input, 512)), { readerHighWaterLines: 2, readerStallMs: 50 });
    const warned = held.session.warningAt(held.session.warnings.length);
    const events = held.events[Symbol.asyncIterator]();
    assert.equal((await events.next()).value.lineNo, 1);
    const warning = await warned;
    assert.equal(warning.code, 'READER_STALLED');
    assert.match(warning.message, /waited 50 ms for events: /);
    // The loop breaks off: nothing holds the input back any more.
    await events.return!();
    const index = await held.done;
    assert.equal(index.input.lines, lines.length);
  },
);

test('a reader holding exactly readerHighWaterLines values does not hold the input back', HANG, async () => {
  const lines = fixtureLines('binary-tree-depth-3');
  const input = new PassThrough();
  const run = open(input, { readerHighWaterLines: 2 });
  const subagents = run.subagents[Symbol.asyncIterator]();
  const spawnAt = lines.findIndex((line) => line.includes('"name":"Agent"'));
  input.write(lines.slice(0, spawnAt + 1).join('\n') + '\n');
  const handle = (await subagents.next()).value as SubagentHandle;
  // Its own tool calls, counted from the lines: as many as the reader may hold.
  const ownCalls = lines.flatMap((line) => {
    const value = JSON.parse(line);
    if (value.type !== 'assistant' || value.parent_tool_use_id !== handle.id) return [];
    return value.message.content.filter((block: { type: string }) => block.type === 'tool_use');
  });
  assert.equal(ownCalls.length, 2);
  // Opened, not read until the run is done.
  const calls = handle.toolCalls[Symbol.asyncIterator]();
  input.end(lines.slice(spawnAt + 1).join('\n') + '\n');
  await subagents.return!();
  await run.done;
  const ids: string[] = [];
  for (let next = await calls.next(); !next.done; next = await calls.next()) ids.push(next.value.id);
  assert.deepEqual(
    ids,
    ownCalls.map((call: { id: string }) => call.id),
  );
});

test(
  'an abort while a reader holds the input back ends the run: nobody is waited for after the end',
  HANG,
  async () => {
    const input = longMainRun(3000);
    const stop = new AbortController();
    const run = open(chunked(splitEvery(input, 64 * 1024)), { readerHighWaterLines: 2, signal: stop.signal });
    const messages = run.messages[Symbol.asyncIterator]();
    await messages.next();
    // The reader takes no more: the input waits for it, until the abort.
    await until(() => run.session.input.lines > 10);
    stop.abort();
    // The run settles: what was read drains through the sinks with nobody waited for.
    await assert.rejects(run.done, { code: 'ABORT_ERR' });
    let next = await messages.next();
    while (!next.done) next = await messages.next();
  },
);

test('cost.basis of outputs settled at the end: table without a result line, result with one', async () => {
  const lines = fixtureLines('binary-tree-depth-3');
  const result = lines.find((line) => JSON.parse(line).type === 'result')!;
  // Cut right after the first subagent's end: every other one is still running.
  const spawned = new Set<string>();
  const answered = new Set<string>();
  const blocksOf = (value: { message?: { content?: unknown } }) =>
    Array.isArray(value.message?.content) ? value.message.content : [];
  let cutAt = 0;
  while (answered.size === 0) {
    for (const block of blocksOf(JSON.parse(lines[cutAt]))) {
      if (block.type === 'tool_use' && block.name === 'Agent') spawned.add(block.id);
      if (block.type === 'tool_result' && spawned.has(block.tool_use_id)) answered.add(block.tool_use_id);
    }
    cutAt++;
  }
  const cut = lines.slice(0, cutAt);
  const unfinished = [...spawned].filter((id) => !answered.has(id)).sort();
  assert.ok(unfinished.length > 0 && unfinished.length < spawned.size);
  for (const [input, basis] of [
    [cut, 'table'],
    [[...cut, result], 'result'],
  ] as const) {
    const run = open(chunked([Buffer.from(input.join('\n') + '\n')]));
    const handles: SubagentHandle[] = [];
    for await (const handle of run.allSubagents) handles.push(handle);
    const output = await run.output;
    await run.done;
    const outputs = await Promise.all(
      handles.map(async (handle) => [handle.id, await handle.outcome] as const),
    );
    const interrupted = outputs.filter(([, settled]) => settled.status === 'interrupted');
    assert.deepEqual(interrupted.map(([id]) => id).sort(), unfinished);
    // Settled when the input ended: after the result line when there was one.
    for (const [id, settled] of interrupted) {
      assert.equal(settled.cost.basis, basis, id);
      assert.equal(settled.subtree.cost.basis, basis, id);
    }
    assert.equal(output.subtree.cost.basis, basis);
    assert.equal(output.cost.basis, basis);
  }
});
