import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createReadStream, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { builtinRegistry } from '../src/chain/builtins.js';
import { DEFAULT_STAGES, runChain } from '../src/chain/chain.js';
import { readConfig, readConfigProblems, registerPlugins, checkSpec } from '../src/chain/config.js';
import { applyFlags, resolveSpec } from '../src/cli/config.js';
import { parseArgs } from '../src/cli/options.js';
import { configSchema } from '../src/chain/schema.js';
import { loadPlugin, definePlugin, Registry } from '../src/chain/plugin.js';
import { open } from '../src/open.js';
import { BIN, FIXTURES, ROOT, chunked, readTree, tmpDir } from './helpers/helpers.js';

const writeJson = (data: unknown) => {
  const p = join(tmpDir(), 'c.json');
  writeFileSync(p, typeof data === 'string' ? data : JSON.stringify(data));
  return p;
};

test('every problem of a config is reported in one message', async () => {
  const p = writeJson({
    stagez: [],
    stages: [
      { use: 'line-parser', maxLineBytes: 'big' },
      { use: 'nope' },
      { use: 'channel-router', colour: 1 },
    ],
    sinks: [{ use: 'files' }, { use: 'stdout', mode: 'loud' }],
  });
  assert.throws(() => readConfig(p), { code: 'ERR_CONFIG', message: /stagez: unknown key/ });
  const p2 = writeJson({
    stages: [
      { use: 'line-parser', maxLineBytes: 'big' },
      { use: 'nope' },
      { use: 'channel-router', colour: 1 },
    ],
    sinks: [{ use: 'files' }, { use: 'stdout', mode: 'loud' }],
  });
  const r = readConfigProblems(p2);
  const registry = builtinRegistry();
  const err = (() => {
    try {
      const listed = { stages: r.listed, sinks: r.config.sinks };
      checkSpec(applyFlags(listed, parseArgs([]), true), registry, 'config');
    } catch (e) {
      return e as any;
    }
  })();
  assert.equal(err.code, 'ERR_CONFIG');
  for (const part of [
    'stages[0].maxLineBytes: must be a whole number',
    'stages[1]: unknown stage "nope"',
    'stages[2].colour: unknown option',
    'sinks[0].out: required',
    'sinks[1].mode: must be one of',
  ]) {
    assert.ok(err.message.includes(part), `${part} in ${err.message}`);
  }
  assert.equal(err.message.split('\n').length, 1);
});

/** Runs the CLI on a recording with `config`: its exit code, its stderr, whether `out` exists. */
function runConfig(config: object, out = join(tmpDir(), 'logs')) {
  const p = writeJson(config);
  const args = [BIN, '--config', p, '--stdout', 'none', join(FIXTURES, 'nested-depth-3.jsonl')];
  const r = spawnSync(process.execPath, args, { cwd: dirname(p), encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr, wrote: existsSync(out) };
}

test("a config's unknown top-level key or wrong section is reported with its stages' and " +
  "sinks' problems, in one message", () => {
  const out = join(tmpDir(), 'logs');
  const stages = [{ use: 'line-parser', foo: 1 }, { use: 'channel-router' }];
  const sinks = [{ use: 'files', out, maxOpenFiles: 'x' }, { use: 'nosuch' }];
  const cases: Array<[object, string[]]> = [
    [
      { bogus: 1, stages, sinks },
      [
        'bogus: unknown key',
        'stages[0].foo: unknown option',
        'sinks[0].maxOpenFiles: must be',
        'sinks[1]: unknown sink',
      ],
    ],
    // A section of the wrong type stands in as its default, so the others are still checked.
    [{ bogus: 1, plugins: 'x', stages: {}, sinks }, [
      'bogus: unknown key',
      'plugins: must be a list',
      'stages: must be a list',
      'sinks[0].maxOpenFiles: must be',
      'sinks[1]: unknown sink',
    ]],
    [
      { plugins: [3], stages, sinks: 'files' },
      ['plugins: must be a list', 'sinks: must be a list', 'stages[0].foo'],
    ],
  ];
  for (const [config, parts] of cases) {
    const r = runConfig(config, out);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /^subtee: config .*\[ERR_CONFIG\]\n$/);
    const said = r.stderr.split('; ').map((p) => p.replace(/^subtee: config \S+: /, ''));
    assert.deepEqual(
      parts.map((part) => said.findIndex((p) => p.startsWith(part))),
      parts.map((_, i) => i),
      `each problem once, in order: ${r.stderr}`,
    );
    assert.equal(said.length, parts.length, r.stderr);
    assert.equal(r.wrote, false);
  }
});

