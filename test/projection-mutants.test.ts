// The projection's edges that a plain reading of the fixtures does not reach: readers that start
// late and replay a channel's `.jsonl`, readers that stop early, and what the handles report.
import assert from 'node:assert/strict';
import fs, { readFileSync, rmSync, statSync, writeFileSync, type ReadStream } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { PassThrough, Readable } from 'node:stream';
import { test } from 'node:test';
import {
  open,
  type Message,
  type RunEvent,
  type SubagentHandle,
  type ToolCall,
} from '../src/index.js';
import { chunked, FIXTURES, splitEvery, tmpDir } from './helpers/helpers.js';
import { readStream } from './helpers/oracle.js';
import { writeStream } from '../bench/gen.js';

/** Lines of a recorded fixture. */
function fixtureLines(name: string): string[] {
  return readFileSync(join(FIXTURES, `${name}.jsonl`), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '');
}

/**
 * A recorded run whose main conversation is made long: its first main assistant line repeated
 * `copies` times as separate API messages, before the rest of the run. Returns the input.
 */
function longMainRun(copies: number): Buffer {
  const lines = fixtureLines('foreground-fanout-3');
  const at = lines.findIndex((line) => {
    const value = JSON.parse(line);
    return value.type === 'assistant' && value.parent_tool_use_id == null;
  });
  const template = JSON.parse(lines[at]);
  const extra: string[] = [];
  for (let copy = 0; copy < copies; copy++) {
    const value = structuredClone(template);
    value.message.id = `${template.message.id}_copy${copy}`;
    value.uuid = `${String(template.uuid).slice(0, 24)}${String(copy).padStart(12, '0')}`;
    extra.push(JSON.stringify(value));
  }
  return Buffer.from([...lines.slice(0, at), ...extra, ...lines.slice(at)].join('\n') + '\n');
}

/**
 * Watches the read streams opened on files under `dir` (the projection opens them through
 * `node:fs`), so a test can see how far a replay has read each file.
 */
function watchReads(dir: string): { streams: ReadStream[]; restore(): void } {
  const streams: ReadStream[] = [];
  const original = fs.createReadStream;
  fs.createReadStream = ((path: fs.PathLike, options?: Parameters<typeof original>[1]) => {
    const stream = original(path, options);
    if (String(path).startsWith(dir)) streams.push(stream);
    return stream;
  }) as typeof original;
  syncBuiltinESMExports();
  return {
    streams,
    restore() {
      fs.createReadStream = original;
      syncBuiltinESMExports();
    },
  };
}

/** Resolves once `ready()` holds, checking after each turn of the event loop. */
async function until(ready: () => boolean): Promise<void> {
  while (!ready()) await new Promise((resolve) => setImmediate(resolve));
}

/** A read stream has stopped: read to its end and closed, or its buffer full with nobody reading. */
const stopped = (stream: ReadStream) =>
  stream.destroyed || stream.readableLength >= stream.readableHighWaterMark;

/** A test that waits for the stall warning: room for a loaded machine. */
const STALL = { timeout: 20_000 };

/** What tells two messages apart. */
const idOf = (message: Message) => `${message.channel}:${message.index}:${message.id}`;

const closed = (stream: ReadStream) => until(() => stream.closed);

/** A finished run with files written, its main channel long, and its main messages read live. */
async function finishedLongRun(copies = 6000) {
  const out = join(tmpDir(), 'out');
  const run = open(chunked([longMainRun(copies)]), { out, readerHighWaterLines: 8 });
  const live: Message[] = [];
  for await (const message of run.messages) live.push(message);
  await run.done;
  return { run, out, live };
}

test('a late reader replaying a long .jsonl reads it only as fast as its loop takes messages', async () => {
  const { run, out, live } = await finishedLongRun();
  const watch = watchReads(out);
  try {
    const messages = run.messages[Symbol.asyncIterator]();
    const first = await messages.next();
    assert.equal(idOf(first.value), idOf(live[0]));
    assert.equal(watch.streams.length, 1);
    const [file] = watch.streams;
    const size = statSync(file.path).size;
    // The consumer holds its first message and asks for nothing more: the replay must stop.
    await until(() => stopped(file));
    assert.equal(file.destroyed, false, 'the replay read the whole file for a loop that took one message');
    assert.ok(file.bytesRead < size / 8, `read ${file.bytesRead} of ${size} bytes for one message`);
    let count = 1;
    for (let next = await messages.next(); !next.done; next = await messages.next()) {
      assert.equal(idOf(next.value), idOf(live[count]));
      count++;
    }
    assert.equal(count, live.length);
    assert.equal(file.bytesRead, size);
  } finally {
    watch.restore();
  }
});

test('a late reader that breaks off its replay stops reading the .jsonl', async () => {
  const { run, out, live } = await finishedLongRun();
  const watch = watchReads(out);
  try {
    const messages = run.messages[Symbol.asyncIterator]();
    assert.equal(idOf((await messages.next()).value), idOf(live[0]));
    const [file] = watch.streams;
    const size = statSync(file.path).size;
    await messages.return!();
    await closed(file);
    assert.ok(file.bytesRead < size / 8, `read ${file.bytesRead} of ${size} bytes after the loop broke off`);
    // The run is still whole: a new reader replays every message.
    let count = 0;
    for await (const _message of run.messages) count++;
    assert.equal(count, live.length);
  } finally {
    watch.restore();
  }
});

