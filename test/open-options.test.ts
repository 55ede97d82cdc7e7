import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { test } from 'node:test';
import { gzipSync } from 'node:zlib';
import {
  definePlugin,
  KIT_VERSION,
  open,
  type OpenInput,
  type OpenOptions,
  type PluginDefinition,
} from '../src/index.js';
import { builtinRegistry, DEFAULT_STAGES, Registry } from '../src/entry/chain.js';
import { chunked, fixtureFiles, readTree, tmpDir } from './helpers/helpers.js';

const fixture = () => fixtureFiles().find((f) => f.includes('nested-depth-3.'))!;

test('open() takes the path of a recorded stream, gzip included, as the command line does', async () => {
  const fromStream = await open(chunked([readFileSync(fixture())])).done;
  assert.deepEqual(await open(fixture()).done, fromStream);
  const gz = join(tmpDir(), 'run.jsonl.gz');
  writeFileSync(gz, gzipSync(readFileSync(fixture())));
  assert.deepEqual(await open(gz).done, fromStream);
  await assert.rejects(open(join(tmpDir(), 'missing.jsonl')).done, { code: 'ERR_INPUT' });
  await assert.rejects(open(tmpDir()).done, { code: 'ERR_INPUT' });
});

test('open() refuses an input it cannot read with a coded error', () => {
  for (const input of [42, null, {}, [Buffer.from('{}\n')]]) {
    assert.throws(() => open(input as unknown as OpenInput), { code: 'ERR_OPEN_INPUT' });
  }
});

