// The projection's edges that a plain reading of the fixtures does not reach: readers that start
// late and replay a channel's `.jsonl`, readers that stop early, and what the handles report.
import assert from 'node:assert/strict';
import fs, { readFileSync, statSync, type ReadStream } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';
import { test } from 'node:test';
import { open, type Message, type RunEvent } from '../src/index.js';
import { chunked, FIXTURES, tmpDir } from './helpers.js';

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

test('a late reader replaying a long .jsonl reads the file only as fast as its consumer takes messages', async () => {
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
    assert.equal(file.destroyed, false, 'the replay read the whole file for a consumer that took one message');
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
