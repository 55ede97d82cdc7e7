import assert from 'node:assert/strict';
import { existsSync, readFileSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough, Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { test } from 'node:test';
import {
  buildChain,
  DEFAULT_STAGES,
  runChain,
  type ChainSpec,
  type ComponentSpec,
} from '../src/chain/chain.js';
import { definePlugin, Registry } from '../src/chain/plugin.js';
import { FIXTURES, linesOf, tmpDir, transcriptsEnded } from './helpers/helpers.js';
import { until } from './helpers/projection-runs.js';

// What a sink after the files sink warns as it ends (a network sink's OTLP_UNDELIVERED,
// CLICKHOUSE_SPOOLED) is in index.json, however the chain was assembled: the files sink writes
// index.json once the sinks after it have ended.

const NESTED = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'));
const LINES = linesOf(NESTED).length;

/**
 * A sink plugin whose end waits for `ending` (as a network sink's end waits for its last
 * sends), then warns LATE_END, then fails when told to.
 */
function lateWarner(ending: () => Promise<void>, failing = false) {
  return definePlugin<Record<string, never>>({
    name: 'late-warner',
    kind: 'sink',
    kit: '^0.1.0',
    options: {},
    create: (_o, ctx) => ({
      end: async () => {
        await ending();
        ctx.session.warn('LATE_END', 'told as the sink ended');
        if (failing) throw new Error('its end failed');
      },
    }),
  });
}

/** An end that waits a turn of the event loop. */
const aTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function specOf(out: string, sinks: ComponentSpec[] = [{ use: 'late-warner' }]): ChainSpec {
  return { stages: DEFAULT_STAGES.map((s) => ({ ...s })), sinks: [{ use: 'files', out }, ...sinks] };
}

const indexOf = (out: string) => JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
const codesIn = (out: string) => indexOf(out).warnings.map((w: { code: string }) => w.code);

test('index.json lists what a sink after the files sink warns as it ends, under runChain', async () => {
  const out = join(tmpDir(), 'out');
  const registry = new Registry().add(lateWarner(aTurn));
  const run = await runChain(Readable.from([NESTED]), specOf(out), { registry });
  assert.deepEqual(run.warnings.map((w) => w.code), ['LATE_END']);
  assert.deepEqual(codesIn(out), ['LATE_END']);
  assert.equal(indexOf(out).input.lines, LINES);
});

test("index.json lists what a sink after the files sink warns as it ends, buildChain's streams " +
  "in a program's own pipeline", async () => {
  const out = join(tmpDir(), 'out');
  const registry = new Registry().add(lateWarner(aTurn));
  const { streams } = buildChain(specOf(out), { registry });
  // The last sink ends the pipeline by itself.
  await pipeline([Readable.from([NESTED]), ...streams] as unknown as NodeJS.ReadableStream[]);
  assert.deepEqual(codesIn(out), ['LATE_END']);
});

test('a sink after the files sink that fails as it ends: the run fails naming it, and index.json ' +
  'is still written, with every line and what the sink warned', async () => {
  const out = join(tmpDir(), 'out');
  const registry = new Registry().add(lateWarner(aTurn, true));
  const failed = await runChain(Readable.from([NESTED]), specOf(out), { registry }).then(
    () => null,
    (err: Error & { code?: string }) => err,
  );
  assert.equal(failed?.code, 'ERR_PLUGIN_FAILED', String(failed));
  const index = indexOf(out);
  assert.ok(codesIn(out).includes('LATE_END'), JSON.stringify(index.warnings));
  assert.equal(index.input.lines, LINES);
  assert.equal(index.input.unwritten, 0);
});

test('an abort while index.json waits for a sink after the files sink still writes it, with every ' +
  'line', async () => {
  const out = join(tmpDir(), 'out');
  const abort = new AbortController();
  let ending = () => {};
  const endCalled = new Promise<void>((resolve) => (ending = resolve));
  // Its end never settles: only the abort ends the run.
  const registry = new Registry().add(lateWarner(() => (ending(), new Promise<void>(() => {}))));
  const done = runChain(Readable.from([NESTED]), specOf(out), { registry, signal: abort.signal });
  const failed = done.then(
    () => null,
    (err: Error) => err,
  );
  await endCalled;
  assert.ok(transcriptsEnded(out), 'the transcripts ended before the sinks after them');
  assert.equal(existsSync(join(out, 'index.json')), false, 'index.json waits for the sink');
  abort.abort();
  assert.equal((await failed)?.name, 'AbortError');
  const index = indexOf(out);
  assert.equal(index.input.lines, LINES);
  assert.equal(index.input.unwritten, 0);
});

test('report.html, built from the folder once index.json is written, lists what a sink after the ' +
  'report warns as it ends', async () => {
  const out = join(tmpDir(), 'out');
  const registry = new Registry().add(lateWarner(aTurn));
  const sinks = [{ use: 'report', out, html: true, quiet: true }, { use: 'late-warner' }];
  const options = { registry, stderr: new PassThrough() };
  await runChain(Readable.from([NESTED]), specOf(out, sinks), options);
  assert.deepEqual(codesIn(out), ['LATE_END']);
  assert.ok(readFileSync(join(out, 'report.html'), 'utf8').includes('LATE_END'), 'the page lists it');
});

test('index.json waits for a later files sink, and lists what it warns as it ends: a file of its ' +
  'own removed during the run', { timeout: 20_000 }, async () => {
  const [first, second] = [join(tmpDir(), 'first'), join(tmpDir(), 'second')];
  const spec: ChainSpec = {
    stages: DEFAULT_STAGES.map((s) => ({ ...s })),
    sinks: [{ use: 'files', out: first }, { use: 'files', out: second }],
  };
  const { streams } = buildChain(spec);
  // The program's own pipeline holds the end back between the two files sinks until released.
  let release = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const gate = new Transform({
    objectMode: true,
    transform: (batch, _e, done) => done(null, batch),
    flush: (done) => void released.then(() => done()),
  });
  const at = streams.length - 1;
  const input = new PassThrough();
  const done = pipeline([input, ...streams.slice(0, at), gate, streams[at]] as NodeJS.ReadWriteStream[]).then(
    () => null,
    (err: Error & { code?: string }) => err,
  );
  const lines = linesOf(NESTED);
  input.write(`${lines[0]}\n`);
  const removed = join(second, 'main.jsonl');
  await until(() => existsSync(removed) && readFileSync(removed, 'utf8') !== '');
  unlinkSync(removed);
  input.end(`${lines.slice(1).join('\n')}\n`);
  await until(() => transcriptsEnded(first));
  assert.equal(existsSync(join(first, 'index.json')), false, 'index.json waits for the second sink');
  release();
  assert.equal((await done)?.code, 'ERR_WRITE');
  const failures = indexOf(first).warnings.filter((w: { code: string }) => w.code === 'OUTPUT_FAILED');
  assert.equal(failures.length, 1, JSON.stringify(indexOf(first).warnings));
  assert.match(failures[0].message, /second\/main\.jsonl: it was removed during the run/);
});
