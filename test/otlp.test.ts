import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { basename, join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, before, describe, test } from 'node:test';
import type { RecordBatch } from '../src/model/record.js';
import { createOtlpSink } from '../src/chain/sinks/otlp.js';
import { createPinoSink } from '../src/chain/sinks/pino.js';
import { traceIdOf } from '../src/chain/sinks/stream-facts.js';
import { claudeAvailable } from './e2e/claude.js';
import { startFakeApi, type FakeApi } from './e2e/fake-api.js';
import { pipeClaudeIntoSubtee } from './e2e/pipe.js';
import {
  BIN,
  checkOutput,
  closedPort,
  FIXTURES,
  fixtureFiles,
  linesOf,
  readTree,
  tmpDir,
  transcriptsEnded,
} from './helpers/helpers.js';
import { feedThrough } from './helpers/feed.js';
import { assertSpanTree, routeThrough, type SpanLike } from './helpers/otlp-tree.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './servers/otlp-receiver.js';

const like = (s: ReceivedSpan): SpanLike => ({
  id: s.spanId,
  parent: s.parentSpanId,
  name: s.name,
  startMs: s.startMs,
  endMs: s.endMs,
  attributes: s.attributes,
  error: s.statusCode === 2,
});

interface CliRun {
  code: number | null;
  stderr: string;
  out: string;
}

/** Runs the real subtee CLI on a file (or on bytes written to its stdin, then held open until `release`). */
function subtee(
  args: string[],
  o: { env?: NodeJS.ProcessEnv; stdin?: Buffer; timeoutMs?: number } = {},
): Promise<CliRun> & { child: ReturnType<typeof spawn>; out: string } {
  const out = join(tmpDir(), 'out');
  const child = spawn(process.execPath, [BIN, '--out', out, '--stdout', 'none', '-q', ...args], {
    env: { PATH: process.env.PATH, ...o.env },
    stdio: [o.stdin ? 'pipe' : 'ignore', 'ignore', 'pipe'],
  });
  if (o.stdin) {
    child.stdin!.on('error', () => {}); // subtee stops reading when it stalls
    child.stdin!.write(o.stdin);
  }
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 60_000);
  const p = new Promise<CliRun>((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, out });
    }),
  ) as Promise<CliRun> & { child: typeof child; out: string };
  p.child = child;
  p.out = out;
  return p;
}

/** The warning events of a pino log: their code and content. */
const pinoWarnings = (file: string) =>
  readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
    .filter((e) => e.kind === 'warning')
    .map((e) => ({ code: e.code, content: e.content }));

const indexOf = (out: string) => JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
const spanCount = (index: any) =>
  index.channels.length + index.channels.reduce((n: number, c: any) => n + c.counts.tool_use, 0);

/** A config with the default chain plus an otlp sink with these options. */
function otlpConfig(options: Record<string, unknown>): string {
  const file = join(tmpDir(), 'subtee.json');
  writeFileSync(
    file,
    JSON.stringify({
      sinks: [
        { use: 'stdout', mode: 'none' },
        { use: 'otlp', ...options },
      ],
    }),
  );
  return file;
}

const NESTED = fixtureFiles().find((f) => f.endsWith('nested-depth-3.jsonl'))!;

