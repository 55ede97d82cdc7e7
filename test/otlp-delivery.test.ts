// SpanDelivery and the OTLP sink's end of run against a real loopback OTLP/HTTP receiver, with
// the SDK's own protobuf exporter: batching, backpressure, retries, giving up, recovering, and
// what counts as lost. Tests wait on what the receiver got or on the exporter's answers.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BasicTracerProvider, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { RecordBatch } from '../src/model/record.js';
import { createOtlpSink, MAX_LOSS_REASONS, OTHER_LOSSES, SpanDelivery } from '../src/chain/sinks/otlp.js';
import { rejectedOf, retryAfterMsOf, type SpanSender } from '../src/chain/sinks/otlp-http.js';
import { fixtureFiles } from './helpers/helpers.js';
import { routeThrough } from './helpers/otlp-tree.js';
import { startOtlpReceiver, type OtlpReceiver } from './servers/otlp-receiver.js';

/** Ended SDK spans with these names, in this order. */
function spansNamed(names: string[]): ReadableSpan[] {
  const ended: ReadableSpan[] = [];
  const provider = new BasicTracerProvider({
    spanProcessors: [
      {
        onStart() {},
        onEnd: (span) => ended.push(span),
        forceFlush: () => Promise.resolve(),
        shutdown: () => Promise.resolve(),
      },
    ],
  });
  const tracer = provider.getTracer('delivery-test');
  for (const name of names) tracer.startSpan(name).end();
  return ended;
}

/**
 * The SDK's protobuf exporter to the receiver, reporting each answer after SpanDelivery has
 * seen it, so that a test can wait for an answer to have been handled.
 */
function exporterTo(receiver: OtlpReceiver | { url: string }) {
  const real = new OTLPTraceExporter({ url: `${receiver.url}/v1/traces`, timeoutMillis: 60_000 });
  let answers = 0;
  const listeners = new Set<() => void>();
  const exporter: SpanExporter = {
    export(spans, done) {
      real.export(spans, (result) => {
        done(result);
        answers++;
        for (const l of [...listeners]) l();
      });
    },
    shutdown: () => real.shutdown(),
  };
  /** Resolves once the exporter has answered `n` requests in all. */
  const answered = (n: number) =>
    new Promise<void>((resolve) => {
      const check = () => {
        if (answers < n) return;
        listeners.delete(check);
        resolve();
      };
      listeners.add(check);
      check();
    });
  return { exporter, answered, shutdown: () => real.shutdown() };
}

/** Resolves once the receiver has received `n` requests (answered or held). */
async function requestsReceived(receiver: OtlpReceiver, n: number): Promise<void> {
  while (receiver.requests.length < n) await new Promise((resolve) => setTimeout(resolve, 5));
}

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const counts = (d: SpanDelivery) => ({
  total: d.total,
  delivered: d.delivered,
  lost: d.lost,
  pending: d.pending,
  available: d.available,
});