test("a config's problems name its stages and sinks by their index in the file, whatever the " +
  'flags add before them', () => {
  const input = join(FIXTURES, 'nested-depth-3.jsonl');
  const split = (...more: string[]) => (flags: string[]) => [...flags, ...more, input];
  const cases: Array<[object, (flags: string[]) => string[], RegExp]> = [
    // --out adds the files sink before the first pino sink, --stdout none the stdout sink.
    [
      { sinks: [{ use: 'pino', destination: 'x' }, { use: 'pino', bogus: 1 }] },
      split(),
      /: sinks\[1\]\.bogus: unknown option for "pino"/,
    ],
    [{ sinks: [{ use: 'pino', file: '/x' }] }, split(), /: sinks\[0\]\.file: unknown option/],
    [
      { sinks: [{ use: 'pino', file: '/x' }] },
      (flags) => ['run', ...flags, '--stdout', 'none', '-q', '--', 'true'],
      /: sinks\[0\]\.file: unknown option/,
    ],
    // --thinking adds the truncator before the watchdog.
    [
      { stages: [{ use: 'idle-watchdog', bogus: 1 }] },
      split('--thinking', 'drop'),
      /: stages\[0\]\.bogus: unknown option for "idle-watchdog"/,
    ],
    [
      { stages: [{ use: 'channel-router' }, { use: 'idle-watchdog' }, { use: 'channel-router' }] },
      split('--thinking', 'drop'),
      /: stages\[2\]: "channel-router" is already stages\[0\] \(once per chain\)/,
    ],
  ];
  for (const [config, argv, message] of cases) {
    const out = join(tmpDir(), 'o');
    const args = argv(['--config', writeJson(config), '--out', out]);
    const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8' });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, message);
    assert.match(r.stderr, /\[ERR_CONFIG\]\n$/);
    assert.equal(existsSync(out), false);
  }
});

/** The stages the command line runs for a config file with `config`, by name. */
async function stagesRun(config: object): Promise<string[]> {
  const { spec } = await resolveSpec(parseArgs(['--config', writeJson(config)]));
  return spec.stages.map((stage) => stage.use);
}

test("a config's stages run among the default stages: another agent's stream is still read " +
  'as its own, and a default stage is left out only where leaveOut names it', async () => {
  const defaults = DEFAULT_STAGES.map((stage) => stage.use);
  const listed = [{ use: 'line-parser' }, { use: 'channel-router' }];
  assert.deepEqual(await stagesRun({ stages: listed }), defaults);
  // Without the router too: it is never left out, so no line goes to main for want of it.
  assert.deepEqual(await stagesRun({ stages: [{ use: 'thinking-truncator', mode: 'drop' }] }), defaults);
  assert.deepEqual(
    await stagesRun({
      plugins: ['redact-secrets'],
      stages: [{ use: 'redact-secrets' }, { use: 'version-guard' }],
      leaveOut: ['idle-watchdog'],
    }),
    [
      'line-parser',
      'input-format',
      'redact-secrets',
      'version-guard',
      'channel-router',
      'thinking-truncator',
    ],
  );
  // The shipped example that lists its stages, on each agent's recording, as a user runs it.
  for (const agent of ['codex', 'copilot', 'gemini', 'opencode']) {
    const out = join(tmpDir(), 'o');
    const config = join(ROOT, 'examples', 'redact-secrets.json');
    const input = join(FIXTURES, 'other-agents', `${agent}-spawn.jsonl`);
    const args = [BIN, '-q', '--stdout', 'none', '--out', out, '--config', config, input];
    const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.equal(index.producer, agent);
    assert.ok(index.channels.length > 1, `${agent}: its subagents are found`);
  }
  const leaveOut = ['channel-router', 'idle-watchdog'];
  const refused = runConfig({ leaveOut, stages: [{ use: 'idle-watchdog' }] });
  assert.equal(refused.status, 2);
  assert.match(refused.stderr, /leaveOut: "channel-router" is not a default stage that can be left out/);
  assert.match(refused.stderr, /leaveOut: "idle-watchdog" is in stages too/);
});