describe('OTLP sink against a loopback OTLP/HTTP receiver', () => {
  let receiver: OtlpReceiver;
  before(async () => {
    receiver = await startOtlpReceiver();
  });
  after(async () => {
    await receiver?.close();
  });

  test("every fixture through `subtee --otlp URL`: one protobuf trace per run whose tree is " +
    "index.json's", async () => {
    for (const file of fixtureFiles()) {
      receiver.spans.length = 0;
      receiver.behave('accept');
      const r = await subtee(['--otlp', receiver.url, file]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stderr, '', 'no warning');
      const index = indexOf(r.out);
      assert.equal(receiver.spans.length, spanCount(index), basename(file));
      assertSpanTree(receiver.spans.map(like), index, basename(file));
      assert.equal(new Set(receiver.spans.map((s) => s.traceId)).size, 1, 'one trace');
      assert.ok(
        receiver.spans.every((s) => s.attributes['gen_ai.conversation.id'] === index.session_id),
        'conversation id = session_id',
      );
      assert.ok(
        receiver.spans.every(
          (s) => s.kind === 1 && s.scope === 'subtee' && s.resource['service.name'] === 'subtee',
        ),
      );
    }
    assert.ok(receiver.requests.every((r) => r.contentType === 'application/x-protobuf'));
  });

  test('a replay of a recording reproduces the trace: same ids, same times', async () => {
    receiver.spans.length = 0;
    receiver.behave('accept');
    assert.equal((await subtee(['--otlp', receiver.url, NESTED])).code, 0);
    const first = receiver.spans
      .splice(0)
      .map((s) => [s.traceId, s.spanId, s.parentSpanId, s.startMs, s.endMs])
      .sort();
    assert.equal((await subtee(['--otlp', receiver.url, NESTED])).code, 0);
    const second = receiver.spans
      .splice(0)
      .map((s) => [s.traceId, s.spanId, s.parentSpanId, s.startMs, s.endMs])
      .sort();
    assert.deepEqual(second, first);
  });

  test("a replay of a Codex, Copilot, Gemini CLI or opencode recording is the same run: index.json's " +
    'run_id, the trace id and every span id are those of the first run', async () => {
    for (const name of ['codex/two-subagents', 'copilot-spawn', 'gemini-spawn', 'opencode-spawn']) {
      const file = join(FIXTURES, 'other-agents', `${name}.jsonl`);
      const once = async () => {
        receiver.spans.length = 0;
        receiver.behave('accept');
        const r = await subtee(['--otlp', receiver.url, file]);
        assert.equal(r.code, 0, r.stderr);
        const index = indexOf(r.out);
        const spans = receiver.spans.splice(0);
        assert.equal(spans.length, spanCount(index), name);
        return { runId: index.run_id, spans: spans.map((s) => [s.traceId, s.spanId, s.parentSpanId]).sort() };
      };
      const first = await once();
      const second = await once();
      assert.equal(typeof first.runId, 'string', `${name}: index.json names the run`);
      assert.equal(second.runId, first.runId, name);
      assert.deepEqual(second.spans, first.spans, name);
      // The trace is the run's: the trace id the sinks derive from index.json's run_id.
      const traces = new Set(first.spans.map(([trace]) => trace));
      assert.deepEqual(traces, new Set([traceIdOf(first.runId)]), name);
    }
  });

  test('pino events and OTLP spans are the same whether a run arrives at once or a line at a time: ' +
    'a status event, and the span handed out at it, carry the figures as of its own line', async () => {
    const lines = linesOf(readFileSync(NESTED));
    /** The pino events (their `time` left out) and the spans (by id) of one run through the sinks. */
    const run = async (lineByLine: boolean) => {
      receiver.spans.length = 0;
      receiver.behave('accept');
      const pinoLog = join(tmpDir(), 'events.log');
      await feedThrough(lines, lineByLine, (session) => [
        createPinoSink({ destination: pinoLog, session }),
        createOtlpSink({ url: receiver.url, session }),
      ]);
      const events = linesOf(readFileSync(pinoLog)).map((l) => {
        const { time: _time, ...event } = JSON.parse(l);
        return event;
      });
      const spans = receiver.spans.map((s) => [s.spanId, like(s), s.statusMessage] as const).sort();
      return { events, spans };
    };
    const atOnce = await run(false);
    const lineByLine = await run(true);
    assert.deepEqual(lineByLine.events, atOnce.events);
    assert.deepEqual(lineByLine.spans, atOnce.spans);

    // Each subagent ends before the result line: its figures are the stream's as of its end,
    // each message's latest output_tokens (an independent count of the lines up to it).
    const statuses = atOnce.events.filter((e) => e.kind === 'status');
    assert.equal(statuses.length, 3);
    for (const e of statuses) {
      const latest = new Map<string, number>();
      for (const l of lines.slice(0, e.line)) {
        const v = JSON.parse(l);
        if (v.type === 'assistant' && v.parent_tool_use_id === e.channel)
          latest.set(v.message.id, v.message.usage.output_tokens);
      }
      const output = [...latest.values()].reduce((a, b) => a + b, 0);
      assert.deepEqual([e.output_tokens, e.cost_basis], [output, 'stream'], e.channel);
      const span = atOnce.spans.find(([, s]) => s.attributes['gen_ai.agent.id'] === e.channel)![1];
      assert.deepEqual(
        [span.attributes['gen_ai.usage.output_tokens'], span.attributes['subtee.cost.usd']],
        [e.output_tokens, e.cost_usd],
        `${e.channel}: its span is handed out at the line it ended on`,
      );
      assert.equal(span.attributes['subtee.cost.basis'], 'table');
      assert.equal(span.attributes['subtee.cost.output_tokens.basis'], 'stream');
    }
  });

  test('`--otlp` alone follows OTEL_EXPORTER_OTLP_* ' +
    'and OTEL_RESOURCE_ATTRIBUTES (OTLP/JSON here)', async () => {
    receiver.spans.length = 0;
    receiver.requests.length = 0;
    receiver.behave('accept');
    // `--otlp` takes the next word as its URL: alone, it goes after FILE.
    const r = await subtee([NESTED, '--otlp'], {
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_HEADERS: 'x-fleet-token=abc123',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=ci,fleet.runner=runner-7',
        OTEL_SERVICE_NAME: 'agent-fleet',
      },
    });
    assert.equal(r.code, 0, r.stderr);
    assert.ok(
      receiver.requests.length > 0 && receiver.requests.every((q) => q.contentType === 'application/json'),
    );
    assert.equal(receiver.lastHeaders['x-fleet-token'], 'abc123');
    const index = indexOf(r.out);
    assertSpanTree(receiver.spans.map(like), index, 'json');
    const resource = receiver.spans[0].resource;
    assert.equal(resource['service.name'], 'agent-fleet');
    assert.equal(resource['deployment.environment.name'], 'ci');
    assert.equal(resource['fleet.runner'], 'runner-7');
  });

  test('collector down: exit 0, every file written, a ' +
    'warning counts the spans not delivered, no hang', async () => {
    const port = await closedPort();
    // With pino on too, added by its flag after the config's sinks: it hears both warnings.
    const pinoLog = join(tmpDir(), 'events.log');
    const r = await subtee([
      '-c',
      otlpConfig({ url: `http://127.0.0.1:${port}`, timeoutMs: 300, retryMs: 300, flushTimeoutMs: 1000 }),
      `--pino=${pinoLog}`,
      NESTED,
    ]);
    assert.equal(r.code, 0, r.stderr);
    const { index } = checkOutput(readFileSync(NESTED), r.out, 'collector down');
    assert.match(
      r.stderr,
      /warning OTLP_UNAVAILABLE: collector http:\/\/127\.0\.0\.1:\d+\/v1\/traces is not accepting spans \(connect ECONNREFUSED/,
    );
    assert.match(
      r.stderr,
      new RegExp(`warning OTLP_UNDELIVERED: ${spanCount(index)} of ${spanCount(index)} spans not delivered`),
    );
    assert.deepEqual(pinoWarnings(pinoLog).map((e) => e.code), ['OTLP_UNAVAILABLE', 'OTLP_UNDELIVERED']);
  });

  test('collector down, sinks from flags: OTLP_UNDELIVERED names the refused ' +
    'connection and reaches the pino log as well as stderr', async () => {
    const port = await closedPort();
    const pinoLog = join(tmpDir(), 'events.log');
    // Every refused connection is heard: the first batch is given up after retryMs (5 s), within
    // the run's flush deadline (5 s after its input ends).
    const r = await subtee([`--otlp=http://127.0.0.1:${port}`, `--pino=${pinoLog}`, NESTED]);
    assert.equal(r.code, 0, r.stderr);
    const { index } = checkOutput(readFileSync(NESTED), r.out, 'collector down, flags');
    const refused = `connect ECONNREFUSED 127.0.0.1:${port}`;
    const unavailable =
      `collector http://127.0.0.1:${port}/v1/traces is not accepting spans (${refused}); ` +
      'the run goes on and spans are retried';
    const undelivered =
      `${spanCount(index)} of ${spanCount(index)} spans not delivered to ` +
      `http://127.0.0.1:${port}/v1/traces (${refused})`;
    assert.equal(
      r.stderr,
      `subtee: warning OTLP_UNAVAILABLE: ${unavailable}\nsubtee: warning OTLP_UNDELIVERED: ${undelivered}\n`,
    );
    assert.deepEqual(pinoWarnings(pinoLog), [
      { code: 'OTLP_UNAVAILABLE', content: unavailable },
      { code: 'OTLP_UNDELIVERED', content: undelivered },
    ]);
  });

  test('index.json lists the warnings an OTLP sink added by --otlp raises as it ends, as stderr, the ' +
    'pino log and report.html do', async () => {
    const port = await closedPort();
    const pinoLog = join(tmpDir(), 'events.log');
    // The flags place the files sink first and the otlp sink after it: index.json waits for it.
    const r = await subtee([`--otlp=http://127.0.0.1:${port}`, `--pino=${pinoLog}`, '--html', NESTED]);
    assert.equal(r.code, 0, r.stderr);
    const { index } = checkOutput(readFileSync(NESTED), r.out, 'collector down, flags, index.json');
    const told = pinoWarnings(pinoLog);
    assert.deepEqual(
      told.map((w) => w.code),
      ['OTLP_UNAVAILABLE', 'OTLP_UNDELIVERED'],
    );
    const listed = index.warnings.map((w: { code: string; message: string }) => ({
      code: w.code,
      content: w.message,
    }));
    assert.deepEqual(listed, told);
    const onStderr = r.stderr.split('\n').filter((l) => l.startsWith('subtee: warning '));
    assert.deepEqual(onStderr, told.map((w) => `subtee: warning ${w.code}: ${w.content}`));
    const page = readFileSync(join(r.out, 'report.html'), 'utf8');
    for (const { code } of told) assert.ok(page.includes(code), `report.html lists ${code}`);
  });

  test('a collector that reset one connection, then took one and never answered: ' +
    'OTLP_UNDELIVERED names the deadline, not the connection failure before', async () => {
    let connections = 0;
    const held: Socket[] = [];
    let taken: () => void;
    const secondTaken = new Promise<void>((resolve) => (taken = resolve));
    const server = createServer((socket) => {
      if (++connections === 1) return socket.resetAndDestroy();
      held.push(socket);
      taken();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      // The run's input stays open until the exporter, retrying, has connected again.
      const run = subtee(
        ['-c', otlpConfig({ url, timeoutMs: 120_000, retryMs: 500, flushTimeoutMs: 1000 })],
        { stdin: readFileSync(NESTED) },
      );
      await secondTaken;
      run.child.stdin!.end();
      const r = await run;
      assert.equal(r.code, 0, r.stderr);
      const { index } = checkOutput(readFileSync(NESTED), r.out, 'reset, then silent');
      assert.equal(
        r.stderr,
        `subtee: warning OTLP_UNDELIVERED: ${spanCount(index)} of ${spanCount(index)} spans not ` +
          `delivered to ${url}/v1/traces (not sent within flushTimeoutMs, 1000 ms)\n`,
      );
    } finally {
      for (const socket of held) socket.destroy();
      server.close();
    }
  });

  test('collector answering 500: retried within the bound, then counted as not delivered', async () => {
    receiver.requests.length = 0;
    receiver.spans.length = 0;
    receiver.behave(500);
    const r = await subtee([
      '-c',
      otlpConfig({ url: receiver.url, retryMs: 600, flushTimeoutMs: 2000 }),
      NESTED,
    ]);
    assert.equal(r.code, 0, r.stderr);
    const { index } = checkOutput(readFileSync(NESTED), r.out, '500s');
    const sent = new Map<string, number>();
    for (const q of receiver.requests) sent.set(q.sha1, (sent.get(q.sha1) ?? 0) + 1);
    assert.ok(Math.max(...sent.values()) >= 2, 'a batch was sent again');
    assert.match(r.stderr, /OTLP_UNAVAILABLE: .*HTTP 500/);
    assert.match(
      r.stderr,
      new RegExp(
        `OTLP_UNDELIVERED: ${spanCount(index)} of ${spanCount(index)} spans not delivered .*HTTP 500`,
      ),
    );
    assert.equal(receiver.spans.length, 0);
  });

  test('spans a collector rejects in a partial success (OTLP/JSON and protobuf) are counted in ' +
    "OTLP_UNDELIVERED with the collector's message, its control characters replaced", async () => {
    for (const protocol of ['http/json', 'http/protobuf']) {
      receiver.spans.length = 0;
      receiver.requests.length = 0;
      receiver.behave({ rejectSpans: 2, message: 'span too large, dropped \u001b[31m' });
      const env = { OTEL_EXPORTER_OTLP_PROTOCOL: protocol };
      const r = await subtee(['--otlp', receiver.url, NESTED], { env });
      assert.equal(r.code, 0, r.stderr);
      const { index } = checkOutput(readFileSync(NESTED), r.out, protocol);
      const sent = receiver.requests.reduce((n, q) => n + q.spans, 0);
      const rejected = receiver.requests.reduce((n, q) => n + Math.min(2, q.spans), 0);
      assert.equal(sent, spanCount(index), `${protocol}: every span sent once`);
      assert.equal(receiver.spans.length, sent - rejected, `${protocol}: the rest kept`);
      assert.ok(rejected > 0);
      assert.equal(
        r.stderr,
        `subtee: warning OTLP_UNDELIVERED: ${rejected} of ${sent} spans not delivered to ` +
          `${receiver.url}/v1/traces (span too large, dropped ?[31m)\n`,
        protocol,
      );
    }
  });

  for (const [answer, behaviour, reason] of [
    ['answering 503', 503, 'HTTP 503 Service Unavailable'],
    ['dropping every connection', 'drop', 'ECONNRESET socket hang up'],
  ] as const) {
    test(`collector ${answer} to the end: the run ends within flushTimeoutMs of its input's end ` +
      `and OTLP_UNDELIVERED names the last answer (${reason})`, async () => {
      receiver.requests.length = 0;
      receiver.behave(behaviour);
      const flushTimeoutMs = 1000;
      // retryMs outlasts the run: no batch is given up before the end.
      const run = subtee(['-c', otlpConfig({ url: receiver.url, retryMs: 60_000, flushTimeoutMs })], {
        stdin: readFileSync(NESTED),
      });
      let warnedAt = 0;
      run.child.stderr!.on('data', () => (warnedAt ||= Date.now()));
      // The input is read and a batch was tried six times: its next try waits 2 s, past the
      // deadline, and must not keep the process alive.
      await receiver.waitForRequests(6);
      const endedAt = Date.now();
      run.child.stdin!.end();
      const r = await run;
      const exitedAt = Date.now();
      assert.equal(r.code, 0, r.stderr);
      const { index } = checkOutput(readFileSync(NESTED), r.out, answer);
      assert.equal(
        r.stderr,
        `subtee: warning OTLP_UNDELIVERED: ${spanCount(index)} of ${spanCount(index)} spans not ` +
          `delivered to ${receiver.url}/v1/traces (${reason})\n`,
      );
      assert.ok(warnedAt - endedAt >= flushTimeoutMs - 50, `waited ${warnedAt - endedAt} ms for the spans`);
      assert.ok(exitedAt - warnedAt < 500, `exited ${exitedAt - warnedAt} ms after the warning`);
    });
  }

  test('collector that never answers: the run ends at ' +
    'the flush deadline, not at the request timeout', async () => {
    receiver.requests.length = 0;
    receiver.behave('hang');
    // Requests would wait two minutes; subtee is killed after 30 s if it waits for them.
    const r = await subtee(
      [
        '-c',
        otlpConfig({ url: receiver.url, timeoutMs: 120_000, retryMs: 500, flushTimeoutMs: 1000 }),
        NESTED,
      ],
      { timeoutMs: 30_000 },
    );
    assert.equal(r.code, 0, r.stderr);
    assert.ok(receiver.requests.length >= 1);
    const { index } = checkOutput(readFileSync(NESTED), r.out, 'slow collector');
    assert.match(
      r.stderr,
      new RegExp(
        `OTLP_UNDELIVERED: ${spanCount(index)} of ${spanCount(index)} spans not delivered to ` +
          `${receiver.url.replace(/[.]/g, '[.]')}/v1/traces [(]not sent within flushTimeoutMs, 1000 ms[)]`,
      ),
    );
    receiver.release();
  });

  // A collector that answers 200 and trickles its body for ever, requests that may last two
  // minutes, a queue of two spans: the input waits for room behind a request that never ends.
  const trickled = {
    timeoutMs: 120_000,
    retryMs: 60_000,
    flushTimeoutMs: 1000,
    maxQueueSpans: 2,
    maxBatchSpans: 1,
  };
  const deadlineUndelivered = (index: unknown, url: string) =>
    `subtee: warning OTLP_UNDELIVERED: ${spanCount(index)} of ${spanCount(index)} spans not ` +
    `delivered to ${url}/v1/traces (not sent within flushTimeoutMs, 1000 ms)\n`;

  test('a collector trickling its answer while the queue is full: the run ends within ' +
    "flushTimeoutMs of its input's end, and OTLP_UNDELIVERED counts every span of the run", async () => {
    receiver.requests.length = 0;
    receiver.behave('trickle');
    const run = subtee(['-c', otlpConfig({ url: receiver.url, ...trickled })], {
      stdin: readFileSync(NESTED),
      timeoutMs: 30_000,
    });
    await receiver.waitForRequests(1);
    const endedAt = Date.now();
    run.child.stdin!.end();
    const r = await run;
    const tookMs = Date.now() - endedAt;
    assert.equal(r.code, 0, r.stderr);
    const { index } = checkOutput(readFileSync(NESTED), r.out, 'trickling collector');
    assert.equal(r.stderr, deadlineUndelivered(index, receiver.url));
    assert.ok(tookMs < trickled.flushTimeoutMs + 5000, `ended ${tookMs} ms after the input`);
    receiver.behave('accept');
  });

  test('a collector trickling its answer while the queue is full: the first SIGTERM ends the ' +
    'run within flushTimeoutMs, exit 143, OTLP_UNDELIVERED counting every span read', async () => {
    receiver.requests.length = 0;
    receiver.behave('trickle');
    // The input stays open: only the signal ends it.
    const run = subtee(['-c', otlpConfig({ url: receiver.url, ...trickled })], {
      stdin: readFileSync(NESTED),
      timeoutMs: 30_000,
    });
    await receiver.waitForRequests(1);
    const signalledAt = Date.now();
    run.child.kill('SIGTERM');
    const r = await run;
    const tookMs = Date.now() - signalledAt;
    assert.equal(r.code, 143, r.stderr);
    const index = indexOf(r.out);
    assert.equal(index.interrupted, true);
    assert.equal(
      r.stderr,
      deadlineUndelivered(index, receiver.url) +
        'subtee: interrupted by SIGTERM; index.json marks what was still running [ERR_INTERRUPTED]\n',
    );
    assert.ok(tookMs < trickled.flushTimeoutMs + 5000, `ended ${tookMs} ms after the signal`);
    receiver.behave('accept');
  });

  test("a slow stage plugin after the input's end with an accepting collector: every span is " +
    'delivered, no warning, though the chain makes them past flushTimeoutMs', async () => {
    receiver.spans.length = 0;
    receiver.requests.length = 0;
    receiver.behave('accept');
    const dir = tmpDir();
    const delayMs = 40;
    const flushTimeoutMs = 300;
    // A stage that takes 40 ms a record: the 34 lines of the fixture leave it over a second
    // after the file's last byte was read, past flushTimeoutMs.
    writeFileSync(
      join(dir, 'slow.mjs'),
      "export default { name: 'slow', kind: 'stage', kit: '>=0.0.0', options: {}, create: () => " +
        `(rec) => new Promise((done) => setTimeout(() => done(rec), ${delayMs})) };\n`,
    );
    const config = join(dir, 'subtee.json');
    const stages = [{ use: 'line-parser' }, { use: 'slow' }, { use: 'channel-router' }];
    const sinks = [{ use: 'files' }, { use: 'otlp', url: receiver.url, flushTimeoutMs }];
    writeFileSync(config, JSON.stringify({ plugins: ['./slow.mjs'], stages, sinks }));
    const startedAt = Date.now();
    const r = await subtee(['-c', config, NESTED], { timeoutMs: 30_000 });
    const tookMs = Date.now() - startedAt;
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '', 'no warning');
    const { index } = checkOutput(readFileSync(NESTED), r.out, 'slow stage');
    assert.ok(tookMs > linesOf(readFileSync(NESTED)).length * delayMs, `the stage took ${tookMs} ms`);
    assert.equal(receiver.spans.length, spanCount(index), 'every span delivered');
    assertSpanTree(receiver.spans.map(like), index, 'slow stage');
  });

  /**
   * A run whose input was read whole (its transcripts ended, the files sink placed first as
   * `--otlp` places it; index.json waits for the otlp sink) while its spans wait for a collector
   * that never answers, up to `flushTimeoutMs`.
   */
  async function readWholeWhileSpansWait(flushTimeoutMs: number) {
    receiver.requests.length = 0;
    receiver.behave('hang');
    const config = join(tmpDir(), 'subtee.json');
    const sinks = [{ use: 'files' }, { use: 'otlp', url: receiver.url, flushTimeoutMs }];
    writeFileSync(config, JSON.stringify({ sinks }));
    const run = subtee(['-c', config], { stdin: readFileSync(NESTED), timeoutMs: 30_000 });
    run.child.stdin!.end();
    while (!transcriptsEnded(run.out)) await new Promise((r) => setTimeout(r, 20));
    assert.equal(existsSync(join(run.out, 'index.json')), false, 'index.json waits for the spans');
    // Wrapped: an async function's result that is a promise would be awaited.
    return { run };
  }

  test('a signal once the input was read to its end interrupts nothing: the spans still wait ' +
    'their deadline, exit 0 and index.json not interrupted; a notice says a second signal stops ' +
    'at once', async () => {
    const { run } = await readWholeWhileSpansWait(5000);
    run.child.kill('SIGINT');
    const r = await run;
    assert.equal(r.code, 0, r.stderr);
    const { index } = checkOutput(readFileSync(NESTED), r.out, 'signal after the end');
    assert.equal(index.interrupted, false);
    assert.equal(
      r.stderr,
      'subtee: SIGINT: the input was read to its end; finishing (a second signal stops at once)\n' +
        `subtee: warning OTLP_UNDELIVERED: ${spanCount(index)} of ${spanCount(index)} spans not ` +
        `delivered to ${receiver.url}/v1/traces (not sent within flushTimeoutMs, 5000 ms)\n`,
    );
    receiver.release();
    receiver.behave('accept');
  });

  test("a second signal after one the input's end let pass stops at once: exit 130, the line says " +
    'the sending was cut short, index.json written, interrupted', async () => {
    const { run } = await readWholeWhileSpansWait(20_000);
    let said = '';
    run.child.stderr!.on('data', (d) => (said += d));
    run.child.kill('SIGINT');
    while (!said.includes('finishing')) await new Promise((r) => setTimeout(r, 20));
    const secondAt = Date.now();
    run.child.kill('SIGINT');
    const r = await run;
    assert.equal(r.code, 130, r.stderr);
    assert.ok(Date.now() - secondAt < 5000, 'at once, not at the 20 s deadline');
    assert.match(
      r.stderr,
      /^subtee: interrupted by SIGINT after the input's end; what was still being sent was cut short \[ERR_INTERRUPTED\]$/m,
    );
    // Written as the chain was torn down, with every line, and the sends it cut short.
    const { index } = checkOutput(readFileSync(NESTED), r.out, 'second signal after the end');
    assert.equal(index.interrupted, true);
    receiver.release();
    receiver.behave('accept');
  });

  for (const [what, retryAfter] of [
    ['of 35 days', String(35 * 24 * 3600)],
    ['an HTTP date in 9999', 'Fri, 31 Dec 9999 23:59:59 GMT'],
  ]) {
    test(`a Retry-After ${what} (past the longest Node timer) holds the queued batches to the ` +
      "end's deadline: no request after the first, stderr has subtee's lines alone", async () => {
      receiver.requests.length = 0;
      receiver.behave({ status: 503, retryAfter });
      const config = otlpConfig({ url: receiver.url, retryMs: 500, flushTimeoutMs: 1000, maxBatchSpans: 1 });
      const r = await subtee(['-c', config, NESTED]);
      assert.equal(r.code, 0, r.stderr);
      const { index } = checkOutput(readFileSync(NESTED), r.out, `Retry-After ${what}`);
      const where = `${receiver.url}/v1/traces`;
      assert.equal(
        r.stderr,
        `subtee: warning OTLP_UNAVAILABLE: collector ${where} is not accepting spans ` +
          '(HTTP 503 Service Unavailable); the run goes on and spans are retried\n' +
          `subtee: warning OTLP_UNDELIVERED: ${spanCount(index)} of ${spanCount(index)} spans not ` +
          `delivered to ${where} (HTTP 503 Service Unavailable)\n`,
      );
      assert.equal(receiver.requests.length, 1, 'the batches behind the first wait for the Retry-After');
      receiver.behave('accept');
    });
  }

  test('collector failing for a while, then back: every span arrives, no warning of loss', async () => {
    receiver.spans.length = 0;
    receiver.requests.length = 0;
    receiver.behave((n) => (n <= 2 ? 503 : n <= 4 ? 500 : 'accept'));
    const r = await subtee(['-c', otlpConfig({ url: receiver.url, retryMs: 20_000 }), NESTED]);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /OTLP_/);
    const index = indexOf(r.out);
    assert.ok(receiver.requests.length >= 5);
    assertSpanTree(receiver.spans.map(like), index, 'recovered');
  });

  test('a stalled run still sends its trace: main ' +
    'marked stalled, what was running marked running', async () => {
    receiver.spans.length = 0;
    receiver.behave('accept');
    // The first half of a nested run, then silence: the idle watchdog ends the run.
    const lines = linesOf(readFileSync(NESTED));
    const half = Buffer.from(lines.slice(0, 14).join('\n') + '\n');
    // Silence counts from the start of the chain: 4 s, so that a loaded machine loading the
    // sink's client is not taken for the stall.
    const r = await subtee(
      [
        '--otlp',
        receiver.url,
        '--idle-timeout-ms',
        '4000',
        '--model-timeout-ms',
        '4000',
        '--stall-grace-ms',
        '0',
      ],
      { stdin: half },
    );
    assert.equal(r.code, 124, r.stderr);
    const index = indexOf(r.out);
    assert.equal(index.stalled, true);
    assertSpanTree(receiver.spans.map(like), index, 'stalled');
    const root = receiver.spans.find((s) => s.parentSpanId === '')!;
    assert.equal(root.attributes['subtee.run.stalled'], true);
    const running = receiver.spans
      .filter((s) => s.attributes['subtee.status'] === 'running')
      .map((s) => s.attributes['gen_ai.agent.id'] ?? 'main');
    assert.deepEqual(
      running.sort(),
      index.channels
        .filter((c: any) => c.status === 'running')
        .map((c: any) => c.id ?? 'main')
        .sort(),
    );
    assert.ok(running.length >= 2);
    assert.ok(
      receiver.spans.some((s) => s.attributes['subtee.tool.unfinished'] === true),
      'the call waiting for a result',
    );
  });

  test('backpressure: while the collector holds a request and ' +
    'the queue is full, input waits; then all of it flows', async () => {
    receiver.spans.length = 0;
    receiver.requests.length = 0;
    receiver.behave('hang');
    // Routed records of a real recording, one per batch, into the sink alone.
    const batches: RecordBatch[] = [];
    const { run } = await routeThrough(
      readFileSync(fixtureFiles().find((f) => f.endsWith('binary-tree-depth-3.jsonl'))!),
      (b) => {
        for (const rec of b) batches.push([rec]);
      },
    );
    const total = batches.length;
    const sink = createOtlpSink({
      url: receiver.url,
      session: run,
      maxQueueSpans: 2,
      maxBatchSpans: 1,
      retryMs: 60_000,
      timeoutMs: 60_000,
    });
    let passed = 0;
    const done = pipeline(
      Readable.from(batches, { objectMode: true }),
      sink,
      new Writable({ objectMode: true, write: (_b, _e, cb) => (passed++, cb()) }),
    );
    while (receiver.requests.length === 0) await new Promise((r) => setTimeout(r, 5));
    // Nothing but the held request is pending: let the event loop run dry of other work.
    const turns = async () => {
      for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
    };
    await turns();
    const held = passed;
    await turns();
    assert.ok(held < total, `input held back (${held} of ${total} batches passed)`);
    assert.equal(passed, held, 'and it stays held');
    assert.equal(receiver.spans.length, 0);
    receiver.behave('accept');
    receiver.release();
    await done;
    assert.equal(passed, total);
    assert.equal(
      receiver.spans.length,
      spanCount({ channels: run.tree.channels().map((c) => ({ counts: c.counts })) }),
    );
  });
});