test('out beside a spec: added as its files sink, refused when the spec has one', async () => {
  const stages = DEFAULT_STAGES.map((s) => ({ ...s }));
  const spec = { stages, sinks: [{ use: 'files', out: join(tmpDir(), 'a') }] };
  assert.throws(() => open(fixture(), { out: join(tmpDir(), 'b'), spec }), { code: 'ERR_OUT_TWICE' });
  const out = join(tmpDir(), 'c');
  const index = await open(fixture(), { out, spec: { stages, sinks: [] } }).done;
  assert.deepEqual(JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')), index);
});

test('a spec without the channel router is refused, not every line filed under main', () => {
  const stages = DEFAULT_STAGES.filter((s) => s.use !== 'channel-router').map((s) => ({ ...s }));
  assert.throws(() => open(fixture(), { spec: { stages, sinks: [] } }), { code: 'ERR_ROUTER_REQUIRED' });
});

test('an out folder that holds files rejects done with a coded error in library words', async () => {
  const out = join(tmpDir(), 'used');
  mkdirSync(out);
  writeFileSync(join(out, 'old.txt'), 'x');
  await assert.rejects(
    open(fixture(), { out }).done,
    (err: { code?: string; message?: string }) =>
      err.code === 'ERR_OUT_NOT_EMPTY' && !(err.message ?? '').includes('--'),
  );
  const index = await open(fixture(), { out, force: true }).done;
  assert.ok(index.channels.length > 1);
});

test('open() runs a config, a file or an object, with its plugins loaded', async () => {
  const secret = 'AKIAIOSFODNN7EXAMPLE';
  const content = [{ type: 'text', text: `key ${secret}` }];
  const line = { type: 'assistant', message: { id: 'm1', content } };
  const stages = ['line-parser', 'redact-secrets', 'channel-router'].map((use) => ({ use }));
  const config = { plugins: ['redact-secrets'], stages, sinks: [] };
  const file = join(tmpDir(), 'subtee.json');
  writeFileSync(file, JSON.stringify(config));
  for (const given of [config, file]) {
    const run = open(chunked([Buffer.from(JSON.stringify(line) + '\n')]), { config: given });
    const texts: string[] = [];
    for await (const m of run.messages) texts.push(await m.text);
    await run.done;
    assert.equal(texts.length, 1);
    assert.ok(!texts[0].includes(secret), texts[0]);
  }
  assert.throws(() => open(fixture(), { config, spec: { stages, sinks: [] } }), { code: 'ERR_OPEN_OPTIONS' });
  // A config's stages run among the default ones, the router with them (a spec without it is
  // refused, above).
  const unrouted = { stages: [{ use: 'line-parser' }], sinks: [] };
  assert.ok((await open(fixture(), { config: unrouted }).done).channels.length > 1);
  const missing = join(tmpDir(), 'none.json');
  await assert.rejects(open(fixture(), { config: missing }).done, { code: 'ERR_CONFIG_READ' });
});

test('projection options out of range throw ERR_OPEN_OPTIONS at once; the least allowed work', async () => {
  const bad = [
    { readerHighWaterLines: -1 },
    { readerHighWaterLines: 0 },
    { readerHighWaterLines: -Infinity },
    { readerHighWaterLines: 1.5 },
    { maxBufferedBytes: -1 },
    { readerStallMs: 0 },
    { readerStallMs: Number.NaN },
  ];
  for (const options of bad)
    assert.throws(() => open(fixture(), options), { code: 'ERR_OPEN_OPTIONS' }, JSON.stringify(options));
  // A negative high-water mark used to hang the events loop and `done` for ever.
  const run = open(fixture(), { readerHighWaterLines: 1, maxBufferedBytes: 0 });
  let events = 0;
  for await (const _event of run.events) events++;
  await run.done;
  assert.ok(events > 0);
});

test('interleave() refuses a name that is no projection with ERR_OPEN_OPTIONS, naming it', async () => {
  const run = open(fixture());
  const names = ['messages', 'nope'] as unknown as Array<'messages'>;
  assert.throws(
    () => run.interleave(...names),
    (err: Error & { code?: string }) =>
      err.name === 'UsageError' && err.code === 'ERR_OPEN_OPTIONS' && /"nope"/.test(err.message),
  );
  let merged = 0;
  for await (const _item of run.interleave('messages', 'subagents')) merged++;
  await run.done;
  assert.ok(merged > 0);
});

test('an input that fails midway: what was read is filed, ' +
  'index.json records the failure, done rejects', async () => {
  const lines = readFileSync(fixture(), 'utf8').split('\n').filter(Boolean);
  const kept = lines.slice(0, 10);
  async function* failing() {
    for (const line of kept) yield Buffer.from(line + '\n');
    throw Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' });
  }
  const out = join(tmpDir(), 'o');
  const run = open(Readable.from(failing()), { out });
  const subagents: string[] = [];
  for await (const sub of run.allSubagents) subagents.push(sub.id);
  await assert.rejects(run.done, { code: 'ERR_INPUT' });
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.deepEqual(
    index.warnings.map((w: { code: string }) => w.code),
    ['INPUT_FAILED'],
  );
  assert.equal(index.input.lines, kept.length);
  // Every line read is in a channel's file, once.
  const filed = index.channels.flatMap((ch: { jsonl: string }) =>
    readFileSync(join(out, ch.jsonl), 'utf8').split('\n').filter(Boolean),
  );
  assert.deepEqual(filed.sort(), kept.slice().sort());
  assert.deepEqual(
    subagents,
    index.channels.slice(1).map((ch: { id: string }) => ch.id),
  );
});

test('a gzip byte stream or iterable given to open() is decompressed, as the command line ' +
  'decompresses its stdin', async () => {
  const plain = await open(fixture()).done;
  assert.ok(plain.channels.length > 1);
  const packed = gzipSync(readFileSync(fixture()));
  async function* pieces() {
    // Split inside the gzip header: the format is told from the first bytes, whatever the chunks.
    yield packed.subarray(0, 3);
    yield packed.subarray(3);
  }
  for (const input of [chunked([packed]), pieces()]) {
    const index = await open(input).done;
    assert.deepEqual(index.input, plain.input);
    assert.deepEqual(index.channels.map((ch) => ch.id), plain.channels.map((ch) => ch.id));
    assert.deepEqual(index.warnings, []);
  }
});

test('open() on a cut-short gzip file keeps every decompressed ' +
  'byte, records INPUT_CUT_SHORT, rejects ERR_INPUT', async () => {
  const dir = tmpDir();
  const whole = gzipSync(readFileSync(fixture()));
  const file = join(dir, 'cut.jsonl.gz');
  writeFileSync(file, whole.subarray(0, whole.length - 20));
  // What a decompressor gets out of the cut file before it notices the cut (zcat, not subtee).
  const readable = spawnSync('bash', ['-c', `zcat "${file}" 2>/dev/null`], { maxBuffer: 1 << 26 }).stdout;
  const expected = readable
    .toString('utf8')
    .split('\n')
    .filter((l) => l !== '');
  const out = join(dir, 'out');
  const run = open(file, { out });
  await assert.rejects(run.done, { code: 'ERR_INPUT' });
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.deepEqual(
    index.warnings.map((w: { code: string }) => w.code),
    ['INPUT_CUT_SHORT'],
  );
  assert.equal(index.input.bytes, readable.length);
  const files = readTree(out);
  const kept = [...files]
    .filter(([name]) => name.endsWith('.jsonl') || name === 'quarantine.log')
    .flatMap(([, bytes]) =>
      bytes
        .toString('utf8')
        .split('\n')
        .filter((l) => l !== ''),
    );
  assert.deepEqual(kept.sort(), expected.sort());
});

test('an option open() does not take is refused at ' +
  'once, named (a program in JavaScript can pass any)', () => {
  const options = { outt: join(tmpDir(), 'o') } as unknown as Parameters<typeof open>[1];
  assert.throws(() => open(fixture(), options), (err: { code?: string; message?: string }) => {
    const message = err.message ?? '';
    return err.code === 'ERR_OPEN_OPTIONS' && /"outt"/.test(message) && /\bout\b/.test(message);
  });
});

test('an openChannelFile that is not a function is refused at once, named', () => {
  const options = { openChannelFile: 'fs.createReadStream' } as unknown as Parameters<typeof open>[1];
  assert.throws(() => open(fixture(), options), (err: { code?: string; message?: string }) => {
    return err.code === 'ERR_OPEN_OPTIONS' && /openChannelFile/.test(err.message ?? '');
  });
});

test("the options open() hands a stage or a sink are refused at once under open()'s names, " +
  'with a code', () => {
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ out: 42 }, /^open\(\): out must be a string/],
    [{ out: '' }, /^open\(\): out must not be empty/],
    [{ out: join(tmpDir(), 'o'), force: 'yes' }, /^open\(\): force must be a boolean/],
    [{ idleTimeoutMs: '1000' }, /^open\(\): idleTimeoutMs must be a whole number/],
    [{ stallGraceMs: -5 }, /^open\(\): stallGraceMs must be at least/],
    [{ onStall: 'explode' }, /^open\(\): onStall must be one of fail, warn/],
    [{ readerStallMs: '5' }, /^open\(\): readerStallMs must be an integer of at least 1, not a string$/],
  ];
  for (const [options, message] of cases) {
    const given = options as Parameters<typeof open>[1];
    assert.throws(() => open(fixture(), given), { code: 'ERR_OPEN_OPTIONS', message });
  }
});

