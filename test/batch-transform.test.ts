import assert from 'node:assert/strict';
import { once } from 'node:events';
import { PassThrough, Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { test } from 'node:test';
import { BatchTransform, createBatchTransform, type RecordBatch } from '../src/entry/chain.js';

const line = (lineNo: number): RecordBatch[number] => ({
  kind: 'quarantine',
  lineNo,
  raw: Buffer.from(`line ${lineNo}`),
  reason: 'not-json',
  final: true,
});

async function collect(stream: NodeJS.ReadableStream): Promise<number[]> {
  const seen: number[] = [];
  for await (const batch of stream as AsyncIterable<RecordBatch>)
    for (const rec of batch) seen.push(rec.lineNo);
  return seen;
}

test('createBatchTransform hands on what transformBatch ' +
  'returns, and what flushAtEnd returns last', async () => {
  const stage = createBatchTransform({
    transformBatch: (batch) => batch.filter((rec) => rec.lineNo % 2 === 1),
    flushAtEnd: () => [line(99)],
  });
  const source = Readable.from(
    [
      [line(1), line(2)],
      [line(3), line(4)],
    ],
    { objectMode: true },
  );
  const [seen] = await Promise.all([collect(stage), pipeline(source, stage)]);
  assert.deepEqual(seen, [1, 3, 99]);
});

test('a promise from transformBatch holds the next batch until it settles (backpressure)', async () => {
  const calls: number[] = [];
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const stage = createBatchTransform({
    transformBatch(batch) {
      calls.push(batch[0].lineNo);
      return batch[0].lineNo === 1 ? held.then(() => batch) : batch;
    },
  });
  stage.write([line(1)]);
  stage.write([line(2)]);
  stage.end();
  const seen = collect(stage);
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(calls, [1], 'the second batch waits for the first');
  release();
  assert.deepEqual(await seen, [1, 2]);
  assert.deepEqual(calls, [1, 2]);
});

test('a throw or a rejection in transformBatch fails the stream with that error', async () => {
  for (const fail of [
    () => {
      throw Object.assign(new Error('thrown'), { code: 'E_THROWN' });
    },
    () => Promise.reject(Object.assign(new Error('rejected'), { code: 'E_REJECTED' })),
  ]) {
    const stage = createBatchTransform({ transformBatch: fail });
    stage.write([line(1)]);
    const [err] = await once(stage, 'error');
    assert.match((err as { code: string }).code, /^E_(THROWN|REJECTED)$/);
  }
});

test('teardown runs on destroy; the chain error wins over one teardown throws', async () => {
  const torn: Array<string | null> = [];
  const stage = createBatchTransform({
    transformBatch: (batch) => batch,
    teardown(error) {
      torn.push(error?.message ?? null);
      throw new Error('teardown failed');
    },
  });
  stage.destroy(new Error('interrupted'));
  const [err] = await once(stage, 'error');
  assert.equal((err as Error).message, 'interrupted');
  assert.deepEqual(torn, ['interrupted']);

  const quiet = createBatchTransform({
    transformBatch: (batch) => batch,
    teardown: () => {
      throw new Error('teardown failed');
    },
  });
  quiet.destroy();
  const [alone] = await once(quiet, 'error');
  assert.equal((alone as Error).message, 'teardown failed');
});

test('a sink hands batches on only while something reads its output', { timeout: 30_000 }, async () => {
  class CountingSink extends BatchTransform {
    count = 0;
    constructor() {
      super({ sink: true });
    }
    protected override transformBatch(batch: RecordBatch): RecordBatch {
      this.count += batch.length;
      return batch;
    }
  }
  // At the end of a pipeline nothing reads it: it must take every batch, beyond its buffer.
  const last = new CountingSink();
  const many = Array.from({ length: 200 }, (_, i) => [line(i)]);
  await pipeline(Readable.from(many, { objectMode: true }), last);
  assert.equal(last.count, 200);
  // Read: it hands every batch on.
  const middle = new CountingSink();
  const out: number[] = [];
  const reader = new Writable({
    objectMode: true,
    write(batch: RecordBatch, _enc, cb) {
      out.push(...batch.map((rec) => rec.lineNo));
      cb();
    },
  });
  const three = Readable.from(many.slice(0, 3), { objectMode: true });
  await pipeline(three, middle, new PassThrough({ objectMode: true }), reader);
  assert.deepEqual(out, [0, 1, 2]);
});