describe(
  'OTLP sink on live runs of the real Claude Code CLI',
  { skip: !claudeAvailable() && 'the Claude Code CLI is not installed (`npm test` installs it)' },
  () => {
    let api: FakeApi;
    let receiver: OtlpReceiver;
    before(async () => {
      api = await startFakeApi();
      receiver = await startOtlpReceiver();
    });
    after(async () => {
      await api?.close();
      await receiver?.close();
    });

    for (const [name, prompt] of [
      ['binary-tree-depth-3', 'SCRIPT:tree:3'],
      ['failing-beside-healthy', 'SCRIPT:mixed'],
    ] as const) {
      test(`claude -p … | subtee --otlp: ${name}`, async () => {
        receiver.spans.length = 0;
        const out = join(tmpDir(), 'out');
        const r = await pipeClaudeIntoSubtee(BIN, { prompt, apiUrl: api.url }, out, ['--otlp', receiver.url]);
        assert.equal(r.subteeCode, 0, r.subteeStderr);
        const { index } = checkOutput(r.raw, out, name);
        assert.equal(receiver.spans.length, spanCount(index));
        assertSpanTree(receiver.spans.map(like), index, name);
        if (name === 'failing-beside-healthy')
          assert.equal(receiver.spans.filter((s) => s.statusCode === 2).length, 1, 'the failed subagent');
        assert.ok(readTree(out).has('main.jsonl'));
      });
    }
  },
);