describe('SpanDelivery against a loopback OTLP/HTTP receiver', () => {
  let receiver: OtlpReceiver;
  before(async () => {
    receiver = await startOtlpReceiver();
  });
  after(async () => {
    await receiver?.close();
  });
  const reset = () => {
    receiver.release();
    receiver.spans.length = 0;
    receiver.requests.length = 0;
    receiver.behave('accept');
  };

  test('one batch in flight at a time, at most ' +
    'maxBatchSpans per request; drain waits for all of it', async () => {
    reset();
    // The receiver's span count when each request arrives gives each request's size.
    const before: number[] = [];
    receiver.behave(() => (before.push(receiver.spans.length), 'accept'));
    const { exporter, shutdown } = exporterTo(receiver);
    const unavailable: string[] = [];
    const delivery = new SpanDelivery(
      exporter,
      { retryMs: 60_000, maxQueueSpans: 100, maxBatchSpans: 2 },
      (e) => unavailable.push(e),
    );
    for (const span of spansNamed(['a', 'b', 'c', 'd', 'e', 'f'])) delivery.push(span);
    // The first span left at once; the others wait for it.
    assert.equal(delivery.pending, 6);
    await delivery.drain(600_000);
    const sizes = [...before.slice(1), receiver.spans.length].map((n, i) => n - (i === 0 ? 0 : before[i]));
    assert.deepEqual(sizes, [1, 2, 2, 1]);
    assert.deepEqual(
      receiver.spans.map((s) => s.name),
      ['a', 'b', 'c', 'd', 'e', 'f'],
    );
    assert.deepEqual(counts(delivery), { total: 6, delivered: 6, lost: 0, pending: 0, available: true });
    assert.equal(delivery.lastError, null);
    assert.deepEqual(unavailable, []);
    // Once drained, the delivery is over: a late span counts as lost and is not sent.
    delivery.push(spansNamed(['late'])[0]);
    assert.deepEqual(counts(delivery), { total: 7, delivered: 6, lost: 1, pending: 0, available: true });
    assert.equal(receiver.requests.length, 4);
    await shutdown();
  });

  test('while a request is held and the queue is full there ' +
    'is no room; room comes back when it is answered', async () => {
    reset();
    receiver.behave('hang');
    const { exporter, answered, shutdown } = exporterTo(receiver);
    const delivery = new SpanDelivery(
      exporter,
      { retryMs: 60_000, maxQueueSpans: 2, maxBatchSpans: 5 },
      () => {},
    );
    const [a, b, c] = spansNamed(['a', 'b', 'c']);
    delivery.push(a);
    await requestsReceived(receiver, 1);
    delivery.push(b);
    assert.equal(delivery.hasRoom(), true, 'one queued of two');
    delivery.push(c);
    assert.equal(delivery.hasRoom(), false, 'two queued of two');
    assert.equal(delivery.pending, 3);
    let roomed = false;
    const room = delivery.whenRoom().then(() => (roomed = true));
    // Let everything else run: the held request keeps the queue full.
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(roomed, false);
    receiver.behave('accept');
    receiver.release();
    await answered(1);
    await room;
    assert.equal(delivery.hasRoom(), true);
    await delivery.drain(600_000);
    assert.deepEqual(
      receiver.spans.map((s) => s.name),
      ['a', 'b', 'c'],
    );
    assert.deepEqual(counts(delivery), { total: 3, delivered: 3, lost: 0, pending: 0, available: true });
    await shutdown();
  });

  test('a refused batch is retried within retryMs and then ' +
    'delivered; the collector never counts as unavailable', async () => {
    reset();
    receiver.behave((n) => (n === 1 ? 500 : 'accept'));
    const { exporter, shutdown } = exporterTo(receiver);
    const unavailable: string[] = [];
    const delivery = new SpanDelivery(
      exporter,
      { retryMs: 60_000, maxQueueSpans: 10, maxBatchSpans: 10 },
      (e) => unavailable.push(e),
    );
    for (const span of spansNamed(['a'])) delivery.push(span);
    await delivery.drain(600_000);
    assert.equal(receiver.requests.length, 2);
    assert.equal(receiver.requests[0].sha1, receiver.requests[1].sha1, 'the same batch again');
    assert.deepEqual(
      receiver.spans.map((s) => s.name),
      ['a'],
    );
    assert.deepEqual(counts(delivery), { total: 1, delivered: 1, lost: 0, pending: 0, available: true });
    assert.equal(delivery.lastError, 'HTTP 500 Internal Server Error');
    assert.deepEqual(unavailable, []);
    await shutdown();
  });

  test('the first retry comes after a short backoff, well inside a retryMs of two seconds', async () => {
    reset();
    receiver.behave((n) => (n === 1 ? 500 : 'accept'));
    const { exporter, shutdown } = exporterTo(receiver);
    const delivery = new SpanDelivery(
      exporter,
      { retryMs: 1900, maxQueueSpans: 10, maxBatchSpans: 10 },
      () => {},
    );
    delivery.push(spansNamed(['a'])[0]);
    await delivery.drain(600_000);
    assert.equal(delivery.delivered, 1, `retried once (${delivery.lastError})`);
    await shutdown();
  });

  test('the backoff doubles from 100 ms: within a retryMs ' +
    'of 1900 a refused batch is tried at most five times', async () => {
    reset();
    receiver.behave(500);
    const { exporter, shutdown } = exporterTo(receiver);
    const unavailable: string[] = [];
    const delivery = new SpanDelivery(
      exporter,
      { retryMs: 1900, maxQueueSpans: 10, maxBatchSpans: 10 },
      (e) => unavailable.push(e),
    );
    delivery.push(spansNamed(['a'])[0]);
    await until('the batch given up', () => unavailable.length > 0);
    // Tries after 0, 100, 300, 700 and 1500 ms; the next pause (1600 ms) would end past retryMs. A
    // slow machine makes fewer tries, never more.
    assert.ok(
      receiver.requests.length >= 2 && receiver.requests.length <= 5,
      `${receiver.requests.length} tries`,
    );
    assert.deepEqual(counts(delivery), { total: 1, delivered: 0, lost: 1, pending: 0, available: false });
    await delivery.drain(0);
    await shutdown();
  });

  test('retryMs 0: a refused batch is given up at once, counted ' +
    'lost, and the collector reported unavailable once', async () => {
    reset();
    receiver.behave(500);
    const { exporter, answered, shutdown } = exporterTo(receiver);
    const unavailable: string[] = [];
    const delivery = new SpanDelivery(exporter, { retryMs: 0, maxQueueSpans: 10, maxBatchSpans: 2 }, (e) =>
      unavailable.push(e),
    );
    for (const span of spansNamed(['a', 'b', 'c'])) delivery.push(span);
    await answered(2);
    assert.deepEqual(counts(delivery), { total: 3, delivered: 0, lost: 3, pending: 0, available: false });
    assert.equal(receiver.requests.length, 2, 'no request sent twice');
    assert.equal(unavailable.length, 1);
    assert.match(unavailable[0], /^HTTP 500\b/);
    assert.equal(delivery.lastError, unavailable[0]);
    await shutdown();
  });

  test('collector unavailable: the queue never holds the run ' +
    'back, keeps the newest, and a collector back gets them', async () => {
    reset();
    receiver.behave((n) => (n === 1 ? 500 : 'hang'));
    const { exporter, answered, shutdown } = exporterTo(receiver);
    const unavailable: string[] = [];
    const delivery = new SpanDelivery(exporter, { retryMs: 0, maxQueueSpans: 2, maxBatchSpans: 10 }, (e) =>
      unavailable.push(e),
    );
    const [a, b, c, d, e, f] = spansNamed(['a', 'b', 'c', 'd', 'e', 'f']);
    delivery.push(a);
    await answered(1);
    assert.equal(delivery.available, false);
    delivery.push(b); // sent, and held by the receiver
    await requestsReceived(receiver, 2);
    for (const span of [c, d, e]) {
      delivery.push(span);
      assert.equal(delivery.hasRoom(), true, 'an unavailable collector never holds the input');
    }
    delivery.push(f);
    assert.deepEqual(counts(delivery), { total: 6, delivered: 0, lost: 3, pending: 3, available: false });
    await delivery.whenRoom();
    receiver.behave('accept');
    receiver.release();
    await delivery.drain(600_000);
    assert.deepEqual(
      receiver.spans.map((s) => s.name),
      ['b', 'e', 'f'],
      'c and d, the oldest, were given up',
    );
    assert.deepEqual(counts(delivery), { total: 6, delivered: 3, lost: 3, pending: 0, available: true });
    assert.equal(unavailable.length, 1);
    await shutdown();
  });

  test('once back, the collector is bounded again, and a new failure is reported again', async () => {
    reset();
    receiver.behave((n) => (n === 1 ? 500 : n === 2 ? 'accept' : n === 3 ? 'hang' : 500));
    const { exporter, answered, shutdown } = exporterTo(receiver);
    const unavailable: string[] = [];
    const delivery = new SpanDelivery(exporter, { retryMs: 0, maxQueueSpans: 1, maxBatchSpans: 10 }, (e) =>
      unavailable.push(e),
    );
    const [a, b, c, d] = spansNamed(['a', 'b', 'c', 'd']);
    delivery.push(a);
    await answered(1);
    delivery.push(b);
    await answered(2);
    assert.equal(delivery.available, true);
    delivery.push(c); // held
    await requestsReceived(receiver, 3);
    delivery.push(d);
    assert.equal(delivery.hasRoom(), false, 'bounded again');
    receiver.behave(500);
    receiver.release(); // c accepted; d is refused
    await answered(4);
    assert.deepEqual(counts(delivery), { total: 4, delivered: 2, lost: 2, pending: 0, available: false });
    assert.equal(unavailable.length, 2);
    await shutdown();
  });

  test('drain gives up at its deadline: what is pending is lost, ' +
    'waiters are released, a late answer changes nothing', async () => {
    reset();
    receiver.behave('hang');
    const { exporter, answered, shutdown } = exporterTo(receiver);
    const delivery = new SpanDelivery(
      exporter,
      { retryMs: 60_000, maxQueueSpans: 1, maxBatchSpans: 1 },
      () => {},
    );
    const [a, b, c] = spansNamed(['a', 'b', 'c']);
    delivery.push(a);
    await requestsReceived(receiver, 1);
    delivery.push(b);
    delivery.push(c);
    assert.equal(delivery.hasRoom(), false);
    const room = delivery.whenRoom();
    await delivery.drain(30);
    await room;
    assert.deepEqual(counts(delivery), { total: 3, delivered: 0, lost: 3, pending: 0, available: true });
    receiver.behave('accept');
    receiver.release();
    await answered(1);
    assert.equal(receiver.spans.length, 1, 'the receiver took it');
    assert.deepEqual(counts(delivery), { total: 3, delivered: 0, lost: 3, pending: 0, available: true });
    assert.equal(receiver.requests.length, 1, 'nothing more was sent');
    // A second drain adds nothing.
    await delivery.drain(30);
    assert.equal(delivery.lost, 3);
    await shutdown();
  });

  test("past the input's deadline: spans made while the collector accepts are delivered; the " +
    'first failure then stops delivery, its batch and later spans lost to it, no retry', async () => {
    reset();
    const { exporter, answered, shutdown } = exporterTo(receiver);
    const delivery = new SpanDelivery(
      exporter,
      { retryMs: 60_000, maxQueueSpans: 10, maxBatchSpans: 1 },
      () => {},
    );
    delivery.endWhenHeldFrom(Date.now());
    await until("the input's deadline", () => delivery.pastInputDeadline);
    const [a, b, c, d] = spansNamed(['a', 'b', 'c', 'd']);
    delivery.push(a);
    delivery.push(b);
    await answered(2);
    assert.deepEqual(counts(delivery), { total: 2, delivered: 2, lost: 0, pending: 0, available: true });
    receiver.behave(400);
    delivery.push(c);
    await answered(3);
    delivery.push(d);
    assert.deepEqual(counts(delivery), { total: 4, delivered: 2, lost: 2, pending: 0, available: true });
    assert.ok(delivery.lastError);
    assert.deepEqual([...delivery.lostFor], [[delivery.lastError, 2]]);
    assert.equal(receiver.requests.length, 3, 'the failed batch was not tried again');
    await shutdown();
  });

  test("a burst that fills the queue once the input's deadline is due, before its timer runs (the " +
    "end's last spans): the deadline judges the queue as it stood then, and every span is " +
    'delivered', async () => {
    reset();
    // Held until the deadline has been judged: the collector has not answered the burst yet.
    receiver.behave('hang');
    const { exporter, shutdown } = exporterTo(receiver);
    const delivery = new SpanDelivery(
      exporter,
      { retryMs: 60_000, maxQueueSpans: 2, maxBatchSpans: 2 },
      () => {},
    );
    delivery.endWhenHeldFrom(Date.now());
    // Due now; its timer runs on a later turn of the event loop, after this burst.
    for (const span of spansNamed(['a', 'b', 'c', 'd'])) delivery.push(span);
    assert.equal(delivery.hasRoom(), false, 'the burst filled the queue');
    const drained = delivery.drain(60_000);
    await until("the input's deadline", () => delivery.pastInputDeadline);
    receiver.behave('accept');
    receiver.release();
    await drained;
    assert.deepEqual(counts(delivery), { total: 4, delivered: 4, lost: 0, pending: 0, available: true });
    assert.deepEqual([...delivery.lostFor], []);
    await shutdown();
  });

  test("a burst that fills the queue as the input's deadline falls due while the input waits for " +
    'room: the input waits no longer, delivery stops, the spans lost to the deadline', async () => {
    reset();
    receiver.behave('hang');
    const { exporter, shutdown } = exporterTo(receiver);
    const delivery = new SpanDelivery(
      exporter,
      { retryMs: 60_000, maxQueueSpans: 2, maxBatchSpans: 2 },
      () => {},
    );
    delivery.endWhenHeldFrom(Date.now());
    for (const span of spansNamed(['a', 'b', 'c', 'd'])) delivery.push(span);
    // Waits before the deadline's timer has run; a request that never ends would hold it.
    await delivery.whenRoom();
    assert.equal(delivery.pastInputDeadline, true);
    assert.deepEqual(counts(delivery), { total: 4, delivered: 0, lost: 4, pending: 0, available: true });
    assert.deepEqual([...delivery.lostFor], [[null, 4]], 'lost to the deadline');
    receiver.behave('accept');
    receiver.release();
    await shutdown();
  });

  test("a queue full before the input's deadline is held back at it: delivery stops, the spans " +
    'lost to the deadline', async () => {
    reset();
    receiver.behave('hang');
    const { exporter, shutdown } = exporterTo(receiver);
    const delivery = new SpanDelivery(
      exporter,
      { retryMs: 60_000, maxQueueSpans: 2, maxBatchSpans: 2 },
      () => {},
    );
    for (const span of spansNamed(['a', 'b', 'c', 'd'])) delivery.push(span);
    await requestsReceived(receiver, 1);
    delivery.endWhenHeldFrom(Date.now() + 1);
    await until("the input's deadline", () => delivery.pastInputDeadline);
    assert.deepEqual(counts(delivery), { total: 4, delivered: 0, lost: 4, pending: 0, available: true });
    assert.deepEqual([...delivery.lostFor], [[null, 4]]);
    receiver.behave('accept');
    receiver.release();
    await shutdown();
  });

  test('drain during a retry backoff stops the retries', async () => {
    reset();
    receiver.behave(500);
    const { exporter, answered, shutdown } = exporterTo(receiver);
    const delivery = new SpanDelivery(
      exporter,
      { retryMs: 600_000, maxQueueSpans: 10, maxBatchSpans: 10 },
      () => {},
    );
    delivery.push(spansNamed(['a'])[0]);
    await answered(1);
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const waiting = timers();
    await delivery.drain(0);
    // The pending retry's timer is cleared: nothing keeps the process alive after the run.
    assert.equal(timers(), waiting - 1);
    assert.deepEqual(counts(delivery), { total: 1, delivered: 0, lost: 1, pending: 0, available: true });
    await shutdown();
  });
});