test('every option given as undefined is left out, as its type says', async () => {
  const names: Array<keyof OpenOptions> = ['out', 'force', 'spec', 'config', 'registry', 'signal',
    'openChannelFile', 'idleTimeoutMs', 'modelTimeoutMs', 'toolTimeoutMs', 'stallGraceMs', 'onStall', 'env',
    'stderr', 'pluginEndTimeoutMs', 'maxBufferedBytes', 'readerHighWaterLines', 'readerStallMs'];
  const options: OpenOptions = Object.fromEntries(names.map((name) => [name, undefined]));
  const index = await open(fixture(), options).done;
  const plain = await open(fixture()).done;
  assert.deepEqual(index.channels.map((ch) => ch.id), plain.channels.map((ch) => ch.id));
});

test('a registry or a spec of the wrong shape is refused at once with a code, not a TypeError later', () => {
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ registry: {} }, /registry must be a Registry/],
    [{ registry: 5 }, /registry must be a Registry/],
    [{ spec: 'x' }, /spec must be a chain .*not a value of type string/],
    [{ spec: {} }, /spec must be a chain .*not an object without both lists/],
    [{ spec: { stages: [{ use: 'line-parser' }, { use: 'channel-router' }] } }, /spec must be a chain/],
  ];
  for (const [options, message] of cases) {
    const given = options as Parameters<typeof open>[1];
    assert.throws(() => open(fixture(), given), { code: 'ERR_OPEN_OPTIONS', message });
  }
});