test('a late events loop replaying the channel files reads them only as fast as it is consumed', async () => {
  const { run, out } = await finishedLongRun();
  const watch = watchReads(out);
  try {
    const events = run.events[Symbol.asyncIterator]();
    const seen: RunEvent[] = [(await events.next()).value];
    // The first records are the system line and short main lines; go on until a file is open.
    while (watch.streams.length === 0) seen.push((await events.next()).value);
    const main = watch.streams.find((stream) => statSync(stream.path).size > 1_000_000)!;
    assert.ok(main, 'the main channel file is replayed');
    const size = statSync(main.path).size;
    await until(() => stopped(main));
    assert.equal(main.destroyed, false, 'the replay read the whole file for a loop that took a few events');
    assert.ok(main.bytesRead < size / 8, `read ${main.bytesRead} of ${size} bytes`);
    await events.return!();
  } finally {
    watch.restore();
  }
});

test('a late reader whose channel file is gone fails: ERR_PROJECTION_REPLAY; others read on', async () => {
  const out = join(tmpDir(), 'out');
  const run = open(join(FIXTURES, 'nested-depth-3.jsonl'), { out });
  const handles: SubagentHandle[] = [];
  for await (const handle of run.allSubagents) handles.push(handle);
  const index = await run.done;
  const [gone, kept] = handles;
  const file = index.channels.find((channel) => channel.id === gone.id)!.jsonl;
  rmSync(join(out, file!));
  for (const what of ['messages', 'toolCalls'] as const) {
    await assert.rejects(
      async () => {
        for await (const _value of gone[what]);
      },
      { code: 'ERR_PROJECTION_REPLAY' },
    );
  }
  let count = 0;
  for await (const _message of kept.messages) count++;
  assert.equal(count, expectedMessages(join(FIXTURES, 'nested-depth-3.jsonl'), kept.id!));
});

test("a late reader whose channel file was cut mid-line fails: ERR_PROJECTION_REPLAY naming it", async () => {
  const out = join(tmpDir(), 'out');
  const run = open(join(FIXTURES, 'nested-depth-3.jsonl'), { out });
  const handles: SubagentHandle[] = [];
  for await (const handle of run.allSubagents) handles.push(handle);
  const index = await run.done;
  const cut = handles.find((handle) => expectedMessages(join(FIXTURES, 'nested-depth-3.jsonl'), handle.id) > 1)!;
  const file = join(out, index.channels.find((channel) => channel.id === cut.id)!.jsonl!);
  const bytes = readFileSync(file);
  // Cut in the middle of its last line: the lines before it are whole.
  const lastLine = bytes.lastIndexOf(10, bytes.length - 2) + 1;
  writeFileSync(file, bytes.subarray(0, lastLine + 10));
  for (const what of ['messages', 'toolCalls'] as const) {
    await assert.rejects(
      async () => {
        for await (const _value of cut[what]);
      },
      (err: { code?: string; message?: string }) =>
        err.code === 'ERR_PROJECTION_REPLAY' && (err.message ?? '').includes(cut.id),
    );
  }
});

/** Model calls of one channel, counted from the raw lines: assistant lines, one per message id. */
function expectedMessages(file: string, channel: string): number {
  const ids = new Set<string>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line.trim() === '') continue;
    const value = JSON.parse(line);
    if (value.type === 'assistant' && value.parent_tool_use_id === channel) ids.add(value.message.id);
  }
  return ids.size;
}

for (const mode of ['files', 'memory given up'] as const) {
  test(`a subagent reader opened at its spawn reads live (${mode}), as a late reader would`, async () => {
    const lines = fixtureLines('nested-depth-3');
    const input = new PassThrough();
    // Given up: the lines before the spawn are more than the memory buffer may hold.
    const options = mode === 'files' ? { out: join(tmpDir(), 'out') } : { maxBufferedBytes: 1024 };
    const run = open(input, options);
    const subagents = run.subagents[Symbol.asyncIterator]();
    const spawnAt = lines.findIndex((line) => line.includes('"name":"Agent"'));
    input.write(lines.slice(0, spawnAt + 1).join('\n') + '\n');
    const handle = (await subagents.next()).value as SubagentHandle;
    // Its channel has no line yet: nothing to replay, the reader waits for its lines.
    const early: string[] = [];
    const reading = (async () => {
      for await (const message of handle.messages) early.push(idOfMessage(message));
    })();
    input.end(lines.slice(spawnAt + 1).join('\n') + '\n');
    await run.done;
    await reading;
    assert.equal(early.length, expectedMessages(join(FIXTURES, 'nested-depth-3.jsonl'), handle.id));
    if (mode === 'files') {
      const late: string[] = [];
      for await (const message of handle.messages) late.push(idOfMessage(message));
      assert.deepEqual(late, early);
    } else {
      const given = (channel: string) => (err: { code?: string; message?: string }) =>
        err.code === 'ERR_PROJECTION_BUFFER' &&
        (err.message ?? '').includes(`channel ${channel} from its start`) &&
        (err.message ?? '').includes('(1024 bytes), and no files were written to replay from') &&
        (err.message ?? '').includes('write files (out), or raise maxBufferedBytes');
      await assert.rejects(async () => {
        for await (const _message of handle.messages);
      }, given(handle.id));
      await assert.rejects(async () => {
        for await (const _message of run.messages);
      }, given('main'));
    }
  });
}

const idOfMessage = (message: Message) => `${message.index}:${message.id}`;