test('a plugin a config loads but no stage or sink names is refused, naming the entry to add', async () => {
  const out = join(tmpDir(), 'logs');
  const config = { plugins: ['redact-secrets'], sinks: [{ use: 'files', out }] };
  const r = runConfig(config, out);
  assert.equal(r.status, 2, r.stderr);
  const said = r.stderr.replace(/^subtee: config \S+: /, '');
  const expected =
    'plugins: "redact-secrets" is loaded but runs nowhere: no stage uses "redact-secrets"; ' +
    'add { "use": "redact-secrets" } to stages [ERR_CONFIG]\n';
  assert.equal(said, expected);
  assert.equal(r.wrote, false);
  await assert.rejects(open(join(FIXTURES, 'nested-depth-3.jsonl'), { config }).done, {
    code: 'ERR_CONFIG',
    message: /add \{ "use": "redact-secrets" \} to stages/,
  });
  const summary = runConfig({ plugins: ['github-step-summary'], sinks: [{ use: 'files', out }] }, out);
  assert.match(summary.stderr, /add \{ "use": "github-step-summary" \} to sinks/);
});

test('flags override the config; a flag for a missing stage adds it in order', () => {
  const { config } = readConfig(
    writeJson({
      stages: [{ use: 'line-parser' }, { use: 'channel-router' }],
      leaveOut: ['input-format', 'version-guard', 'thinking-truncator', 'idle-watchdog'],
      sinks: [{ use: 'files', out: 'a' }],
    }),
  );
  const spec = applyFlags(
    config,
    parseArgs(['--out', 'b', '--thinking', 'drop', '--require-version', '>=2.1.219']),
    true,
  );
  assert.deepEqual(
    spec.stages.map((s) => s.use),
    ['line-parser', 'version-guard', 'channel-router', 'thinking-truncator'],
  );
  assert.equal(spec.sinks[0].out, 'b');
  const kept = applyFlags(config, parseArgs([]), true);
  assert.equal(kept.sinks[0].out, 'a', 'defaults of flags do not override the file');
});

test("--out adds the files sink before a config's report sink, which reads the index.json it " +
  "wrote, and after the config's other sinks, whose warnings it writes", () => {
  const config = writeJson({ sinks: [{ use: 'report', html: true }, { use: 'stdout', mode: 'none' }] });
  const out = join(tmpDir(), 'o');
  const recording = join(FIXTURES, 'nested-depth-3.jsonl');
  const args = [BIN, '--config', config, '--out', out, recording];
  const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.ok(existsSync(join(out, 'report.html')), 'the report was written');
  const spec = applyFlags(readConfig(config).config, parseArgs(['--out', out]), true);
  assert.deepEqual(spec.sinks.map((s) => s.use), ['files', 'report', 'stdout']);
  const others = writeJson({ sinks: [{ use: 'stdout', mode: 'none' }, { use: 'pino' }] });
  const flags = parseArgs(['--out', out, '--otlp', 'http://127.0.0.1:4318']);
  const added = applyFlags(readConfig(others).config, flags, true);
  assert.deepEqual(added.sinks.map((s) => s.use), ['stdout', 'files', 'otlp', 'pino']);
});

test('bad configs through the CLI: one line, exit 2', () => {
  const cases = [
    join(tmpDir(), 'missing.json'),
    writeJson('{ not json'),
    writeJson({ stages: [{ use: 'line-parser' }], sinks: [{ use: 'files', out: 'x', bogus: true }] }),
    writeJson({ plugins: ['./does-not-exist.js'], stages: [{ use: 'line-parser' }], sinks: [] }),
    writeJson({
      stages: [{ use: 'channel-router' }, { use: 'line-parser' }],
      sinks: [{ use: 'files', out: join(tmpDir(), 'o') }],
    }),
    // A built-in stage twice counted every line twice.
    writeJson({
      stages: [{ use: 'line-parser' }, { use: 'channel-router' }, { use: 'channel-router' }],
      sinks: [{ use: 'files', out: join(tmpDir(), 'o') }],
    }),
  ];
  for (const p of cases) {
    const r = spawnSync(process.execPath, [BIN, '--config', p], { input: '', encoding: 'utf8' });
    assert.equal(r.status, 2, `${p}: ${r.stderr}`);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, /\[ERR_(CONFIG|CONFIG_READ|PLUGIN_LOAD)\]/);
  }
  const both = spawnSync(process.execPath, [BIN, '--out', join(tmpDir(), 'o'), '--pino', '-'], {
    input: '',
    encoding: 'utf8',
  });
  assert.equal(both.status, 2);
  assert.match(both.stderr, /both write to stdout/);
});