test('done holds the display policy the views applied, with an output folder or without one', async () => {
  // A config object as a file holds one: its $schema and leaveOut are part of the type.
  const config: OpenOptions['config'] = {
    $schema: 'https://example.invalid/subtee-config.json',
    leaveOut: ['idle-watchdog'],
    stages: [{ use: 'thinking-truncator', mode: 'drop' }],
  };
  const without = await open(fixture(), { config }).done;
  const withOut = await open(fixture(), { config, out: join(tmpDir(), 'o') }).done;
  assert.deepEqual(without.display, { thinking: 'drop', thinking_chars: 2000 });
  assert.deepEqual(without.display, withOut.display);
});

test('a stage nobody registered is named, not reported as a missing router', async () => {
  const named = (err: { code?: string; message?: string }) =>
    err.code === 'ERR_CONFIG' && /"nope"/.test(err.message ?? '');
  await assert.rejects(open(fixture(), { config: { stages: [{ use: 'nope' }] } }).done, named);
  assert.throws(() => open(fixture(), { spec: { stages: [{ use: 'nope' }], sinks: [] } }), named);
});

test("a config's problems name its entries where the config lists them, as the command line's do",
  async () => {
  const stages = [{ use: 'thinking-truncator', bogus: 1 }];
  const file = join(tmpDir(), 'bad.json');
  writeFileSync(file, JSON.stringify({ stages, sinks: [{ use: 'files' }] }));
  for (const config of [{ stages }, file]) {
    await assert.rejects(open(fixture(), { config }).done, (err: { code?: string; message?: string }) => {
      assert.equal(err.code, 'ERR_CONFIG');
      assert.match(err.message ?? '', /stages\[0\]\.bogus: unknown option for "thinking-truncator"/);
      // Every problem in the one message: the files sink's missing folder too.
      if (typeof config === 'string') assert.match(err.message ?? '', /sinks\[0\]\.out: required/);
      return true;
    });
  }
});

test("a config's sinks are named by their index in it; a sink option refused without I/O (a URL the " +
  'ClickHouse client does not take) is refused before the output folder is made', async () => {
  const sinks = [{ use: 'pino', destination: join(tmpDir(), 'a.log') }, { use: 'pino', bogus: 1 }];
  const out = join(tmpDir(), 'o');
  await assert.rejects(open(fixture(), { config: { sinks }, out }).done, {
    code: 'ERR_CONFIG',
    message: /sinks\[1\]\.bogus: unknown option for "pino"/,
  });
  const clickhouse = { use: 'clickhouse', url: 'http://127.0.0.1:1/?database=a' };
  await assert.rejects(open(fixture(), { config: { sinks: [clickhouse] }, out }).done, {
    code: 'ERR_BAD_OPTION',
    message: /clickhouse: not a usable URL: .*Unknown URL parameters: database/,
  });
  assert.equal(existsSync(out), false, 'no folder left behind');
});