test('a stalled reader is named in the warning: what it reads, of which channel', STALL, async () => {
  const input = longMainRun(3000);
  const run = open(chunked([input]), { readerHighWaterLines: 20, readerStallMs: 50 });
  const warned = new Promise<{ code: string; message: string }>((resolve) => run.session.onWarning(resolve));
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

test('readers of a subagent with no line of its own, opened after the run, end at once', async () => {
  // The run stops right after the spawn: the subagent never wrote a line.
  const lines = fixtureLines('nested-depth-3');
  const spawnAt = lines.findIndex((line) => line.includes('"name":"Agent"'));
  for (const out of [undefined, join(tmpDir(), 'out')]) {
    const run = open(chunked([Buffer.from(lines.slice(0, spawnAt + 1).join('\n') + '\n')]), { out });
    const handles: SubagentHandle[] = [];
    for await (const handle of run.allSubagents) handles.push(handle);
    await run.done;
    assert.equal(handles.length, 1);
    assert.equal(handles[0].status, 'interrupted');
    for (const what of ['messages', 'toolCalls'] as const) {
      let count = 0;
      for await (const _value of handles[0][what]) count++;
      assert.equal(count, 0);
    }
  }
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

test('a late events loop replays quarantined bytes in their place, with files or without', async () => {
  const lines = fixtureLines('nested-depth-3');
  const bad = ['not json at all', '{"cut": "short'];
  const input = [lines[0], bad[0], ...lines.slice(1, 5), bad[1], ...lines.slice(5)];
  for (const out of [undefined, join(tmpDir(), 'out')]) {
    const run = open(chunked([Buffer.from(input.join('\n') + '\n')]), { out });
    const early: RunEvent[] = [];
    const reading = (async () => {
      for await (const event of run.events) early.push(event);
    })();
    const index = await run.done;
    await reading;
    const late: RunEvent[] = [];
    for await (const event of run.events) late.push(event);
    assert.deepEqual(late, early);
    assert.equal(late.length, input.length);
    const quarantined = late.filter((event) => event.kind === 'quarantine');
    assert.deepEqual(quarantined, [
      { kind: 'quarantine', lineNo: 2, path: [], changes: [] },
      { kind: 'quarantine', lineNo: 7, path: [], changes: [] },
    ]);
    assert.ok(quarantined.every((event) => Object.isFrozen(event) && Object.isFrozen(event.path)));
    assert.deepEqual(index.quarantine_lines, [2, 7]);
    // Every other event is its input line, in order, with its channel's path.
    const routed = late.filter((event) => event.kind === 'line');
    assert.deepEqual(
      routed.map((event) => event.lineNo),
      input.flatMap((line, at) => (bad.includes(line) ? [] : [at + 1])),
    );
    for (const event of routed) {
      const value = JSON.parse(input[event.lineNo - 1]);
      assert.deepEqual(event.line, value);
      assert.equal(event.channel, value.parent_tool_use_id ?? null);
      assert.equal(event.path.at(-1), event.channel ?? undefined);
    }
  }
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

test('a late events loop over more channels than it keeps open reads them in order, 64 at most', async () => {
  const dir = tmpDir();
  const input = join(dir, 'fanout.jsonl');
  await writeStream({ sizeBytes: 512 * 1024, fanout: 100, shape: 'small', seed: 7 }, input);
  const out = join(dir, 'out');
  const run = open(input, { out });
  const index = await run.done;
  assert.ok(index.channels.length > 64);
  const watch = watchReads(out);
  try {
    const expected = readFileSync(input, 'utf8')
      .split('\n')
      .filter((line) => line.trim() !== '');
    let at = 0;
    let mostOpen = 0;
    for await (const event of run.events) {
      assert.equal(event.lineNo, at + 1);
      // The generated stream has a few malformed lines, quarantined; the rest come back whole.
      if (event.kind === 'line') assert.deepEqual(event.line, JSON.parse(expected[at]));
      else assert.throws(() => JSON.parse(expected[at]));
      at++;
      mostOpen = Math.max(mostOpen, watch.streams.filter((stream) => !stream.destroyed).length);
    }
    assert.equal(at, expected.length);
    // At most 64 files open at once: the channels beyond are closed and reopened at their place.
    assert.equal(mostOpen, 64);
    // The file closed is the one used least recently: as many opens as such a cache makes.
    const cache = new Map<string | null, true>();
    let opens = 0;
    for (const line of expected) {
      let channel: string | null;
      try {
        channel = JSON.parse(line).parent_tool_use_id ?? null;
      } catch {
        continue;
      }
      if (cache.delete(channel)) {
        cache.set(channel, true);
        continue;
      }
      if (cache.size >= 64) cache.delete(cache.keys().next().value!);
      cache.set(channel, true);
      opens++;
    }
    assert.ok(opens > index.channels.length);
    assert.equal(watch.streams.length, opens);
    // The loop has ended: every file it opened is closed.
    assert.deepEqual(
      watch.streams.filter((stream) => !stream.destroyed),
      [],
    );
  } finally {
    watch.restore();
  }
});

test('a late events loop over a channel file cut short fails with ERR_PROJECTION_REPLAY', async () => {
  const out = join(tmpDir(), 'out');
  const run = open(join(FIXTURES, 'nested-depth-3.jsonl'), { out });
  const index = await run.done;
  const main = join(out, index.channels.find((channel) => channel.id === null)!.jsonl!);
  writeFileSync(main, readFileSync(main, 'utf8').split('\n')[0] + '\n');
  let seen = 0;
  await assert.rejects(
    async () => {
      for await (const _event of run.events) seen++;
    },
    (err: { code?: string; message?: string }) =>
      err.code === 'ERR_PROJECTION_REPLAY' && /\bmain\b/.test(err.message ?? ''),
  );
  // The first line is still in the file: the loop failed at the main channel's second line.
  const lines = fixtureLines('nested-depth-3').map((line) => JSON.parse(line));
  const secondMain = lines.findIndex((value, at) => at > 0 && value.parent_tool_use_id == null);
  assert.equal(seen, secondMain);
});

test('a late events loop that breaks off stops reading the channel files', async () => {
  const { run, out } = await finishedLongRun();
  const watch = watchReads(out);
  try {
    const events = run.events[Symbol.asyncIterator]();
    while (watch.streams.length === 0) await events.next();
    const main = watch.streams.find((stream) => statSync(stream.path).size > 1_000_000)!;
    const size = statSync(main.path).size;
    await events.return!();
    await closed(main);
    assert.ok(main.bytesRead < size / 8, `read ${main.bytesRead} of ${size} bytes after the loop broke off`);
  } finally {
    watch.restore();
  }
});

test('an events loop opened after a run with no input ends at once', async () => {
  for (const out of [undefined, join(tmpDir(), 'out')]) {
    const run = open(chunked([]), { out });
    await run.done;
    const events: RunEvent[] = [];
    for await (const event of run.events) events.push(event);
    assert.deepEqual(events, []);
    const messages: Message[] = [];
    for await (const message of run.messages) messages.push(message);
    assert.deepEqual(messages, []);
  }
});

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

test('a subagent whose failure notification has no summary fails with "failed"; handles name their spawn', async () => {
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
  const warned = new Promise<{ code: string; message: string }>((resolve) => run.session.onWarning(resolve));
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

test("run.output.cost: the price table before a result line, Claude Code's dollars once it came", async () => {
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

test('the memory buffer holds exactly maxBufferedBytes: each line and 16 bytes of record order', async () => {
  const lines = fixtureLines('nested-depth-3');
  // What a run without files keeps for late readers: every line's bytes, and a 16-byte entry each.
  const held = lines.reduce((sum, line) => sum + Buffer.byteLength(line) + 16, 0);
  const input = Buffer.from(lines.join('\n') + '\n');
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

/** A recorded run with a line over 1 KiB, and the default stages with `maxLineBytes` 1024. */
function withLineOver1KiB() {
  const lines = fixtureLines('nested-depth-3');
  const long = lines.findIndex((line) => Buffer.byteLength(line) > 1024);
  assert.ok(long >= 0);
  const stages = ['line-parser', 'input-format', 'version-guard', 'channel-router', 'thinking-truncator'].map(
    (use) => (use === 'line-parser' ? { use, maxLineBytes: 1024 } : { use }),
  );
  return { lines, long, stages };
}

test("a line too long to hold gives its channel's buffer up: its late readers fail, others read on", async () => {
  const { lines, long, stages } = withLineOver1KiB();
  // Chunks shorter than the line: it is spooled as it streams past.
  const input = Buffer.from(lines.join('\n') + '\n');
  const run = open(chunked(splitEvery(input, 256)), { spec: { stages, sinks: [] } });
  const early: RunEvent[] = [];
  const reading = (async () => {
    for await (const event of run.events) early.push(event);
  })();
  const handles: SubagentHandle[] = [];
  for await (const handle of run.allSubagents) handles.push(handle);
  await run.done;
  await reading;
  assert.deepEqual(
    early.map((event) => event.lineNo),
    lines.map((_line, at) => at + 1),
  );
  // The long line is routed with its top-level scalar members only.
  const spooled = early[long];
  assert.equal(spooled.kind, 'line');
  if (spooled.kind === 'line') assert.equal(spooled.line.type, JSON.parse(lines[long]).type);
  // A late events loop replays the run as it was routed, the long line's scalars included.
  const late: RunEvent[] = [];
  for await (const event of run.events) late.push(event);
  assert.deepEqual(late, early);
  // The channels of lines too long to hold cannot be replayed; every other channel can.
  const longChannels = new Set(
    lines.filter((line) => Buffer.byteLength(line) > 1024).map((line) => JSON.parse(line).parent_tool_use_id ?? null),
  );
  assert.ok(longChannels.size < handles.length + 1);
  const readers: Array<[string | null, AsyncIterable<unknown>]> = [
    [null, run.messages],
    ...handles.map((h): [string | null, AsyncIterable<unknown>] => [h.id, h.messages]),
  ];
  for (const [id, messages] of readers) {
    const reading = async () => {
      for await (const _value of messages);
    };
    if (!longChannels.has(id)) await reading();
    else await assert.rejects(reading, { code: 'ERR_PROJECTION_BUFFER', message: /longer than/ });
  }
});

test('with files, a late reader gets a line past maxLineBytes as a live one did: top-level scalars', async () => {
  const { lines, long, stages } = withLineOver1KiB();
  const input = Buffer.from(lines.join('\n') + '\n');
  const run = open(chunked(splitEvery(input, 256)), {
    out: join(tmpDir(), 'out'),
    spec: { stages, sinks: [] },
  });
  const early: RunEvent[] = [];
  const reading = (async () => {
    for await (const event of run.events) early.push(event);
  })();
  await run.done;
  await reading;
  const late: RunEvent[] = [];
  for await (const event of run.events) late.push(event);
  assert.equal(late.length, lines.length);
  const lineOf = (event: RunEvent) => (event.kind === 'line' ? event.line : null);
  const whole = JSON.parse(lines[long]);
  const scalars = Object.fromEntries(
    Object.entries(whole).filter(([, value]) => typeof value !== 'object' || value === null),
  );
  assert.deepEqual(lineOf(early[long]), scalars);
  assert.deepEqual(lineOf(late[long]), scalars, 'replayed from the file as it was routed');
  assert.deepEqual(late.map(lineOf), early.map(lineOf));
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

for (const out of [undefined, 'files'] as const) {
  test(`a reader opened midway replays the lines so far once, then reads on live (${out ?? 'memory'})`, async () => {
    const lines = fixtureLines('binary-tree-depth-3');
    const input = new PassThrough();
    const run = open(input, { out: out && join(tmpDir(), 'out') });
    const seen: number[] = [];
    const events = run.events[Symbol.asyncIterator]();
    const half = Math.floor(lines.length / 2);
    input.write(lines.slice(0, half).join('\n') + '\n');
    while (seen.length < half) seen.push((await events.next()).value.lineNo);
    // Opened with half the run's lines routed; the rest arrive while it replays them.
    const late = run.messages[Symbol.asyncIterator]();
    const lateEvents = run.events[Symbol.asyncIterator]();
    input.end(lines.slice(half).join('\n') + '\n');
    const lateIds: string[] = [];
    for (let next = await late.next(); !next.done; next = await late.next()) lateIds.push(idOf(next.value));
    for (let next = await events.next(); !next.done; next = await events.next()) seen.push(next.value.lineNo);
    await run.done;
    assert.deepEqual(
      seen,
      lines.map((_line, at) => at + 1),
    );
    // An events loop opened midway, read after the run ended, still has every record.
    const lateSeen: number[] = [];
    for (let next = await lateEvents.next(); !next.done; next = await lateEvents.next()) {
      lateSeen.push(next.value.lineNo);
    }
    assert.deepEqual(lateSeen, seen);
    // One message per main API message id, in order, each once.
    const ids: string[] = [];
    for (const line of lines) {
      const value = JSON.parse(line);
      if (value.type === 'assistant' && value.parent_tool_use_id == null && ids.at(-1) !== value.message.id) {
        ids.push(value.message.id);
      }
    }
    assert.deepEqual(
      lateIds.map((id) => id.split(':').slice(2).join(':')),
      ids,
    );
  });
}

test('a late reader replays a line too long to hold from the .jsonl as it was routed: scalar members', async () => {
  const lines = fixtureLines('nested-depth-3');
  // A main user line of 17 MiB, longer than any line subtee holds: spooled, routed by its scalars.
  const huge = JSON.stringify({
    type: 'user',
    message: { role: 'user', content: 'x'.repeat(17 * 1024 * 1024) },
    parent_tool_use_id: null,
    session_id: JSON.parse(lines[0]).session_id,
    uuid: 'huge-0000',
  });
  const input = [lines[0], lines[1], huge, ...lines.slice(2)];
  const run = open(chunked(splitEvery(Buffer.from(input.join('\n') + '\n'), 1024 * 1024)), {
    out: join(tmpDir(), 'out'),
  });
  const early: RunEvent[] = [];
  const reading = (async () => {
    for await (const event of run.events) early.push(event);
  })();
  const earlyMessages: string[] = [];
  const readingMessages = (async () => {
    for await (const message of run.messages) earlyMessages.push(idOf(message));
  })();
  await run.done;
  await Promise.all([reading, readingMessages]);
  const spooled = early[2];
  assert.equal(spooled.kind, 'line');
  if (spooled.kind === 'line') {
    assert.deepEqual(spooled.line, {
      type: 'user',
      parent_tool_use_id: null,
      session_id: JSON.parse(lines[0]).session_id,
      uuid: 'huge-0000',
    });
  }
  const late: RunEvent[] = [];
  for await (const event of run.events) late.push(event);
  assert.deepEqual(late, early);
  const lateMessages: string[] = [];
  for await (const message of run.messages) lateMessages.push(idOf(message));
  assert.deepEqual(lateMessages, earlyMessages);
  assert.ok(earlyMessages.length > 0);
});

test('with files, a reader opened at once holds no line in memory: a late events loop replays the files', async () => {
  const lines = fixtureLines('binary-tree-depth-3');
  const input = Buffer.from(lines.join('\n') + '\n');
  // Room for the record order (16 bytes a line), not for the lines themselves.
  const run = open(chunked([input]), { out: join(tmpDir(), 'out'), maxBufferedBytes: lines.length * 16 });
  const early: string[] = [];
  for await (const message of run.messages) early.push(idOf(message));
  await run.done;
  const late: RunEvent[] = [];
  for await (const event of run.events) late.push(event);
  assert.deepEqual(
    late.map((event) => (event.kind === 'line' ? event.line : null)),
    lines.map((line) => JSON.parse(line)),
  );
  const again: string[] = [];
  for await (const message of run.messages) again.push(idOf(message));
  assert.deepEqual(again, early);
});

const HANG = { timeout: 20_000 };

test("a subagent's subagents asked for after the run end at once, a leaf's too", HANG, async () => {
  const lines = fixtureLines('binary-tree-depth-3');
  // Who spawned whom, from the raw lines: an Agent call on a channel makes a child of that channel.
  const parentOf = new Map<string, string | null>();
  for (const line of lines) {
    const value = JSON.parse(line);
    if (value.type !== 'assistant') continue;
    for (const block of value.message.content) {
      if (block.type === 'tool_use' && block.name === 'Agent') {
        parentOf.set(block.id, value.parent_tool_use_id ?? null);
      }
    }
  }
  const run = open(chunked([Buffer.from(lines.join('\n') + '\n')]));
  const handles: SubagentHandle[] = [];
  for await (const handle of run.allSubagents) handles.push(handle);
  await run.done;
  assert.deepEqual(handles.map((handle) => handle.id).sort(), [...parentOf.keys()].sort());
  const leaves = handles.filter((handle) => ![...parentOf.values()].includes(handle.id));
  assert.ok(leaves.length > 0 && leaves.length < handles.length);
  // Leaves first: nothing asked for their children before, so their lists are made now.
  for (const handle of [...leaves, ...handles]) {
    const children: string[] = [];
    for await (const child of handle.subagents) children.push(child.id);
    const expected = [...parentOf].filter(([, parent]) => parent === handle.id).map(([id]) => id);
    assert.deepEqual(children.sort(), expected.sort(), handle.id);
  }
});

/** A main assistant line of the recorded run with its own message id and `padding` bytes of text. */
function paddedMainLine(template: Record<string, any>, tag: string, padding: number): string {
  const value = structuredClone(template);
  value.message.id = `${template.message.id}_${tag}`;
  value.uuid = `${String(template.uuid).slice(0, 24)}${tag.padStart(12, '0')}`;
  value.message.content = [{ type: 'text', text: `${tag} ${'p'.repeat(padding)}` }];
  return JSON.stringify(value);
}

test('readers opened midway with files replay only the lines routed so far, then the held ones', async () => {
  const lines = fixtureLines('foreground-fanout-3');
  const at = lines.findIndex((line) => {
    const value = JSON.parse(line);
    return value.type === 'assistant' && value.parent_tool_use_id == null;
  });
  const template = JSON.parse(lines[at]);
  // A main line too long to hold (spooled, replayed as its scalar members), before the readers open.
  const huge = JSON.stringify({
    type: 'user',
    message: { role: 'user', content: 'x'.repeat(17 * 1024 * 1024) },
    parent_tool_use_id: null,
    session_id: template.session_id,
    uuid: 'huge-0000',
  });
  // Main messages of 100 KB, longer than what a read stream takes at once, then short ones.
  const long = Array.from({ length: 11 }, (_, copy) => paddedMainLine(template, `c${copy}`, 100_000));
  const short = Array.from({ length: 6 }, (_, copy) => paddedMainLine(template, `s${copy}`, 10));
  // The first reader opens before a long line, the second before a short one.
  const first = [...lines.slice(0, at), huge, ...long.slice(0, 10)];
  const second = [long[10]];
  const rest = [...short, ...lines.slice(at)];
  const out = join(tmpDir(), 'out');
  const input = new PassThrough();
  const run = open(input, { out, readerHighWaterLines: 4 });
  const seen: number[] = [];
  const reading = (async () => {
    for await (const event of run.events) seen.push(event.lineNo);
  })();
  const watch = watchReads(out);
  try {
    input.write(first.join('\n') + '\n');
    await until(() => seen.length === first.length);
    const early = run.messages[Symbol.asyncIterator]();
    input.write(second.join('\n') + '\n');
    await until(() => seen.length === first.length + second.length);
    const later = run.messages[Symbol.asyncIterator]();
    input.end(rest.join('\n') + '\n');
    const mainBytes = (list: string[]) =>
      list
        .filter((line) => JSON.parse(line).parent_tool_use_id == null)
        .reduce((sum, line) => sum + Buffer.byteLength(line) + 1, 0);
    const mainFile = join(out, 'main.jsonl');
    // The readers hold what is routed after they opened: two short lines are written before the
    // input waits.
    await until(() => statSync(mainFile).size >= mainBytes([...first, ...second, ...short.slice(0, 2)]));
    const read = async (messages: AsyncIterator<Message>) => {
      const list: Message[] = [];
      for (let next = await messages.next(); !next.done; next = await messages.next()) list.push(next.value);
      return list;
    };
    // Read side by side: the input waits for both.
    const [earlyMessages, laterMessages] = await Promise.all([read(early), read(later)]);
    await run.done;
    await reading;
    const [earlyFile, laterFile] = watch.streams;
    assert.deepEqual([earlyFile.path, laterFile.path], [mainFile, mainFile]);
    // The first reader stops before the end of the long line after those it replays.
    const nextEnds = mainBytes([...first, ...second]);
    const message = `read ${earlyFile.bytesRead} bytes, the next line ends at ${nextEnds}`;
    assert.ok(earlyFile.bytesRead < nextEnds, message);
    const again: Message[] = [];
    for await (const message of run.messages) again.push(message);
    const shown = (list: Message[]) =>
      Promise.all(list.map(async (message) => `${idOf(message)}:${(await message.text).length}`));
    assert.deepEqual(await shown(earlyMessages), await shown(again));
    assert.deepEqual(await shown(laterMessages), await shown(again));
    // One message per main API message id, each once.
    const ids: string[] = [];
    for (const line of [...first, ...second, ...rest]) {
      const value = JSON.parse(line);
      if (value.type === 'assistant' && value.parent_tool_use_id == null && ids.at(-1) !== value.message.id) {
        ids.push(value.message.id);
      }
    }
    assert.deepEqual(
      again.map((message) => message.id),
      ids,
    );
  } finally {
    watch.restore();
  }
});

test('a late events loop reopens a channel file past a line too long to hold, and at it', async () => {
  const dir = tmpDir();
  const generated = join(dir, 'fanout.jsonl');
  await writeStream({ sizeBytes: 512 * 1024, fanout: 100, shape: 'small', seed: 7 }, generated);
  const lines = readFileSync(generated, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '');
  const channelOf = (line: string): string | null | undefined => {
    try {
      return JSON.parse(line).parent_tool_use_id ?? null;
    } catch {
      return undefined; // malformed: quarantined, in no channel file
    }
  };
  // Where 70 other channels have been used since `from`: a file kept open 64 at a time is closed.
  const afterOthers = (from: number) => {
    const others = new Set<string | null>();
    for (let at = from; at < lines.length; at++) {
      const channel = channelOf(lines[at]);
      if (channel !== undefined) others.add(channel);
      if (others.size >= 70) return at + 1;
    }
    throw new Error('the generated stream has too few channels');
  };
  // One more channel, three lines: a short one, one too long to hold, a short one, far apart.
  const channel = 'toolu_reopened';
  const sessionId = JSON.parse(lines[0]).session_id;
  const line = (uuid: string, content: string) =>
    JSON.stringify({
      type: 'user',
      message: { role: 'user', content },
      parent_tool_use_id: channel,
      session_id: sessionId,
      uuid,
    });
  const firstAt = 1;
  const hugeAt = afterOthers(firstAt) + 1;
  const lastAt = afterOthers(hugeAt) + 2;
  const input = [...lines];
  input.splice(firstAt, 0, line('reopened-1', 'first'));
  input.splice(hugeAt, 0, line('reopened-2', 'x'.repeat(17 * 1024 * 1024)));
  input.splice(lastAt, 0, line('reopened-3', 'last'));
  const path = join(dir, 'input.jsonl');
  writeFileSync(path, input.join('\n') + '\n');
  const out = join(dir, 'out');
  const run = open(path, { out });
  const index = await run.done;
  const file = join(out, index.channels.find((each) => each.id === channel)!.jsonl!);
  // The channel's file is opened three times if the loop keeps the 64 files used last.
  const cache = new Map<string | null, true>();
  let opens = 0;
  for (const each of input) {
    const id = channelOf(each);
    if (id === undefined) continue;
    if (cache.delete(id)) {
      cache.set(id, true);
      continue;
    }
    if (cache.size >= 64) cache.delete(cache.keys().next().value!);
    cache.set(id, true);
    if (id === channel) opens++;
  }
  assert.equal(opens, 3);
  const watch = watchReads(out);
  try {
    let at = 0;
    for await (const event of run.events) {
      assert.equal(event.lineNo, at + 1);
      if (event.kind === 'line') {
        const expected = JSON.parse(input[at]);
        // The long line comes back as it was routed: its top-level scalar members.
        if (at === hugeAt) delete expected.message;
        assert.deepEqual(event.line, expected, `line ${at + 1}`);
      } else {
        assert.equal(channelOf(input[at]), undefined);
      }
      at++;
    }
    assert.equal(at, input.length);
    assert.equal(watch.streams.filter((stream) => stream.path === file).length, 3);
  } finally {
    watch.restore();
  }
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
  // Without files: what the memory buffer holds, each routed line and 16 bytes per record.
  const held = input.reduce((sum, line) => sum + (bad.has(line) ? 0 : Buffer.byteLength(line)) + 16, 0);
  const fits = open(chunksOf(input), { maxBufferedBytes: held, spec: { stages, sinks: [] } });
  await eventsOf(fits, input, [2, 3, 4, 9]);
  // One byte less and the quarantined lines' 16 bytes no longer fit.
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
  'late readers over a channel file whose line is no longer JSON fail; the run reads on',
  HANG,
  async () => {
    const lines = fixtureLines('binary-tree-depth-3');
    const out = join(tmpDir(), 'out');
    const input = new PassThrough();
    const run = open(input, { out, readerHighWaterLines: 4 });
    const seen: number[] = [];
    const reading = (async () => {
      for await (const event of run.events) seen.push(event.lineNo);
    })();
    const half = Math.floor(lines.length / 2);
    input.write(lines.slice(0, half).join('\n') + '\n');
    await until(() => seen.length === half);
    // The main file's second line spoiled in place, its length kept: `{` becomes `X`.
    const mainFile = join(out, 'main.jsonl');
    const mainLines = lines.slice(0, half).filter((line) => JSON.parse(line).parent_tool_use_id == null);
    const written = mainLines.reduce((sum, line) => sum + Buffer.byteLength(line) + 1, 0);
    await until(() => fs.existsSync(mainFile) && statSync(mainFile).size === written);
    const [firstMain] = readFileSync(mainFile, 'utf8').split('\n');
    const handle = fs.openSync(mainFile, 'r+');
    fs.writeSync(handle, 'X', Buffer.byteLength(firstMain) + 1);
    fs.closeSync(handle);
    const unreadable = (err: { code?: string; message?: string }) =>
      err.code === 'ERR_PROJECTION_REPLAY' && /JSON/.test(err.message ?? '');
    for (const late of [run.events, run.messages, run.toolCalls] as AsyncIterable<unknown>[]) {
      await assert.rejects(async () => {
        for await (const _value of late);
      }, unreadable);
    }
    // The readers that failed hold nothing back: the rest of the run is routed.
    input.end(lines.slice(half).join('\n') + '\n');
    const index = await run.done;
    await reading;
    assert.deepEqual(
      seen,
      lines.map((_line, at) => at + 1),
    );
    assert.equal(index.input.lines, lines.length);
  },
);

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
    const warned = new Promise<{ code: string; message: string }>((resolve) =>
      held.session.onWarning(resolve),
    );
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

test("a Copilot run's late readers replay the lines routed, not its input lines, with files or without", async () => {
  const file = join(FIXTURES, 'other-agents', 'copilot-spawn.jsonl');
  const inputLines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '');
  for (const out of [undefined, join(tmpDir(), 'out')]) {
    const run = open(file, { out });
    const early: RunEvent[] = [];
    const reading = (async () => {
      for await (const event of run.events) early.push(event);
    })();
    const index = await run.done;
    await reading;
    assert.equal(index.producer, 'copilot');
    const late: RunEvent[] = [];
    for await (const event of run.events) late.push(event);
    assert.deepEqual(late, early);
    // Each input line is one routed record or more; what is routed is not the input line.
    const routed = early.filter((event) => event.kind === 'line');
    assert.ok(routed.length >= inputLines.length);
    const first = routed[0];
    assert.ok(first.kind === 'line' && !isDeepStrictEqual(first.line, JSON.parse(inputLines[0])));
    for await (const handle of run.allSubagents) {
      const texts = async (messages: AsyncIterable<Message>) => {
        const list: string[] = [];
        for await (const message of messages) list.push(`${idOf(message)}:${await message.text}`);
        return list;
      };
      const once = await texts(handle.messages);
      assert.ok(once.length > 0);
      assert.deepEqual(await texts(handle.messages), once);
    }
  }
});

test('a late events loop without files replays each line from its bytes: 1e999 is Infinity again', async () => {
  const lines = fixtureLines('foreground-fanout-3');
  const at = lines.findIndex((line) => line.includes('"type":"result"'));
  // A number JSON cannot write back: read from the bytes it is Infinity, written back it would be null.
  lines[at] = lines[at].replace(/"duration_ms":\d+/, '"duration_ms":1e999');
  assert.match(lines[at], /1e999/);
  const run = open(chunked([Buffer.from(lines.join('\n') + '\n')]));
  await run.done;
  const late: RunEvent[] = [];
  for await (const event of run.events) late.push(event);
  const result = late[at];
  assert.ok(result.kind === 'line');
  assert.equal(result.line.duration_ms, Infinity);
  assert.deepEqual(
    late.map((event) => (event.kind === 'line' ? event.line : null)),
    lines.map((line) => JSON.parse(line)),
  );
});

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

for (const out of [undefined, 'files'] as const) {
  test(
    `a late reader still replaying holds the input back once replayed and held lines pass the limit (${
      out ?? 'memory'
    })`,
    STALL,
    async () => {
      const lines = fixtureLines('foreground-fanout-3');
      const template = JSON.parse(lines[1]);
      assert.ok(template.type === 'assistant' && template.parent_tool_use_id == null);
      const mainLine = (tag: string) => {
        const value = structuredClone(template);
        value.message.id = `${template.message.id}_${tag}`;
        value.uuid = `${template.uuid}-${tag}`;
        return JSON.stringify(value);
      };
      const spawnAt = lines.findIndex((line) => line.includes('"name":"Agent"'));
      // The main conversation's closing message comes last: the long middle goes before it.
      const lastMain = lines.length - 2;
      assert.equal(JSON.parse(lines[lastMain]).type, 'assistant');
      // Main messages before the first spawn, for the late reader to replay; many more after.
      const before = Array.from({ length: 20 }, (_, at) => mainLine(`before${at}`));
      const after = Array.from({ length: 1000 }, (_, at) => mainLine(`after${at}`));
      const first = [lines[0], ...before, ...lines.slice(1, spawnAt + 1)];
      const rest = [...lines.slice(spawnAt + 1, lastMain), ...after, ...lines.slice(lastMain)];
      const all = [...first, ...rest];
      // The source counts the lines it hands over; the rest waits until the late reader is open.
      const source = { pulled: 0, go: () => {} };
      const opened = new Promise<void>((resolve) => (source.go = resolve));
      const chunks = async function* () {
        source.pulled += first.length;
        yield Buffer.from(first.join('\n') + '\n');
        await opened;
        for (let at = 0; at < rest.length; at += 10) {
          const part = rest.slice(at, at + 10);
          source.pulled += part.length;
          yield Buffer.from(part.join('\n') + '\n');
        }
      };
      const input = Readable.from(chunks(), { objectMode: false, highWaterMark: 1 });
      const options = { out: out && join(tmpDir(), 'out'), readerHighWaterLines: 2, readerStallMs: 50 };
      const run = open(input, options);
      const warned = new Promise<{ code: string; message: string }>((resolve) =>
        run.session.onWarning(resolve),
      );
      const subagents = run.subagents[Symbol.asyncIterator]();
      // The spawn is the first part's last line: once its handle is out, every line of it was taken.
      await subagents.next();
      await subagents.return!();
      // Opened with 20 main messages routed: it replays them, and holds the lines routed meanwhile.
      const late = run.messages[Symbol.asyncIterator]();
      source.go();
      const outcome = await Promise.race([warned, run.done.then(() => null)]);
      assert.ok(outcome, 'the run ended while a late reader had read nothing: the input was not held back');
      assert.equal(outcome.code, 'READER_STALLED');
      assert.match(outcome.message, /waited 50 ms for messages of main: /);
      assert.ok(source.pulled < all.length, `${source.pulled} of ${all.length} lines taken from the source`);
      const ids: Array<string | null> = [];
      for (let next = await late.next(); !next.done; next = await late.next()) ids.push(next.value.id);
      const index = await run.done;
      assert.equal(index.input.lines, all.length);
      // One message per main API message id, in order, each once: as the lines have them.
      const expected: string[] = [];
      for (const line of all) {
        const value = JSON.parse(line);
        const id = value.message?.id;
        if (value.type === 'assistant' && value.parent_tool_use_id == null && expected.at(-1) !== id) {
          expected.push(id);
        }
      }
      assert.deepEqual(ids, expected);
    },
  );
}

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