test('the shipped JSON Schema is the one the registry describes', async () => {
  const registry = builtinRegistry();
  await registerPlugins(registry, ['redact-secrets', 'github-step-summary'], ROOT);
  const shipped = JSON.parse(readFileSync(join(ROOT, 'schema', 'subtee-config.schema.json'), 'utf8'));
  assert.deepEqual(shipped, configSchema(registry), 'run `npm run schema` after changing an option');
});

test('every example config builds and runs a real recording', async () => {
  const dir = join(ROOT, 'examples');
  const recording = readFileSync(join(ROOT, 'test', 'fixtures', 'nested-depth-3.jsonl'));
  const examples = readdirSync(dir).filter((f) => f.endsWith('.json'));
  assert.ok(examples.length >= 10);
  for (const name of examples) {
    const { config, baseDir } = readConfig(join(dir, name));
    const registry = builtinRegistry();
    await registerPlugins(registry, config.plugins, baseDir);
    const work = tmpDir();
    const o = parseArgs(['--out', join(work, 'logs')]);
    const spec = applyFlags(config, o, true);
    for (const s of spec.sinks) {
      if (s.use === 'stdout') s.mode = 'none';
      if (s.use === 'pino' && typeof s.destination === 'string') s.destination = join(work, 'events.log');
      if (s.use === 'pino' && s.transport)
        (s.transport as any).options.destination = join(work, 'events.log');
      if (s.use === 'github-step-summary') s.path = join(work, 'summary.md');
    }
    checkSpec(spec, registry, name);
    const run = await runChain(chunked([recording]), spec, { registry });
    assert.equal(run.tree.size, 4, name);
    assert.ok(readTree(join(work, 'logs')).has('index.json'), name);
  }
});

test('plugins: contract checked, loading errors name the plugin and keep the cause', async () => {
  const dir = tmpDir();
  writeFileSync(join(dir, 'bad-shape.js'), 'export default { name: "x" };');
  writeFileSync(
    join(dir, 'old.js'),
    'export default { name: "old", kind: "stage", kit: "^9.0.0", options: {}, create() {} };',
  );
  writeFileSync(join(dir, 'throws.js'), 'throw new Error("boom at load");');
  await assert.rejects(loadPlugin('./bad-shape.js', dir), {
    code: 'ERR_PLUGIN_INVALID',
    message: /plugin \.\/bad-shape\.js: kind must be/,
  });
  await assert.rejects(loadPlugin('./old.js', dir), { code: 'ERR_PLUGIN_VERSION' });
  const e = await loadPlugin('./throws.js', dir).catch((x) => x);
  assert.equal(e.code, 'ERR_PLUGIN_LOAD');
  assert.match(e.message, /throws\.js/);
  assert.equal(e.cause.message, 'boom at load');
  await assert.rejects(loadPlugin('no-such-package-xyz', dir), {
    code: 'ERR_PLUGIN_LOAD',
    message: /not found/,
  });
  const r = new Registry().add(
    definePlugin({ name: 'a', kind: 'stage', kit: '^0.1.0', options: {}, create: () => null as never }),
  );
  assert.throws(
    () =>
      r.add(
        definePlugin({ name: 'a', kind: 'sink', kit: '^0.1.0', options: {}, create: () => null as never }),
      ),
    { code: 'ERR_PLUGIN_DUPLICATE' },
  );
  mkdirSync(join(dir, 'node_modules', 'subtee-plugin-upper'), { recursive: true });
  writeFileSync(
    join(dir, 'node_modules', 'subtee-plugin-upper', 'package.json'),
    '{"name":"subtee-plugin-upper","type":"module","main":"index.js"}',
  );
  writeFileSync(
    join(dir, 'node_modules', 'subtee-plugin-upper', 'index.js'),
    'export default { name: "upper", kind: "stage", kit: "^0.1.0", options: {}, create() {} };',
  );
  assert.equal((await loadPlugin('subtee-plugin-upper', dir)).name, 'upper');
});