test('the OpenTelemetry SDK and the ClickHouse client are loaded only by a run that uses their sink', () => {
  const probe = `
    import { createRequire } from 'node:module';
    const { main } = await import(${JSON.stringify(join(BIN, '..', '..', 'dist', 'src', 'cli', 'main.js'))});
    const store = /@opentelemetry|@clickhouse/;
    const loaded = () =>
      Object.keys(createRequire(import.meta.url).cache).filter((k) => store.test(k)).length;
    const before = loaded();
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' };
    const { stdin, stdout, stderr } = process;
    await main(process.argv.slice(1), { stdin, stdout, stderr, env });
    console.error(JSON.stringify({ before, after: loaded() }));`;
  const run = (args: string[]) => {
    const r = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        probe,
        '--',
        '--out',
        join(tmpDir(), 'out'),
        '--stdout',
        'none',
        '-q',
        ...args,
      ],
      { encoding: 'utf8' },
    );
    return JSON.parse(r.stderr.trim().split('\n').pop()!);
  };
  assert.deepEqual(run([NESTED]), { before: 0, after: 0 });
  assert.ok(
    run([
      '-c',
      otlpConfig({ url: 'http://127.0.0.1:9', retryMs: 0, flushTimeoutMs: 0, timeoutMs: 50 }),
      NESTED,
    ]).after > 0,
  );
});
