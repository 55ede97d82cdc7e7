// The projection's readers that start late: they replay a channel's `.jsonl` (or the memory
// buffer) from the first line, as fast as they are consumed, then read on live; readers that stop
// early stop reading; a file gone or cut fails them with a coded error.
import assert from 'node:assert/strict';
import fs, {
  createReadStream,
  readFileSync,
  type ReadStream,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { PassThrough, Readable } from 'node:stream';
import { test } from 'node:test';
import { type Message, open, type RunEvent, type SubagentHandle, type ToolCall } from '../src/index.js';
import { chunked, FIXTURES, processWarnings, ROOT, splitEvery, tmpDir } from './helpers/helpers.js';
import { writeStream } from '../bench/gen.js';
import { LineRuns } from '../src/views/projection/line-runs.js';
import {
  fixtureLines,
  HANG,
  longMainRun,
  recordOrderBytes,
  STALL,
  until,
} from './helpers/projection-runs.js';

/** The streams each watch sees: those opened on files under its folder while it watches. */
const watches = new Set<{ dir: string; streams: ReadStream[] }>();

/**
 * How the runs here open a channel file to replay it (`open()`'s `openChannelFile`): as
 * `fs.createReadStream` does, each stream shown to the watches.
 */
function openChannelFile(path: string): ReadStream {
  const stream = createReadStream(path);
  for (const watch of watches) if (path.startsWith(watch.dir)) watch.streams.push(stream);
  return stream;
}

/**
 * Watches the read streams a run given `openChannelFile` opens on files under `dir` from now
 * on, so a test can see how far a replay has read each file.
 */
function watchReads(dir: string): { streams: ReadStream[]; restore(): void } {
  const watch = { dir, streams: [] as ReadStream[] };
  watches.add(watch);
  return { streams: watch.streams, restore: () => watches.delete(watch) };
}

/** A read stream has stopped: read to its end and closed, or its buffer full with nobody reading. */
const stopped = (stream: ReadStream) =>
  stream.destroyed || stream.readableLength >= stream.readableHighWaterMark;

/** What tells two messages apart. */
const idOf = (message: Message) => `${message.channel}:${message.index}:${message.id}`;

const closed = (stream: ReadStream) => until(() => stream.closed);

/** A finished run with files written, its main channel long, and its main messages read live. */
async function finishedLongRun(copies = 3000) {
  const out = join(tmpDir(), 'out');
  const run = open(chunked([longMainRun(copies)]), { out, openChannelFile, readerHighWaterLines: 8 });
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
  const recording = join(FIXTURES, 'nested-depth-3.jsonl');
  const cut = handles.find((handle) => expectedMessages(recording, handle.id) > 1)!;
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

test('a late events loop over more channels than it keeps open reads them in order, 64 at most', async () => {
  const dir = tmpDir();
  const input = join(dir, 'fanout.jsonl');
  await writeStream({ sizeBytes: 512 * 1024, fanout: 100, shape: 'small', seed: 7 }, input);
  const out = join(dir, 'out');
  const run = open(input, { out, openChannelFile });
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

/**
 * A program that reads, for each of a fan-out's subagents, its messages and then its tool calls
 * (a replay from its file once it ended), writing files to `out`; prints what it read as JSON:
 * readers that read whole, failures by code, and the most replay files open at once.
 */
const LATE_READERS_PROGRAM = `
import { createReadStream } from 'node:fs';
const [index, input, out] = process.argv.slice(2);
const { open } = await import(index);
let reading = 0;
let most = 0;
const openChannelFile = (path) => {
  const stream = createReadStream(path);
  most = Math.max(most, ++reading);
  stream.once('close', () => reading--);
  return stream;
};
const run = open(input, { out, openChannelFile });
const failed = {};
let ok = 0;
const tasks = [];
for await (const sub of run.allSubagents) {
  tasks.push((async () => {
    try {
      for await (const message of sub.messages) await message.text;
      for await (const call of sub.toolCalls) await call.status;
      ok++;
    } catch (err) {
      failed[err.code] = (failed[err.code] ?? 0) + 1;
    }
  })());
}
await Promise.all(tasks);
await run.done;
console.log(JSON.stringify({ subagents: tasks.length, ok, failed, most }));
`;

/**
 * `subagents` spawned at once on main, each writing a message with a tool call and its result,
 * then each ended in turn while the files sink still writes: the late readers of those ended
 * replay their files beside the files the sink holds open.
 */
function endingFanout(subagents: number): Buffer {
  const lines: object[] = [];
  const line = (type: string, parent: string | null, content: object[], id?: string) =>
    lines.push({ type, parent_tool_use_id: parent, message: { role: type, ...(id ? { id } : {}), content } });
  for (let k = 0; k < subagents; k++) {
    line('assistant', null, [{ type: 'tool_use', id: `toolu_f${k}`, name: 'Agent', input: {} }], `s${k}`);
  }
  for (let k = 0; k < subagents; k++) {
    const call = { type: 'tool_use', id: `toolu_b${k}`, name: 'Bash', input: { command: `echo ${k}` } };
    line('assistant', `toolu_f${k}`, [{ type: 'text', text: `t${k}` }, call], `m${k}`);
    line('user', `toolu_f${k}`, [{ type: 'tool_result', tool_use_id: `toolu_b${k}`, content: `${k}` }]);
  }
  for (let k = 0; k < subagents; k++) {
    line('user', null, [{ type: 'tool_result', tool_use_id: `toolu_f${k}`, content: 'done' }]);
    line('assistant', null, [{ type: 'text', text: `after ${k}` }], `a${k}`);
  }
  return Buffer.from(lines.map((value) => JSON.stringify(value)).join('\n') + '\n');
}

test('400 late readers under ulimit -n 256 all read: the replay files open at once are bounded, ' +
  'the rest wait', async () => {
  const dir = tmpDir();
  const input = join(dir, 'fanout.jsonl');
  writeFileSync(input, endingFanout(400));
  const program = join(dir, 'late-readers.mjs');
  writeFileSync(program, LATE_READERS_PROGRAM);
  const index = pathToFileURL(join(ROOT, 'dist', 'src', 'index.js')).href;
  const script = 'ulimit -n 256 && exec "$0" "$@"';
  const child = spawnSync('sh', ['-c', script, process.execPath, program, index, input, join(dir, 'out')], {
    encoding: 'utf8',
  });
  assert.equal(child.status, 0, child.stderr);
  const read = JSON.parse(child.stdout);
  assert.deepEqual(read, { subagents: 400, ok: 400, failed: {}, most: read.most });
  // Half of what the open-file limit leaves the files sink (256 − 32 kept aside, at most 128).
  assert.ok(read.most > 1 && read.most <= 64, `at most 64 replay files open at once, not ${read.most}`);
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

test('a line too long to hold is held as what was routed of it: without files, late readers ' +
  'replay every channel as live ones read it, the calls its results settle included', async () => {
  const { lines, long, stages } = withLineOver1KiB();
  // Chunks shorter than the line: it is spooled as it streams past.
  const input = Buffer.from(lines.join('\n') + '\n');
  const run = open(chunked(splitEvery(input, 256)), { spec: { stages, sinks: [] } });
  const callsOf = async (calls: AsyncIterable<ToolCall>) => {
    const seen: unknown[] = [];
    for await (const c of calls) seen.push([c.id, c.name, await c.status, await c.output]);
    return seen;
  };
  const early: RunEvent[] = [];
  const reading = (async () => {
    for await (const event of run.events) early.push(event);
  })();
  // Read live: each channel's tool calls from its start.
  const live = new Map<string | null, Promise<unknown[]>>([[null, callsOf(run.toolCalls)]]);
  const handles: SubagentHandle[] = [];
  for await (const handle of run.allSubagents) {
    handles.push(handle);
    live.set(handle.id, callsOf(handle.toolCalls));
  }
  await run.done;
  await reading;
  assert.deepEqual(
    early.map((event) => event.lineNo),
    lines.map((_line, at) => at + 1),
  );
  // The long line is routed with its top-level scalar members (and tool blocks) only.
  const spooled = early[long];
  assert.equal(spooled.kind, 'line');
  if (spooled.kind === 'line') assert.equal(spooled.line.type, JSON.parse(lines[long]).type);
  // A late events loop replays the run as it was routed, the long line's scalars included.
  const late: RunEvent[] = [];
  for await (const event of run.events) late.push(event);
  assert.deepEqual(late, early);
  // Every channel replays as it was read live, those of lines too long to hold too.
  const longResults = lines.filter(
    (line) => Buffer.byteLength(line) > 1024 && line.includes('"tool_result"'),
  );
  assert.ok(longResults.length > 0);
  let cut = 0;
  for (const [id, calls] of [
    [null, run.toolCalls],
    ...handles.map((h) => [h.id, h.toolCalls] as const),
  ] as const) {
    const seen = await live.get(id)!;
    assert.deepEqual(await callsOf(calls), seen, `channel ${id ?? 'main'}`);
    cut += seen.filter((c) => (c as unknown[])[3] === '[…cut…]').length;
  }
  // Each result on a long line settled its call, its output cut.
  assert.equal(cut, longResults.length);
});

test('with files, a late reader gets a line past ' +
  'maxLineBytes as a live one did: top-level scalars', async () => {
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

for (const out of [undefined, 'files'] as const) {
  test(`a reader opened midway replays the lines so far once, then reads on live ` +
    `(${out ?? 'memory'})`, async () => {
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

test('a late reader replays a line too long to hold ' +
  'from the .jsonl as it was routed: scalar members', async () => {
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

test('a message on a line too long to hold is marked tooLong with its bytes and its channel file, ' +
  'live and replayed; its neighbours are whole', async () => {
  const lines = fixtureLines('nested-depth-3');
  const at = lines.findIndex((line) => JSON.parse(line).type === 'assistant');
  const template = JSON.parse(lines[at]);
  // An assistant message of main with a tool call, longer than the line parser holds here.
  const call = { type: 'tool_use', id: 'toolu_long', name: 'Bash', input: { command: 'c'.repeat(9000) } };
  const message = { ...template.message, id: 'msg_long', content: [call] };
  const long = JSON.stringify({ ...template, message });
  const input = [...lines.slice(0, at + 1), long, ...lines.slice(at + 1)];
  const stages = ['line-parser', 'input-format', 'version-guard', 'channel-router', 'thinking-truncator'].map(
    (use) => (use === 'line-parser' ? { use, maxLineBytes: 4096 } : { use }),
  );
  const chunks = () => chunked(splitEvery(Buffer.from(input.join('\n') + '\n'), 1024));
  const cutsOf = async (messages: AsyncIterable<Message>) => {
    const seen: Array<[string | null, number, unknown]> = [];
    for await (const message of messages) {
      seen.push([message.id, (await message.blocks).length, message.tooLong]);
    }
    return seen;
  };
  const out = join(tmpDir(), 'out');
  const run = open(chunks(), { out, spec: { stages, sinks: [] } });
  const live = cutsOf(run.messages);
  await run.done;
  const early = await live;
  const late = await cutsOf(run.messages);
  const file = join(out, 'main.jsonl');
  const marked = { bytes: Buffer.byteLength(long), file };
  // The long line is a message of its own: no id, its tool call its one block, and where to
  // read it whole.
  assert.deepEqual(
    early.filter(([, , cut]) => cut !== null),
    [[null, 1, marked]],
  );
  assert.ok(early.filter(([, , cut]) => cut === null).every(([id, blocks]) => id !== null && blocks > 0));
  assert.deepEqual(late, early);
  assert.ok(readFileSync(file, 'utf8').split('\n').includes(long));
  // Without files the line is nowhere to read again: the marker says so.
  const memory = open(chunks(), { spec: { stages, sinks: [] } });
  const held = cutsOf(memory.messages);
  await memory.done;
  assert.deepEqual(
    (await held).filter(([, , cut]) => cut !== null),
    [[null, 1, { bytes: marked.bytes, file: null }]],
  );
});

test('with files, a reader opened at once holds no line ' +
  'in memory: a late events loop replays the files', async () => {
  const lines = fixtureLines('binary-tree-depth-3');
  const input = Buffer.from(lines.join('\n') + '\n');
  // Room for the record order (12 bytes a record, and each tree change), not for the lines themselves.
  const first = open(chunked([input]));
  let changes = 0;
  for await (const event of first.events) changes += event.changes.length;
  await first.done;
  const maxBufferedBytes = recordOrderBytes(lines.length, changes);
  assert.ok(maxBufferedBytes < input.length);
  const run = open(chunked([input]), { out: join(tmpDir(), 'out'), maxBufferedBytes });
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
  const run = open(input, { out, openChannelFile, readerHighWaterLines: 4 });
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
  const run = open(path, { out, openChannelFile });
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

test("a Copilot run's late readers replay the lines routed, not its input lines, with files or " +
  "without", async () => {
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

test('a late events loop without files replays each ' +
  'line from its bytes: 1e999 is Infinity again', async () => {
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
      const warned = run.session.warningAt(run.session.warnings.length);
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

/** A Claude Code `system` line, stray before another producer's stream. */
const STRAY_CLAUDE = JSON.stringify({
  type: 'system',
  subtype: 'init',
  session_id: 's',
  model: 'm',
  tools: [],
});
/** A Codex event, stray before a Claude Code stream. */
const STRAY_CODEX = JSON.stringify({ type: 'thread.started', thread_id: 'stray' });
const otherAgentLines = (name: string) =>
  readFileSync(join(FIXTURES, 'other-agents', name), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '');

/**
 * Opens a run over `lines` handed over one at a time, each once it was routed (an `events`
 * loop from the start sees it): `at(i, run)` is called before line `i` is written. Resolves
 * with what that loop saw and the run's index.json.
 */
async function lineByLine(
  lines: readonly string[],
  out: string | undefined,
  at: (i: number, run: ReturnType<typeof open>) => void,
) {
  const input = new PassThrough();
  const run = open(input, { out });
  const early: RunEvent[] = [];
  const events = run.events[Symbol.asyncIterator]();
  for (let i = 0; i < lines.length; i++) {
    at(i, run);
    input.write(lines[i] + '\n');
    for (let next = await events.next(); !next.done; next = await events.next()) {
      early.push(next.value);
      if (next.value.lineNo > i) break;
    }
  }
  input.end();
  for (let next = await events.next(); !next.done; next = await events.next()) early.push(next.value);
  return { run, early, index: await run.done };
}

/** A message as a test compares it: where it is, its id and its whole text. */
const messageSeen = async (messages: AsyncIterable<Message>) => {
  const seen: string[] = [];
  for await (const message of messages) seen.push(`${idOf(message)}:${await message.text}`);
  return seen;
};

test('a Codex stream after a stray Claude Code line: a main reader attached after lines passed ' +
  'reads what one attached from the start reads, with files or without', async () => {
  const lines = [STRAY_CLAUDE, ...otherAgentLines('codex-spawn.jsonl')];
  for (const out of [undefined, join(tmpDir(), 'out')]) {
    for (const lateAt of [2, 5]) {
      let fromStart: Promise<string[]> | undefined;
      let late: Promise<string[]> | undefined;
      const { index } = await lineByLine(lines, out && `${out}-${lateAt}`, (i, run) => {
        if (i === 0) fromStart = messageSeen(run.messages);
        if (i === lateAt) late = messageSeen(run.messages);
      });
      assert.equal(index.producer, 'codex');
      assert.ok(index.warnings.some((w: { code: string }) => w.code === 'INPUT_FORMAT_CHANGED'));
      const expected = await fromStart!;
      assert.ok(expected.length > 1);
      const what = `attached before line ${lateAt + 1}, ${out ? 'files' : 'memory'}`;
      assert.deepEqual(await late!, expected, what);
    }
  }
});

test('a run whose producer auto changed: a late events loop and a late reader replay each line ' +
  'as it was routed, in its place, fed a line at a time or at once, with files or without', async () => {
  // Each with whether its first line is routed as it came (a Claude Code line is; a Codex
  // event is routed as what it maps to).
  const runs = [
    ['a stray Codex line before Claude Code', [STRAY_CODEX, ...fixtureLines('foreground-fanout-3')], false],
    ['a stray Claude Code line before Codex', [STRAY_CLAUDE, ...otherAgentLines('codex-spawn.jsonl')], true],
  ] as const;
  for (const [name, lines, firstAsItCame] of runs) {
    for (const out of [undefined, join(tmpDir(), 'out')]) {
      for (const feed of ['a line at a time', 'at once']) {
        const what = `${name}, ${feed}, ${out ? 'files' : 'memory'}`;
        let run: ReturnType<typeof open>;
        let early: RunEvent[];
        let mainFromStart: Promise<string[]> | undefined;
        if (feed === 'at once') {
          run = open(chunked([Buffer.from(lines.join('\n') + '\n')]), { out: out && `${out}-once` });
          mainFromStart = messageSeen(run.messages);
          early = [];
          for await (const event of run.events) early.push(event);
          await run.done;
        } else {
          ({ run, early } = await lineByLine(lines, out, (i, r) => {
            if (i === 0) mainFromStart = messageSeen(r.messages);
          }));
        }
        const index = await run.done;
        assert.ok(index.warnings.some((w: { code: string }) => w.code === 'INPUT_FORMAT_CHANGED'), what);
        const late: RunEvent[] = [];
        for await (const event of run.events) late.push(event);
        assert.deepEqual(late, early, what);
        const first = early[0];
        assert.ok(first.kind === 'line' && first.lineNo === 1, what);
        assert.equal(isDeepStrictEqual(first.line, JSON.parse(lines[0])), firstAsItCame, what);
        assert.deepEqual(await messageSeen(run.messages), await mainFromStart!, what);
      }
    }
  }
});

test('with files, a stray Codex line is the only line of a Claude Code run main holds in memory: ' +
  'a late main reader under a small maxBufferedBytes replays the rest from main.jsonl', async () => {
  const lines = [STRAY_CODEX, ...fixtureLines('foreground-fanout-3')];
  const input = Buffer.from(lines.join('\n') + '\n');
  // Room for the stray line's packed bytes, not for main's other lines.
  const maxBufferedBytes = 4096;
  const mainBytes = lines
    .filter((line) => !line.includes('"parent_tool_use_id":"'))
    .reduce((sum, line) => sum + Buffer.byteLength(line), 0);
  assert.ok(mainBytes > maxBufferedBytes, `${mainBytes} bytes on main`);
  const fromStart = open(chunked([input]));
  const expected = messageSeen(fromStart.messages);
  await fromStart.done;
  const run = open(chunked([input]), { out: join(tmpDir(), 'out'), maxBufferedBytes });
  const index = await run.done;
  assert.equal(index.producer, 'claude');
  assert.deepEqual(await messageSeen(run.messages), await expected);
  assert.ok((await expected).length > 1);
});

test('a channel\'s line runs place each line in its file or in memory: a mapped line has its ' +
  'event\'s line in the file, a derived one none', () => {
  // Every mix of the three kinds over six lines: as routed (r), mapped (m), derived (d).
  const kinds = ['r', 'm', 'd'] as const;
  for (let mix = 0; mix < 3 ** 6; mix++) {
    const lines = Array.from({ length: 6 }, (_, k) => kinds[Math.floor(mix / 3 ** k) % 3]);
    const runs = new LineRuns();
    for (const kind of lines) runs.add(kind === 'r', kind !== 'd');
    // Counted apart: each line's place in the file (every line but a derived one has one) or in memory.
    const places: Array<['file' | 'memory', number]> = [];
    let file = 0;
    let memory = 0;
    for (const kind of lines) {
      places.push(kind === 'r' ? ['file', file] : ['memory', memory++]);
      if (kind !== 'd') file++;
    }
    assert.equal(runs.fileLines, file, lines.join(''));
    const walk = runs.walk();
    assert.deepEqual(
      lines.map(() => walk.next()),
      places.map(([where, at]) => (where === 'file' ? at : null)),
      lines.join(''),
    );
    for (let count = 0; count <= lines.length; count++) {
      const spanned: Array<['file' | 'memory', number]> = [];
      for (const span of runs.spans(count)) {
        assert.ok(span.to > span.from, lines.join(''));
        for (let at = span.from; at < span.to; at++) spanned.push([span.source, at]);
      }
      assert.deepEqual(spanned, places.slice(0, count), `${lines.join('')}, ${count} lines`);
      assert.equal(runs.needsMemory(count), places.slice(0, count).some(([where]) => where === 'memory'));
    }
  }
});

test("a subagent's tool call and its result on lines too long to hold are in its toolCalls: name " +
  'and id, input and output cut, live and replayed, with files or without, as index.json ' +
  'counts', async () => {
  const lines = fixtureLines('foreground-fanout-3');
  const isBash = (b: { type: string; name?: string }) => b.type === 'tool_use' && b.name === 'Bash';
  const at = lines.findIndex((line) => {
    const value = JSON.parse(line);
    return value.type === 'assistant' && value.parent_tool_use_id && value.message.content.some(isBash);
  });
  const value = JSON.parse(lines[at]);
  const call = value.message.content.find((b: { type: string }) => b.type === 'tool_use');
  call.input = { ...call.input, command: 'c'.repeat(9000) };
  lines[at] = JSON.stringify(value);
  const resultAt = lines.findIndex((line) => line.includes(`"tool_use_id":"${call.id}"`));
  const result = JSON.parse(lines[resultAt]);
  const block = result.message.content.find((b: { tool_use_id?: string }) => b.tool_use_id === call.id);
  block.content = 'o'.repeat(9000);
  lines[resultAt] = JSON.stringify(result);
  const stages = ['line-parser', 'input-format', 'version-guard', 'channel-router', 'thinking-truncator'].map(
    (use) => (use === 'line-parser' ? { use, maxLineBytes: 4096 } : { use }),
  );
  const callsOf = async (handle: SubagentHandle) => {
    const seen: Array<[string, string, unknown, string, string | null]> = [];
    for await (const c of handle.toolCalls) {
      seen.push([c.id, c.name, c.input, await c.status, await c.output]);
    }
    return seen;
  };
  for (const out of [undefined, join(tmpDir(), 'out')]) {
    // Chunks shorter than the long lines: they are spooled, and each handle's reader reads live.
    const run = open(chunked(splitEvery(Buffer.from(lines.join('\n') + '\n'), 512)), {
      out,
      spec: { stages, sinks: [] },
    });
    let handle: SubagentHandle | undefined;
    let live: ReturnType<typeof callsOf> | undefined;
    for await (const h of run.allSubagents) {
      if (h.id !== value.parent_tool_use_id) continue;
      handle = h;
      live = callsOf(h);
    }
    const index = await run.done;
    const calls = await live!;
    assert.deepEqual(
      calls.filter(([id]) => id === call.id),
      [[call.id, 'Bash', '[…cut…]', 'finished', '[…cut…]']],
      out ? 'files' : 'memory',
    );
    const channel = index.channels.find((c) => c.id === handle!.id)!;
    assert.equal(channel.counts.tool_use, calls.length);
    // With files, a late reader reads the long lines back from the .jsonl as the live one did.
    if (out) assert.deepEqual(await callsOf(handle!), calls);
  }
});

test('a projection composed by hand replays late readers from the store its sink was made with, ' +
  'shows thinking as the run\'s policy says, and takes one sink only', async () => {
  const { Session } = await import('../src/model/session.js');
  const { Projection, messagesOf } = await import('../src/views/projection.js');
  const { createProjectionSink } = await import('../src/chain/sinks/projection.js');
  const { FileChannelStore } = await import('../src/chain/sinks/channel-store.js');
  const { createLineParser } = await import('../src/chain/stages/line-parser.js');
  const { createChannelRouter } = await import('../src/chain/stages/channel-router.js');
  const { createThinkingTruncator } = await import('../src/chain/stages/thinking-truncator.js');
  const { createFilesSink } = await import('../src/chain/sinks/files.js');
  const { pipeline } = await import('node:stream/promises');
  const input = [1, 2, 3].map((n) =>
    JSON.stringify({
      type: 'assistant',
      parent_tool_use_id: null,
      message: {
        id: `m${n}`,
        content: [
          { type: 'thinking', thinking: `secret ${n}`, signature: 's' },
          { type: 'text', text: `said ${n}` },
        ],
      },
    }),
  );
  /** Runs the lines, files and projection, the store given or none; the messages read after. */
  const run = async (withStore: boolean) => {
    const out = join(tmpDir(), 'out');
    const session = new Session();
    const projection = new Projection(session);
    const files = new FileChannelStore(out, () => session.heldLineBytes);
    const read: Array<[string | null, number, number]> = [];
    const store = {
      read(channel: string | null, from: number, to: number) {
        read.push([channel, from, to]);
        return files.read(channel, from, to);
      },
    };
    const sink = createProjectionSink({ session, projection, store: withStore ? store : null });
    assert.throws(() => createProjectionSink({ session, projection }), { code: 'ERR_CONFIG' });
    await pipeline(
      chunked([Buffer.from(input.join('\n') + '\n')]),
      createLineParser({ session }),
      createChannelRouter({ session }),
      createThinkingTruncator({ session, mode: 'drop' }),
      createFilesSink({ session, out, store: files }),
      sink,
    );
    const said: string[] = [];
    for await (const message of messagesOf(projection, null))
      for (const block of await message.blocks)
        said.push(`${block.type}:${'text' in block ? block.text : ''}`);
    return { said, read };
  };
  const fromStore = await run(true);
  const fromMemory = await run(false);
  assert.deepEqual(fromStore.said, ['text:said 1', 'text:said 2', 'text:said 3']);
  assert.deepEqual(fromMemory.said, fromStore.said);
  assert.deepEqual(fromStore.read, [[null, 0, 3]]);
  assert.deepEqual(fromMemory.read, []);
});

test('replays waiting for one of the store\'s files get them first come first served, ' +
  '2,000 waiting with no listener-leak warning', async () => {
  const { FileChannelStore } = await import('../src/chain/sinks/channel-store.js');
  const warnings = processWarnings();
  const out = tmpDir();
  const opened: string[] = [];
  let most = 0;
  const store = new FileChannelStore(
    out,
    () => 1 << 20,
    (path) => {
      opened.push(path);
      most = Math.max(most, store.openFiles);
      return createReadStream(path);
    },
    2,
  );
  const ids = Array.from({ length: 2000 }, (_, i) => `toolu_${i}`);
  fs.mkdirSync(join(out, 'agents'));
  for (const id of ids) fs.writeFileSync(join(out, `${store.stemOf(id)}.jsonl`), '{"n":1}\n{"n":2}\n');
  const read = async (id: string) => {
    const lines = [];
    for await (const line of store.read(id, 0, 2)) lines.push(line);
    return lines;
  };
  for (const lines of await Promise.all(ids.map(read))) assert.deepEqual(lines, [{ n: 1 }, { n: 2 }]);
  assert.deepEqual(opened, ids.map((id) => store.jsonlPath(id)));
  assert.equal(most, 2);
  await until(() => store.openFiles === 0);
  assert.deepEqual(await warnings.settled(), []);
});