test("definePlugin hands back a frozen copy and leaves the caller's definition, its reads, options " +
  "and options' specs as they were: not frozen, and what is done to them after reaches nothing the kit " +
  'reads; a class instance is frozen itself and keeps its private fields', () => {
  const given = {
    name: 'counter',
    kind: 'stage' as const,
    kit: '^0.1.0',
    reads: ['assistant'],
    options: { times: { type: 'integer' as const, default: 1, choices: [1, 2] } },
    create: () => () => null,
  };
  const defined = definePlugin(given);
  assert.notEqual(defined, given);
  const parts = (d: typeof given) => [d, d.reads, d.options, d.options.times, d.options.times.choices];
  assert.deepEqual(parts(given).map(Object.isFrozen), [false, false, false, false, false]);
  assert.deepEqual(parts(defined as typeof given).map(Object.isFrozen), [true, true, true, true, true]);
  given.reads.push('user');
  given.name = 'renamed';
  given.options.times.default = 7;
  given.options.times.choices.push(7);
  (given.options as Record<string, unknown>).extra = { type: 'string' };
  assert.deepEqual(
    [defined.name, defined.reads, defined.options],
    ['counter', ['assistant'], { times: { type: 'integer', default: 1, choices: [1, 2] } }],
  );
  // A spec gains no key it did not have.
  const plain = definePlugin({ ...given, options: { n: { type: 'integer' as const, default: 1 } } });
  assert.deepEqual(Object.keys(plain.options.n), ['type', 'default']);

  class Counter {
    name = 'counter';
    kind = 'stage' as const;
    kit = '^0.1.0';
    options = {};
    #made = 0;
    create() {
      this.#made++;
      return () => null;
    }
  }
  const instance = new Counter();
  const definedInstance = definePlugin(instance);
  assert.equal(definedInstance, instance, 'a class instance is frozen itself');
  assert.ok(Object.isFrozen(instance));
  assert.equal(typeof (definedInstance.create as () => unknown)(), 'function', 'its private field is there');
});

test('built-in stages register through the same contract as plugins', () => {
  const r = builtinRegistry();
  for (const n of r.names()) {
    const d = r.get(n)!;
    assert.ok(Object.isFrozen(d) && typeof d.create === 'function' && typeof d.kit === 'string', n);
  }
});

test('the kit version plugins check is the package version', async () => {
  const { KIT_VERSION } = await import('../src/chain/plugin.js');
  assert.equal(KIT_VERSION, JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
});

test('plugins published as ESM-only packages load by name, as import() resolves them', async () => {
  const project = tmpDir();
  const nested = join(project, 'configs', 'ci');
  mkdirSync(nested, { recursive: true });
  const pkg = (name: string, manifest: Record<string, unknown>, files: Record<string, string>) => {
    const dir = join(project, 'node_modules', name);
    for (const [file, text] of Object.entries(files)) {
      mkdirSync(join(dir, file, '..'), { recursive: true });
      writeFileSync(join(dir, file), text);
    }
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, type: 'module', ...manifest }));
  };
  const def = (name: string) =>
    `export default { name: "${name}", kind: "stage", kit: "^0.1.0", options: {}, create: () => (r) => r };`;
  pkg('esm-only', { exports: { '.': { import: './dist/index.js' } } }, { 'dist/index.js': def('esm-only') });
  // Conditions in order: the first that import() matches wins, `require` is never taken.
  pkg(
    'dual',
    { exports: { '.': { require: './cjs.cjs', import: './esm.js' } } },
    { 'esm.js': def('dual-esm'), 'cjs.cjs': 'module.exports = { default: { name: "dual-cjs" } };' },
  );
  pkg(
    '@acme/subtee-tools',
    { exports: { './redact': { node: { import: './lib/redact.js' } }, './stages/*': './lib/stages/*.js' } },
    {
      'lib/redact.js': def('acme-redact'),
      'lib/stages/upper.js': def('acme-upper'),
    },
  );
  pkg('sugar', { exports: './main.js' }, { 'main.js': def('sugar') });
  pkg('plain-main', { main: 'lib/entry.js' }, { 'lib/entry.js': def('plain-main') });
  // Found from a folder below the project, as Node looks up node_modules.
  for (const [spec, name] of [
    ['esm-only', 'esm-only'],
    ['dual', 'dual-esm'],
    ['@acme/subtee-tools/redact', 'acme-redact'],
    ['@acme/subtee-tools/stages/upper', 'acme-upper'],
    ['sugar', 'sugar'],
    ['plain-main', 'plain-main'],
  ]) {
    assert.equal((await loadPlugin(spec, nested)).name, name, spec);
  }
  await assert.rejects(loadPlugin('@acme/subtee-tools', nested), {
    code: 'ERR_PLUGIN_LOAD',
    message: /does not export "\."/,
  });
  // Through the CLI, as a config names it.
  writeFileSync(
    join(nested, 'subtee.json'),
    JSON.stringify({
      plugins: ['esm-only'],
      stages: [{ use: 'line-parser' }, { use: 'esm-only' }, { use: 'channel-router' }],
      sinks: [{ use: 'files', out: join(project, 'o') }],
    }),
  );
  const r = spawnSync(process.execPath, [BIN, '--config', join(nested, 'subtee.json'), '-q'], {
    input: '{"type":"system","subtype":"init"}\n',
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
});