test("a registry a program extends keeps the built-in stages and sinks; a built-in's name stays " +
  "taken", async () => {
  let seen = 0;
  const counter = definePlugin({
    name: 'count-lines',
    kind: 'sink',
    kit: `^${KIT_VERSION}`,
    options: {},
    create: () => () => void seen++,
  });
  const stages = DEFAULT_STAGES.map((s) => ({ ...s }));
  const out = join(tmpDir(), 'out');
  const run = open(fixture(), {
    registry: new Registry().add(counter),
    spec: { stages, sinks: [{ use: 'files', out }, { use: 'count-lines' }] },
  });
  const index = await run.done;
  assert.equal(seen, index.input.lines);
  assert.ok(seen > 0);
  assert.deepEqual(JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')).input, index.input);
  const files = definePlugin({ ...counter, name: 'files' });
  const registry = new Registry().add(files);
  assert.throws(() => open(fixture(), { registry }), { code: 'ERR_PLUGIN_DUPLICATE' });
  // The built-in registry itself may be passed, as before.
  await open(fixture(), { registry: builtinRegistry().add(counter) }).done;
});

test('open() refuses options that are not an object, a signal that is ' +
  'no AbortSignal, an env that is no object', () => {
  const bad: unknown[] = [null, 'out', [], { signal: 'x' }, { signal: {} }, { env: 5 }, { env: null }];
  for (const options of bad) {
    assert.throws(
      () => open(fixture(), options as never),
      (err: Error & { code?: string }) =>
        err.name === 'UsageError' && err.code === 'ERR_OPEN_OPTIONS' && err.message.startsWith('open(): '),
      JSON.stringify(options),
    );
  }
});

test("open()'s pluginEndTimeoutMs bounds a plugin promise still pending after the input's end: " +
  'done rejects naming the plugin', { timeout: 15_000 }, async () => {
  // A timer of its own keeps the process busy, so only the bound can end the wait.
  let timer: NodeJS.Timeout | undefined;
  const slowEnd = definePlugin({
    name: 'slow-end',
    kind: 'sink',
    kit: `^${KIT_VERSION}`,
    options: {},
    create: () => ({
      end: () => new Promise<void>(() => void (timer = setInterval(() => {}, 1000))),
    }),
  });
  const out = join(tmpDir(), 'out');
  const t0 = performance.now();
  try {
    const stages = DEFAULT_STAGES.map((s) => ({ ...s }));
    const run = open(fixture(), {
      registry: new Registry().add(slowEnd),
      spec: { stages, sinks: [{ use: 'files', out }, { use: 'slow-end' }] },
      pluginEndTimeoutMs: 200,
    });
    await assert.rejects(run.done, {
      code: 'ERR_PLUGIN_FAILED',
      message: "plugin slow-end: its end() did not settle within 0.2 s of the input's end",
    });
  } finally {
    clearInterval(timer);
  }
  assert.ok(performance.now() - t0 < 10_000);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.input.lines, readFileSync(fixture(), 'utf8').split('\n').filter(Boolean).length);
});

test("open()'s stderr is where the chain's components tell a person: a plugin's ctx.stderr", async () => {
  const told = definePlugin({
    name: 'told',
    kind: 'sink',
    kit: `^${KIT_VERSION}`,
    options: {},
    create: (_o, ctx) => ({ end: () => void ctx.stderr.write('told: the end\n') }),
  });
  const chunks: string[] = [];
  const stderr = new Writable({ write: (chunk, _enc, cb) => (chunks.push(String(chunk)), cb()) });
  const stages = DEFAULT_STAGES.map((s) => ({ ...s }));
  const options = { registry: new Registry().add(told), spec: { stages, sinks: [{ use: 'told' }] } };
  await open(fixture(), { ...options, stderr }).done;
  assert.deepEqual(chunks, ['told: the end\n']);
});

test('open() refuses a pluginEndTimeoutMs that is no number of at least 0 and a stderr that ' +
  'is no stream, named', () => {
  const bad: unknown[] = [
    { pluginEndTimeoutMs: -1 },
    { pluginEndTimeoutMs: Number.NaN },
    { pluginEndTimeoutMs: '300' },
    { pluginEndTimeoutMs: null },
    { stderr: 'x' },
    { stderr: {} },
    { stderr: null },
  ];
  for (const options of bad) {
    const name = Object.keys(options as object)[0];
    assert.throws(
      () => open(fixture(), options as never),
      (err: Error & { code?: string }) =>
        err.code === 'ERR_OPEN_OPTIONS' && err.message.startsWith(`open(): ${name} must be`),
      JSON.stringify(options),
    );
  }
});

/** The objects and arrays in a value that are frozen, by their path. */
function frozenParts(value: unknown, path = '', found: string[] = []): string[] {
  if (value === null || typeof value !== 'object') return found;
  if (Object.isFrozen(value)) found.push(path || '(the value)');
  for (const [key, child] of Object.entries(value)) frozenParts(child, `${path}.${key}`, found);
  return found;
}