test('the reason kept for a refused batch: status and ' +
  'reason phrase, once each, or the client error code', async () => {
  // A collector answering each connection with the next raw reply: statuses the exporter does
  // not retry, and one answer that is not HTTP at all.
  const replies = [
    'HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
    'HTTP/1.1 413 \r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
    'HTTP/1.1 418 HTTP 418 refused\r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
    'HTTP/1.1 400 undefined\r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
    'SSH-2.0-OpenSSH_9.6\r\n\r\n',
  ];
  let served = 0;
  const sockets = new Set<Socket>();
  const collector = createTcpServer((socket) => {
    sockets.add(socket);
    const reply = replies[served++];
    socket.once('data', () => socket.end(reply));
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(collector.address() as { port: number }).port}`;
  const { exporter, answered, shutdown } = exporterTo({ url });
  const unavailable: string[] = [];
  const delivery = new SpanDelivery(exporter, { retryMs: 0, maxQueueSpans: 10, maxBatchSpans: 10 }, (e) =>
    unavailable.push(e),
  );
  const reasons: Array<string | null> = [];
  try {
    for (const [i, span] of spansNamed(['a', 'b', 'c', 'd', 'e']).entries()) {
      delivery.push(span);
      await answered(i + 1);
      reasons.push(delivery.lastError);
    }
  } finally {
    await shutdown();
    for (const socket of sockets) socket.destroy();
    collector.close();
  }
  assert.deepEqual(reasons.slice(0, 4), ['HTTP 400 Bad Request', 'HTTP 413', 'HTTP 418 refused', 'HTTP 400']);
  assert.match(reasons[4] ?? '', /^HPE_[A-Z_]+ Parse Error: /);
  assert.deepEqual(unavailable, ['HTTP 400 Bad Request'], 'reported once, with the first reason');
  assert.deepEqual(counts(delivery), { total: 5, delivered: 0, lost: 5, pending: 0, available: false });
});

test('an exporter that fails without saying why: the reason kept is "export failed"', async () => {
  const tried: number[] = [];
  // A SpanExporter may answer FAILED with no error at all.
  const silent: SpanExporter = {
    export: (spans, done) => {
      tried.push(spans.length);
      setImmediate(() => done({ code: 1 }));
    },
    shutdown: () => Promise.resolve(),
  };
  const unavailable: string[] = [];
  const delivery = new SpanDelivery(silent, { retryMs: 0, maxQueueSpans: 10, maxBatchSpans: 10 }, (e) =>
    unavailable.push(e),
  );
  delivery.push(spansNamed(['a'])[0]);
  await until('the batch given up', () => unavailable.length > 0);
  assert.deepEqual(unavailable, ['export failed']);
  assert.equal(delivery.lastError, 'export failed');
  assert.deepEqual(tried, [1]);
  assert.deepEqual(counts(delivery), { total: 1, delivered: 0, lost: 1, pending: 0, available: false });
});

test('spans lost for more reasons than MAX_LOSS_REASONS: the first ones kept with their spans, ' +
  'the rest counted together; every span lost counted once', async () => {
  // A collector whose message names the batch: a reason of its own for each.
  let batches = 0;
  const naming: SpanSender = {
    export: (_spans, done) =>
      setImmediate(() => done({ code: 0, rejected: { count: 1, reason: `batch ${++batches} refused` } })),
    shutdown: () => Promise.resolve(),
  };
  const delivery = new SpanDelivery(naming, { retryMs: 0, maxQueueSpans: 100, maxBatchSpans: 2 }, () => {});
  for (const span of spansNamed(Array.from({ length: 24 }, (_, i) => `s${i}`))) delivery.push(span);
  await delivery.drain(60_000);
  assert.equal(delivery.lost, batches, 'one span of each batch');
  const named = [...delivery.lostFor.keys()];
  assert.deepEqual(
    named,
    [...Array.from({ length: MAX_LOSS_REASONS }, (_, i) => `batch ${i + 1} refused`), OTHER_LOSSES],
  );
  assert.equal(delivery.lostFor.get(OTHER_LOSSES), batches - MAX_LOSS_REASONS);
  assert.equal([...delivery.lostFor.values()].reduce((a, b) => a + b, 0), delivery.lost);
});

test('a partial success counts at most the batch as lost, never retried; a count that is not a ' +
  'positive whole number is none; the message is printable and bounded', async () => {
  assert.deepEqual(rejectedOf({ partialSuccess: { rejectedSpans: '3', errorMessage: 'too big' } }, 5), {
    count: 3,
    reason: 'too big',
  });
  assert.equal(rejectedOf({ partialSuccess: { rejectedSpans: 1e12 } }, 5)?.count, 5);
  for (const rejectedSpans of [0, -2, 1.5, 'x', null, undefined])
    assert.equal(rejectedOf({ partialSuccess: { rejectedSpans } }, 5), null, String(rejectedSpans));
  assert.equal(rejectedOf({}, 5), null);
  assert.equal(rejectedOf(null, 5), null);
  const errorMessage = `\u001b]0;x\u0007${'y'.repeat(500)}`;
  const hostile = { partialSuccess: { rejectedSpans: 1, errorMessage } };
  assert.equal(rejectedOf(hostile, 1)!.reason, `?]0;x?${'y'.repeat(191)}...`);

  // A collector that claims to have rejected more spans than it got: each batch is lost once.
  const sent: number[] = [];
  const claims: SpanSender = {
    export: (spans, done) => {
      sent.push(spans.length);
      setImmediate(() => done({ code: 0, rejected: { count: 1e12, reason: 'all of them' } }));
    },
    shutdown: () => Promise.resolve(),
  };
  const delivery = new SpanDelivery(claims, { retryMs: 5000, maxQueueSpans: 10, maxBatchSpans: 2 }, () => {});
  for (const span of spansNamed(['a', 'b', 'c'])) delivery.push(span);
  await until('every batch answered', () => delivery.pending === 0);
  assert.deepEqual(sent, [1, 2], 'each span sent once');
  assert.deepEqual(counts(delivery), { total: 3, delivered: 0, lost: 3, pending: 0, available: true });
  assert.equal(delivery.lastError, 'all of them');
});

test("a collector's Retry-After: the batch is tried again no sooner; one beyond retryMs gives " +
  'it up at once', async () => {
  const now = Date.parse('2026-12-01T12:00:00Z');
  assert.equal(retryAfterMsOf('2', now), 2000);
  assert.equal(retryAfterMsOf(['1'], now), 1000);
  assert.equal(retryAfterMsOf('Tue, 01 Dec 2026 12:00:03 GMT', now), 3000);
  assert.equal(retryAfterMsOf('Tue, 01 Dec 2026 11:00:00 GMT', now), 0);
  for (const header of [undefined, '', 'soon', '1.5']) assert.equal(retryAfterMsOf(header, now), null);

  /** A sender refusing the first try of each batch with 429 and this Retry-After, then taking it. */
  const refusingOnce = (retryAfterMs: number) => {
    const tries: number[] = [];
    const sender: SpanSender = {
      export: (_spans, done) => {
        tries.push(Date.now());
        const error = { code: 429, message: 'Too Many Requests' };
        setImmediate(() => done(tries.length === 1 ? { code: 1, error, retryAfterMs } : { code: 0 }));
      },
      shutdown: () => Promise.resolve(),
    };
    return { sender, tries };
  };
  const waited = refusingOnce(400);
  const options = { retryMs: 5000, maxQueueSpans: 10, maxBatchSpans: 10 };
  const delivery = new SpanDelivery(waited.sender, options, () => {});
  delivery.push(spansNamed(['a'])[0]);
  await until('the batch delivered', () => delivery.delivered === 1);
  assert.equal(waited.tries.length, 2);
  const gapMs = waited.tries[1] - waited.tries[0];
  assert.ok(gapMs >= 400, `tried again after ${gapMs} ms`);

  const tooLong = refusingOnce(60_000);
  const unavailable: string[] = [];
  const given = new SpanDelivery(tooLong.sender, options, (e) => unavailable.push(e));
  given.push(spansNamed(['a'])[0]);
  await until('the batch given up', () => unavailable.length > 0);
  assert.deepEqual(unavailable, ['HTTP 429 Too Many Requests']);
  assert.equal(tooLong.tries.length, 1);
  assert.deepEqual(counts(given), { total: 1, delivered: 0, lost: 1, pending: 0, available: false });
});

test("a collector's Retry-After beyond retryMs holds the batches queued behind the one it gives " +
  'up: none is sent before it has passed, then they go', async () => {
  const tries: Array<{ at: number; spans: number }> = [];
  const sender: SpanSender = {
    export: (spans, done) => {
      tries.push({ at: Date.now(), spans: spans.length });
      const error = { code: 429, message: 'Too Many Requests' };
      setImmediate(() => done(tries.length === 1 ? { code: 1, error, retryAfterMs: 300 } : { code: 0 }));
    },
    shutdown: () => Promise.resolve(),
  };
  const unavailable: string[] = [];
  const options = { retryMs: 100, maxQueueSpans: 10, maxBatchSpans: 1 };
  const delivery = new SpanDelivery(sender, options, (e) => unavailable.push(e));
  for (const span of spansNamed(['a', 'b', 'c', 'd'])) delivery.push(span);
  await until('the first batch given up', () => unavailable.length > 0);
  assert.equal(tries.length, 1, 'the batches behind it wait');
  assert.deepEqual(counts(delivery), { total: 4, delivered: 0, lost: 1, pending: 3, available: false });
  await until('the rest delivered', () => delivery.delivered === 3);
  assert.deepEqual(tries.map((t) => t.spans), [1, 1, 1, 1]);
  const gapMs = tries[1].at - tries[0].at;
  assert.ok(gapMs >= 300, `the next batch went ${gapMs} ms after the answer`);
});

describe('the OTLP sink at the end of a run', () => {
  let receiver: OtlpReceiver;
  before(async () => {
    receiver = await startOtlpReceiver();
  });
  after(async () => {
    await receiver?.close();
  });

  async function runSink(options: Record<string, unknown>) {
    const batches: RecordBatch[] = [];
    const { run } = await routeThrough(
      readFileSync(fixtureFiles().find((f) => f.endsWith('nested-depth-3.jsonl'))!),
      (b) => {
        batches.push(b);
      },
    );
    const spanCount = run.tree.channels().reduce((n, c) => n + 1 + c.counts.tool_use, 0);
    const before = run.warnings.length;
    const sink = createOtlpSink({ url: receiver.url, session: run, ...options });
    let passed = 0;
    await pipeline(
      Readable.from(batches, { objectMode: true }),
      sink,
      new Writable({ objectMode: true, write: (_b, _e, cb) => (passed++, cb()) }),
    );
    assert.equal(passed, batches.length, 'every batch passes through');
    return { warnings: run.warnings.slice(before), spanCount };
  }

  test('every span delivered: no warning', async () => {
    receiver.spans.length = 0;
    receiver.behave('accept');
    const { warnings, spanCount } = await runSink({ maxBatchSpans: 3 });
    assert.deepEqual(warnings, []);
    assert.equal(receiver.spans.length, spanCount);
  });

  test('a refusing collector: one OTLP_UNAVAILABLE, then ' +
    'OTLP_UNDELIVERED counting every span and why', async () => {
    receiver.spans.length = 0;
    receiver.behave(500);
    const { warnings, spanCount } = await runSink({ retryMs: 0, flushTimeoutMs: 60_000 });
    assert.deepEqual(
      warnings.map((w) => w.code),
      ['OTLP_UNAVAILABLE', 'OTLP_UNDELIVERED'],
    );
    assert.match(
      warnings[0].message,
      /^collector http:\/\/127\.0\.0\.1:\d+\/v1\/traces is not accepting spans \(HTTP 500\b/,
    );
    assert.ok(
      warnings[1].message.startsWith(`${spanCount} of ${spanCount} spans not delivered to http://127.0.0.1:`),
    );
    assert.match(warnings[1].message, /\(HTTP 500\b.*\)$/);
  });

  test('a 503 whose batch was then taken, and a collector that later stops answering: ' +
    'OTLP_UNDELIVERED names the deadline that lost the spans, not the earlier 503', async () => {
    receiver.spans.length = 0;
    receiver.requests.length = 0;
    receiver.behave((n) => (n === 1 ? 503 : n <= 3 ? 'accept' : 'hang'));
    const flushTimeoutMs = 500;
    const { warnings, spanCount } = await runSink({ maxBatchSpans: 3, retryMs: 60_000, flushTimeoutMs });
    const lost = spanCount - receiver.spans.length;
    receiver.release();
    assert.ok(lost > 0 && receiver.requests.length > 3, 'a request went unanswered');
    assert.deepEqual(
      warnings.map((w) => w.message),
      [
        `${lost} of ${spanCount} spans not delivered to ${receiver.url}/v1/traces ` +
          `(not sent within flushTimeoutMs, ${flushTimeoutMs} ms)`,
      ],
    );
  });

  test('a collector that answers 200, then trickles its body a byte at a time and never ends it: ' +
    'each request ends at timeoutMs from its start, the batch is given up, and the run ends', async () => {
    receiver.requests.length = 0;
    receiver.behave('trickle');
    const timeoutMs = 300;
    // A deadline reset by each byte would hold the run to flushTimeoutMs and lose every span
    // to it; the whole-request deadline loses them to the timeout, long before.
    const { warnings, spanCount } = await runSink({ timeoutMs, retryMs: 0, flushTimeoutMs: 30_000 });
    receiver.behave('accept');
    const timedOut = `ETIMEDOUT the request did not end within ${timeoutMs} ms`;
    assert.deepEqual(
      warnings.map((w) => w.message),
      [
        `collector ${receiver.url}/v1/traces is not accepting spans (${timedOut}); ` +
          'the run goes on and spans are retried',
        `${spanCount} of ${spanCount} spans not delivered to ${receiver.url}/v1/traces (${timedOut})`,
      ],
    );
    assert.ok(receiver.requests.length >= 1);
  });

  test('spans lost to two failures (a batch given up on a 400, spans rejected in partial ' +
    'successes): OTLP_UNDELIVERED gives each reason with the spans it lost', async () => {
    receiver.spans.length = 0;
    receiver.requests.length = 0;
    receiver.behave((n) => (n === 1 ? 400 : { rejectSpans: 1, message: 'too big' }));
    const { warnings, spanCount } = await runSink({ maxBatchSpans: 3, retryMs: 0, flushTimeoutMs: 60_000 });
    const [refused, ...later] = receiver.requests;
    const rejected = later.reduce((n, q) => n + Math.min(1, q.spans), 0);
    assert.equal(refused.spans + rejected, spanCount - receiver.spans.length, 'every span lost counted');
    assert.ok(refused.spans > 0 && rejected > 0);
    assert.deepEqual(
      warnings.map((w) => w.code),
      ['OTLP_UNAVAILABLE', 'OTLP_UNDELIVERED'],
    );
    assert.equal(
      warnings[1].message,
      `${spanCount - receiver.spans.length} of ${spanCount} spans not delivered to ` +
        `${receiver.url}/v1/traces (${refused.spans}: HTTP 400 Bad Request; ${rejected}: too big)`,
    );
  });
});