test('a chain that cannot be built lets go of its input at once', async () => {
  const input = createReadStream(join(FIXTURES, 'nested-depth-3.jsonl'));
  const spec = {
    // No input edge first: found as the chain is made, past the checks before it starts.
    stages: [{ use: 'channel-router' }, { use: 'line-parser' }],
    sinks: [{ use: 'files', out: join(tmpDir(), 'out') }],
  };
  await assert.rejects(runChain(input, spec), { code: 'ERR_CONFIG', message: /exactly one input edge/ });
  assert.equal(input.destroyed, true);
});

test('--config refuses at once, in one line with exit 2, a device, a folder, a file past 1 MiB ' +
  'and a named pipe nothing is written to', () => {
  const dir = tmpDir();
  const fifo = join(dir, 'config.fifo');
  assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
  const big = join(dir, 'big.json');
  writeFileSync(big, `{"stages": [] ${' '.repeat(1024 * 1024)}}`);
  const input = join(FIXTURES, 'nested-depth-3.jsonl');
  for (const [config, why] of [
    ['/dev/zero', /a device, not a file/],
    [dir, /a folder, not a file/],
    [big, /larger than 1048576 bytes, not a config/],
    [fifo, /a named pipe with nothing written to it/],
  ] as const) {
    const out = join(dir, 'o');
    const r = spawnSync(process.execPath, [BIN, '--out', out, '--config', config, input], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    assert.equal(r.status, 2, `${config}: ${r.signal ?? ''} ${r.stderr}`);
    assert.equal(r.stderr.split('\n').length, 2, r.stderr);
    assert.match(r.stderr, /^subtee: cannot read config /);
    assert.match(r.stderr, why);
    assert.match(r.stderr, /\[ERR_CONFIG_READ\]\n$/);
    assert.throws(() => readdirSync(out), { code: 'ENOENT' }, 'nothing written');
  }
});

test('--config from a pipe (<(make-config)) is read once its writer writes it', async () => {
  const dir = tmpDir();
  const fifo = join(dir, 'config.fifo');
  assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
  const out = join(dir, 'o');
  const input = join(FIXTURES, 'nested-depth-3.jsonl');
  const child = spawn(process.execPath, [BIN, '--out', out, '-q', '--config', fifo, input], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const closed = new Promise<number | null>((r) => child.on('close', r));
  // Opening the pipe for writing waits for subtee to open it for reading.
  await writeFile(fifo, JSON.stringify({ sinks: [{ use: 'files', out }, { use: 'stdout', mode: 'main' }] }));
  assert.equal(await closed, 0, stderr);
  assert.ok(readdirSync(out).includes('index.json'));
  assert.doesNotMatch(stdout, /\[level/, 'the config\'s stdout mode (main) applied');
});