test("open() leaves the caller's plugin definition and message objects as they were: not frozen; " +
  'the plugin and the projections are handed frozen copies', async () => {
  const messages = readFileSync(fixture(), 'utf8').split('\n').filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const before = structuredClone(messages);
  const seen: { lineNo: number; value: unknown; refused: boolean }[] = [];
  const def: PluginDefinition<{ note?: string }> = {
    name: 'look',
    kind: 'stage',
    kit: `^${KIT_VERSION}`,
    reads: ['assistant', 'user', 'system', 'result'],
    options: { note: { type: 'string', default: 'n' } },
    create: () => (rec) => {
      if (rec.kind !== 'line') return rec;
      let refused = false;
      try {
        (rec.value as { type: unknown }).type = 'x';
      } catch {
        refused = true;
      }
      seen.push({ lineNo: rec.lineNo, value: rec.value, refused });
      return rec;
    },
  };
  const plugin = definePlugin(def);
  const stages = [{ use: 'object-source' }, { use: 'look' }, ...DEFAULT_STAGES.slice(1)];
  const options: OpenOptions = { registry: new Registry().add(plugin), spec: { stages, sinks: [] } };
  const run = open(Readable.from(messages), options);
  const handed: unknown[] = [];
  for await (const [name, item] of run.interleave('events', 'toolCalls', 'messages')) {
    if (name === 'events') handed.push(item.kind === 'line' ? item.line : null);
    else handed.push(name === 'toolCalls' ? item.input : item);
  }
  await run.done;
  assert.deepEqual(frozenParts(messages), [], 'no part of a message object handed in is frozen');
  assert.deepEqual(messages, before, 'nor changed');
  assert.deepEqual([def, def.reads, def.options, options].map(Object.isFrozen), [false, false, false, false]);
  assert.ok(Object.isFrozen(plugin) && Object.isFrozen(plugin.reads) && Object.isFrozen(plugin.options));
  assert.ok(seen.length > 0 && seen.every((s) => s.refused && frozenParts(s.value).length > 0));
  assert.ok(seen.every((s) => !messages.includes(s.value as Record<string, unknown>)));
  assert.deepEqual(seen.map((s) => s.value), seen.map((s) => messages[s.lineNo - 1]));
  assert.ok(handed.length > messages.length && handed.some((v) => typeof v === 'object' && v !== null));
  for (const value of handed) {
    if (typeof value === 'object' && value !== null) assert.ok(Object.isFrozen(value));
  }
});

test('an abort before an iterable input gives its first value ends the run: done rejects with ' +
  'an AbortError, index.json says interrupted', { timeout: 10_000 }, async () => {
  const controller = new AbortController();
  // Aborted once the run waits for the first value: the value never comes.
  const silent = {
    [Symbol.asyncIterator]: () => ({
      next: () => {
        setImmediate(() => controller.abort());
        return new Promise<IteratorResult<unknown>>(() => {});
      },
    }),
  };
  const out = join(tmpDir(), 'o');
  const run = open(silent, { signal: controller.signal, out });
  const subagents = (async () => {
    for await (const _ of run.subagents) assert.fail('no subagent was read');
  })();
  await assert.rejects(run.done, { name: 'AbortError', code: 'ABORT_ERR' });
  await subagents;
  assert.equal(JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')).interrupted, true);
  assert.equal((await run.output).status, 'interrupted');
  // An object stream that stays silent, and a signal aborted before open() is called, alike.
  const objects = new Readable({ objectMode: true, read() {} });
  await assert.rejects(open(objects, { signal: AbortSignal.abort() }).done, { name: 'AbortError' });
  assert.ok(objects.destroyed, 'the input is let go of');
});

test('an iterable input whose first read fails rejects done with ERR_INPUT, as a later failure ' +
  'does, and index.json records it', async () => {
  const out = join(tmpDir(), 'o');
  const failing = {
    [Symbol.asyncIterator]: () => ({
      next: () => Promise.reject(Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' })),
    }),
  };
  await assert.rejects(open(failing, { out }).done, {
    code: 'ERR_INPUT',
    message: /^cannot read the input: an input\/output error/,
  });
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.deepEqual(index.warnings.map((w: { code: string }) => w.code), ['INPUT_FAILED']);
  assert.equal(index.input.lines, 0);
});
