import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';
import { BIN, FIXTURES, linesOf, ROOT, tmpDir } from './helpers/helpers.js';
import { VersionGuard, versionWarnings, checkRequiredVersion } from '../src/chain/stages/version-guard.js';
import { isValidRange, satisfies } from '../src/semver.js';
import type { SubteeRecord } from '../src/model/record.js';

const init = (v: string | undefined): SubteeRecord => ({
  kind: 'line',
  lineNo: 1,
  raw: Buffer.from('{}'),
  value: { type: 'system', subtype: 'init', ...(v ? { claude_code_version: v } : {}) },
});
const codes = (v: string) =>
  versionWarnings(v)
    .map((w) => w.code)
    .sort();

test('each boundary of the version timeline', () => {
  assert.deepEqual(codes('2.1.207'), [
    'VERSION_NO_NESTED_FORWARDING',
    'VERSION_NO_SUBAGENT_TEXT',
    'VERSION_PIPE_TRUNCATION',
  ]);
  assert.deepEqual(codes('2.1.208'), ['VERSION_NO_NESTED_FORWARDING', 'VERSION_NO_SUBAGENT_TEXT']);
  assert.deepEqual(codes('2.1.210'), ['VERSION_NO_NESTED_FORWARDING', 'VERSION_NO_SUBAGENT_TEXT']);
  assert.deepEqual(codes('2.1.211'), ['VERSION_NO_NESTED_FORWARDING']);
  assert.deepEqual(codes('2.1.216'), ['VERSION_NO_NESTED_FORWARDING']);
  assert.deepEqual(codes('2.1.217'), ['VERSION_NO_NESTED_FORWARDING', 'VERSION_NO_NESTING']);
  assert.deepEqual(codes('2.1.218'), ['VERSION_NO_NESTED_FORWARDING', 'VERSION_NO_NESTING']);
  assert.deepEqual(codes('2.1.219'), []);
  assert.deepEqual(codes('2.1.328'), []);
  assert.deepEqual(codes('1.0.56'), [
    'VERSION_NO_NESTED_FORWARDING',
    'VERSION_NO_SUBAGENT_TEXT',
    'VERSION_PIPE_TRUNCATION',
  ]);
  assert.deepEqual(codes('nonsense'), ['VERSION_UNKNOWN']);
});

test('--require-version refuses older and unknown versions with ERR_VERSION (exit 4)', () => {
  assert.doesNotThrow(() => checkRequiredVersion('2.1.219', '>=2.1.219'));
  assert.throws(() => checkRequiredVersion('2.1.218', '>=2.1.219'), { code: 'ERR_VERSION', exitCode: 4 });
  assert.throws(() => checkRequiredVersion(null, '>=2.1.219'), { code: 'ERR_VERSION' });
  const g = new VersionGuard('>=2.1.219');
  assert.throws(() => g.observe(init('2.1.210')), { code: 'ERR_VERSION' });
  assert.throws(() => new VersionGuard('>=2.1.219').observe(init(undefined)), { code: 'ERR_VERSION' });
  assert.throws(() => new VersionGuard('>=2').end(), { code: 'ERR_VERSION' }, 'no init at all');
  assert.ok(satisfies('2.1.328', '>=2.1.219 <3'));
  assert.ok(satisfies('2.1.5', '^2.1.0 || 1.x'));
  assert.ok(!satisfies('3.0.0', '^2.1.0'));
  // A version is read whole or not at all: a leading number is not a version.
  for (const odd of ['99abc', '3 is what I am', '2.1.\u001b[2J328', '2.1.328.4', '', '2.2', '=2.1.328'])
    assert.throws(() => checkRequiredVersion(odd, '>=2.1.219'), { code: 'ERR_VERSION' }, odd);
  for (const fine of ['2.1.328', 'v2.1.328', '2.1.328-beta.1+build.5', ' 2.1.328 '])
    assert.doesNotThrow(() => checkRequiredVersion(fine, '>=2.1.219'), fine);
  const codes = new VersionGuard(null).observe(init('2.1.\u001b[2J328')).map((w) => w.code);
  assert.deepEqual(codes, ['VERSION_UNKNOWN']);
});

test('warnings are said once each, from init and from the stream', () => {
  const g = new VersionGuard(null);
  assert.deepEqual(
    g
      .observe(init('2.1.210'))
      .map((w) => w.code)
      .sort(),
    ['VERSION_NO_NESTED_FORWARDING', 'VERSION_NO_SUBAGENT_TEXT'],
  );
  assert.deepEqual(g.observe(init('2.1.210')), []);
  const q = (text: string): SubteeRecord => ({
    kind: 'quarantine',
    lineNo: 2,
    raw: Buffer.from(text),
    reason: 'not-object',
    final: true,
  });
  assert.equal(
    g.observe(q('Error: When using --print, --output-format=stream-json requires --verbose'))[0].code,
    'VERBOSE_REQUIRED',
  );
  const u = g.observe(q("error: unknown option '--forward-subagent-text'"))[0];
  assert.equal(u.code, 'UNKNOWN_OPTION');
  assert.match(u.message, /--forward-subagent-text/);
  const thinking: SubteeRecord = {
    kind: 'line',
    lineNo: 3,
    raw: Buffer.from('{}'),
    value: {
      type: 'assistant',
      parent_tool_use_id: null,
      message: { content: [{ type: 'thinking', thinking: '', signature: 'abc' }] },
    },
  };
  assert.equal(g.observe(thinking)[0].code, 'THINKING_OMITTED');
  assert.deepEqual(g.observe(thinking), []);
});

test('subagents with tool calls but no text mean forwarding is off, with the flag to turn it on', () => {
  const line = (value: Record<string, unknown>): SubteeRecord => ({
    kind: 'line',
    lineNo: 1,
    raw: Buffer.from('{}'),
    value,
  });
  const toolOnly = (id: string) =>
    line({
      type: 'assistant',
      parent_tool_use_id: id,
      message: { content: [{ type: 'tool_use', name: 'Bash', id: `x${id}`, input: {} }] },
    });
  const g = new VersionGuard(null);
  g.observe(toolOnly('toolu_a'));
  g.observe(toolOnly('toolu_b'));
  const w = g.observe(
    line({ type: 'system', subtype: 'task_notification', tool_use_id: 'toolu_a', status: 'completed' }),
  );
  assert.equal(w[0].code, 'FORWARDING_OFF');
  assert.match(w[0].message, /--forward-subagent-text|CLAUDE_CODE_FORWARD_SUBAGENT_TEXT/);
  // One subagent that speaks shows forwarding is on; a quiet orchestrator beside it is normal.
  const g2 = new VersionGuard(null);
  g2.observe(toolOnly('toolu_a'));
  g2.observe(
    line({
      type: 'assistant',
      parent_tool_use_id: 'toolu_b',
      message: {
        content: [
          { type: 'text', text: 'hi' },
          { type: 'tool_use', name: 'Bash', id: 'y', input: {} },
        ],
      },
    }),
  );
  g2.observe(
    line({ type: 'system', subtype: 'task_notification', tool_use_id: 'toolu_a', status: 'completed' }),
  );
  assert.deepEqual(g2.end(), []);
});

test('caret ranges below 1.0 pin the first non-zero part, as npm does; tilde pins the minor', () => {
  const cases: Array<[string, string, boolean]> = [
    ['1.9.9', '^1.2.3', true],
    ['2.0.0', '^1.2.3', false],
    ['1.2.2', '^1.2.3', false],
    ['0.1.0', '^0.1.0', true],
    ['0.1.9', '^0.1.0', true],
    ['0.2.0', '^0.1.0', false], // ^0.x is not ^1: a new minor may break
    ['1.0.0', '^0.1.0', false],
    ['0.0.3', '^0.0.3', true],
    ['0.0.4', '^0.0.3', false], // ^0.0.x allows that patch only
    ['0.1.0', '^0.0.3', false],
    ['0.2.5', '^0.2', true],
    ['0.3.0', '^0.2', false],
    ['0.0.9', '^0', true],
    ['0.9.0', '^0', true],
    ['1.0.0', '^0', false],
    ['0.0.5', '^0.0', true],
    ['0.1.0', '^0.0', false],
    ['0.0.5', '^0.0.x', true],
    ['0.1.0', '^0.0.x', false],
    ['1.9.0', '~1', true],
    ['2.0.0', '~1', false],
    ['1.2.9', '~1.2.3', true],
    ['1.3.0', '~1.2.3', false],
    ['0.1.5', '~0.1.0', true],
    ['0.2.0', '~0.1.0', false],
  ];
  for (const [v, range, expected] of cases) assert.equal(satisfies(v, range), expected, `${v} in ${range}`);
});

test('a prerelease counts by its place in semver order: 2.1.219-beta.1 is older than 2.1.219 and ' +
  'refused by >=2.1.219, a nightly of a later version is newer and accepted', () => {
  assert.throws(() => checkRequiredVersion('2.1.219-beta.1', '>=2.1.219'), {
    code: 'ERR_VERSION',
    exitCode: 4,
    message: 'Claude Code 2.1.219-beta.1 does not satisfy --require-version >=2.1.219',
  });
  for (const [v, range] of [
    ['2.1.300-nightly', '>=2.1.219'],
    ['2.1.219', '>=2.1.219-beta.1'],
    ['2.1.219-beta.2', '>=2.1.219-beta.1'],
    ['2.1.219-rc.1', '>=2.1.219-0'],
    ['1.5.0-rc.1', '^1.0.0'],
  ])
    assert.doesNotThrow(() => checkRequiredVersion(v, range), `${v} in ${range}`);
  const cases: Array<[string, string, boolean]> = [
    ['2.1.219-beta.1', '>=2.1.219-beta.2', false],
    ['2.0.0-rc.1', '^1.0.0', false], // a prerelease of the next major is outside ^1
    ['3.0.0-alpha', '<3', false],
    ['3.0.0-alpha', '>=2.1.219 <3', false],
    ['2.1.328-beta.1+build.5', '2.1.328-beta.1', true], // build metadata is not compared
  ];
  for (const [v, range, expected] of cases) assert.equal(satisfies(v, range), expected, `${v} in ${range}`);
  // The timeline reads a prerelease as older than its release, as the range does.
  assert.deepEqual(codes('2.1.211-beta.1'), ['VERSION_NO_NESTED_FORWARDING', 'VERSION_NO_SUBAGENT_TEXT']);
  assert.deepEqual(codes('2.1.219-rc.1'), ['VERSION_NO_NESTED_FORWARDING']);
  assert.deepEqual(codes('2.1.220-nightly.3'), []);
  const g = new VersionGuard('>=2.1.219');
  assert.throws(() => g.observe(init('2.1.219-beta.1')), { code: 'ERR_VERSION' });
  assert.deepEqual(new VersionGuard('>=2.1.219').observe(init('2.1.300-nightly')), []);
});

test('a hyphen range holds both ends, a partial upper end all of its versions: 1.2.3 - 1.4', () => {
  const cases: Array<[string, string, boolean]> = [
    ['1.2.2', '1.2.3 - 1.4', false],
    ['1.2.3', '1.2.3 - 1.4', true],
    ['1.4.0', '1.2.3 - 1.4', true],
    ['1.4.99', '1.2.3 - 1.4', true],
    ['1.5.0-0', '1.2.3 - 1.4', false],
    ['1.5.0', '1.2.3 - 1.4', false],
    ['2.1.219', '2.1.219 - 2.1.300', true],
    ['2.1.301', '2.1.219 - 2.1.300', false],
    ['1.0.0', '1 - 2', true],
    ['2.9.9', '1 - 2', true],
    ['3.0.0', '1 - 2', false],
  ];
  for (const [v, range, expected] of cases) assert.equal(satisfies(v, range), expected, `${v} in ${range}`);
  // On the command line too: the recording states 2.1.328.
  const input = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'));
  const run = (range: string) =>
    spawnSync(
      process.execPath,
      [BIN, '--out', join(tmpDir(), 'o'), '-q', '--stdout', 'none', '--require-version', range],
      { input, encoding: 'utf8' },
    );
  const accepted = run('2.1.219 - 2.1');
  assert.equal(accepted.status, 0, accepted.stderr);
  const refused = run('2.1.219 - 2.1.300');
  assert.equal(refused.status, 4, refused.stderr);
  assert.match(
    refused.stderr,
    new RegExp(
      '^subtee: Claude Code 2\\.1\\.328 does not satisfy --require-version 2\\.1\\.219 - 2\\.1\\.300 ' +
        '\\[ERR_VERSION\\]$',
      'm',
    ),
  );
});

test('x-ranges: an x, X or * part, or a part left out, matches any value of it', () => {
  const cases: Array<[string, string, boolean]> = [
    ['2.1.0', '2.1.x', true],
    ['2.1.999', '2.1.X', true],
    ['2.2.0', '2.1.x', false],
    ['2.0.9', '2.1.*', false],
    ['1.0.0', '1.x', true],
    ['1.99.3', '1.x.x', true],
    ['2.0.0', '1.x', false],
    ['2.5.0', '2', true],
    ['3.0.0', '2', false],
    ['0.0.1', '*', true],
    ['2.1.328', 'x', true],
    ['2.1.5', '^2.1.0 || 1.x', true],
    ['1.4.0', '^2.1.0 || 1.x', true],
    ['0.9.0', '^2.1.0 || 1.x', false],
  ];
  for (const [v, range, expected] of cases) assert.equal(satisfies(v, range), expected, `${v} in ${range}`);
});

test('an invalid range is refused before any input is read (exit 2, ERR_BAD_OPTION, the option and ' +
  'the value named), a blank side of || too; a plugin with one is ERR_PLUGIN_INVALID', async () => {
  const invalid = ['banana', '>=2.1.219 ||', '|| 1.x', '>2.1.219 <', '=>1', '1.2.3.4', '2.1.219 -', 'latest'];
  for (const range of invalid) {
    assert.equal(isValidRange(range), false, range);
    assert.equal(satisfies('2.1.328', range), false, range);
    const out = join(tmpDir(), 'o');
    const r = spawnSync(
      process.execPath,
      [BIN, '--out', out, '-q', '--stdout', 'none', '--require-version', range],
      { input: readFileSync(join(FIXTURES, 'nested-depth-3.jsonl')), encoding: 'utf8' },
    );
    assert.equal(r.status, 2, `${range}: ${r.stderr}`);
    assert.equal(
      r.stderr,
      'subtee: --require-version must be a version range such as ">=2.1.219", ' +
        `not "${range}" [ERR_BAD_OPTION]\n`,
    );
    assert.equal(existsSync(out), false, `${range}: no output folder`);
  }
  for (const range of ['>=2.1.219', '>= 2.1.219', '~>1.2', '>=v1.2.3', '1.2.3 - 1.4', '1.x || >=2.5.0 <3'])
    assert.equal(isValidRange(range), true, range);
  const { definePlugin } = await import('../src/chain/plugin.js');
  for (const kit of ['^0.1.0 ||', 'banana'])
    assert.throws(
      () => definePlugin({ name: 'p', kind: 'stage', kit, options: {}, create: () => null as never }),
      { code: 'ERR_PLUGIN_INVALID', message: 'plugin p: kit must be a version range such as "^0.1.0"' },
      kit,
    );
});

test('the built-in kit range is valid and met by subtee, so semver is loaded only when a version is ' +
  'read: not by --version or --help; by the timeline of a recording without its range reader, which a ' +
  'plugin kit loads', async () => {
  const { BUILTIN_KIT, KIT_VERSION } = await import('../src/chain/plugin.js');
  assert.ok(isValidRange(BUILTIN_KIT) && satisfies(KIT_VERSION, BUILTIN_KIT), BUILTIN_KIT);
  const main = pathToFileURL(join(ROOT, 'dist', 'src', 'cli', 'main.js')).href;
  const plugin = pathToFileURL(join(ROOT, 'dist', 'src', 'chain', 'plugin.js')).href;
  // subtee's command line in this process, then the semver modules in its CommonJS cache.
  const semverModules = (args: string[], kit: string | null = null) => {
    const program = `
      import { createRequire } from 'node:module';
      const { main } = await import(${JSON.stringify(main)});
      const code = await main(${JSON.stringify(args)});
      const kit = ${JSON.stringify(kit)};
      if (kit) (await import(${JSON.stringify(plugin)})).definePlugin(
        { name: 'p', kind: 'stage', kit, options: {}, create: () => null });
      const cache = Object.keys(createRequire(import.meta.url).cache);
      const semver = cache.filter((p) => p.includes('/node_modules/semver/'));
      console.error(JSON.stringify({ code, semver }));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', program], {
      input: readFileSync(join(FIXTURES, 'nested-depth-3.jsonl')),
      encoding: 'utf8',
    });
    const report = JSON.parse(r.stderr.trim().split('\n').pop()!);
    assert.equal(report.code, 0, r.stderr);
    return report.semver as string[];
  };
  const rangeReader = (modules: string[]) => modules.some((p) => p.endsWith('/semver/classes/range.js'));
  assert.deepEqual(semverModules(['--version']), [], '--version');
  assert.deepEqual(semverModules(['--help']), [], '--help');
  // The recording's system/init states 2.1.328: the version timeline reads it and compares it.
  const split = semverModules(['--out', join(tmpDir(), 'o'), '-q', '--stdout', 'none']);
  assert.ok(split.length > 0 && !rangeReader(split), split.join(' '));
  assert.ok(rangeReader(semverModules(['--version'], '>=0.1.0')), 'a plugin kit');
});

test('a plugin for ^0.2.0 is refused by kit 0.1.0, one for ^0.1.0 is not', async () => {
  const { definePlugin, KIT_VERSION } = await import('../src/chain/plugin.js');
  assert.equal(KIT_VERSION, '0.1.0');
  const plugin = (kit: string) =>
    definePlugin({ name: 'p', kind: 'stage', kit, options: {}, create: () => null as never });
  assert.doesNotThrow(() => plugin('^0.1.0'));
  assert.throws(() => plugin('^0.2.0'), { code: 'ERR_PLUGIN_VERSION' });
  assert.throws(() => plugin('^0.0.9'), { code: 'ERR_PLUGIN_VERSION' });
});

test('the agent is the session producer, not a field a Claude Code line claims', async () => {
  const { Session } = await import('../src/model/session.js');
  const claimed = (producer: string): SubteeRecord => ({
    kind: 'line',
    lineNo: 1,
    raw: Buffer.from('{}'),
    value: { type: 'system', subtype: 'init', producer, claude_code_version: '2.1.210' },
  });
  for (const producer of ['codex', 'constructor', 'toString', '__proto__']) {
    const run = new Session();
    run.stateProducer('claude');
    const warned = new VersionGuard(null, run)
      .observe(claimed(producer))
      .map((w) => w.code)
      .sort();
    assert.deepEqual(warned, ['VERSION_NO_NESTED_FORWARDING', 'VERSION_NO_SUBAGENT_TEXT'], producer);
    assert.throws(() => new VersionGuard('>=2.1.219', run).observe(claimed(producer)), {
      code: 'ERR_VERSION',
    });
  }
  // A mapped Codex stream (producer decided by the input-format stage) gets no Claude Code notes.
  const codex = new Session();
  codex.stateProducer('codex');
  const codexGuard = new VersionGuard('>=0.100', codex);
  const mappedInit: SubteeRecord = {
    kind: 'line',
    lineNo: 1,
    raw: Buffer.from('{}'),
    value: { type: 'system', subtype: 'init', producer: 'codex', producer_version: '0.171.0' },
  };
  assert.deepEqual(codexGuard.observe(mappedInit), []);
  assert.equal(codexGuard.version, '0.171.0');
  assert.throws(() => new VersionGuard('>=1', codex).observe(mappedInit), { code: 'ERR_VERSION' });
});

test('an init that states no version is accepted when the command --version met the range', async () => {
  const { Session } = await import('../src/model/session.js');
  const run = new Session();
  run.stateProducer('claude');
  run.stateCheckedCommandVersion('2.1.328');
  const guard = new VersionGuard('>=2.1.219', run);
  assert.deepEqual(guard.observe(init(undefined)), []);
  assert.deepEqual(guard.end(), []);
  // A version the init does state is still checked, and without a checked command it is refused.
  assert.throws(() => new VersionGuard('>=2.1.219', run).observe(init('2.1.210')), { code: 'ERR_VERSION' });
  run.stateCheckedCommandVersion(null);
  assert.throws(() => new VersionGuard('>=2.1.219', run).observe(init(undefined)), { code: 'ERR_VERSION' });
});

test('findVersion picks the first version-shaped word of --version output', async () => {
  const { findVersion } = await import('../src/semver.js');
  const cases: Array<[string, string | null]> = [
    ["GitHub Copilot CLI 1.0.102.\nRun 'copilot update' to check for updates.\n", '1.0.102'],
    ['codex-cli 0.171.0\n', '0.171.0'],
    ['2.1.328 (Claude Code)\n', '2.1.328'],
    ['0.61.0\n', '0.61.0'],
    ['1.18.33', '1.18.33'],
    ['tool v3.2.1-beta.2 build', '3.2.1-beta.2'],
    ['no version here', null],
  ];
  for (const [text, expected] of cases) assert.equal(findVersion(text), expected, text);
});

/** Every line of the run's `.jsonl` files and `quarantine.log`, as the folder holds them. */
function linesInFolder(out: string): string[] {
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  const files = [...index.channels.map((c: { jsonl: string }) => c.jsonl), 'quarantine.log'];
  return files.filter((f) => existsSync(join(out, f))).flatMap((f) => linesOf(readFileSync(join(out, f))));
}

test('a version refused on a pipe (exit 4) still files every line read, its system/init too, and ' +
  "index.json's figures add up against the folder", () => {
  const text = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'), 'utf8');
  const noInit = text
    .split('\n')
    .filter((l) => !l.includes('"subtype":"init"'))
    .join('\n');
  // Refused at system/init; refused at the end of a stream that states no version.
  for (const [name, input, why] of [
    ['init', text, /Claude Code 2\.1\.328 does not satisfy --require-version >=99 \[ERR_VERSION\]/],
    ['no init', noInit, /version is unknown and --require-version >=99 is set \[ERR_VERSION\]/],
  ] as const) {
    const out = join(tmpDir(), 'o');
    const args = [BIN, '--out', out, '-q', '--stdout', 'none', '--require-version', '>=99'];
    const r = spawnSync(process.execPath, args, { input, encoding: 'utf8' });
    assert.equal(r.status, 4, `${name}: ${r.stderr}`);
    assert.match(r.stderr, why, name);
    assert.equal(r.stderr.split('\n').length, 2, `${name}: one line: ${r.stderr}`);
    const read = input.split('\n').filter((l) => l.trim() !== '');
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.equal(index.input.lines, read.length, name);
    assert.equal(index.input.unwritten, 0, name);
    assert.deepEqual(linesInFolder(out).sort(), [...read].sort(), `${name}: every line filed once`);
    const perChannel = index.channels.reduce((n: number, c: { lines: number }) => n + c.lines, 0);
    assert.equal(perChannel, read.length, name);
  }
});

test('a refused version stops reading: exit 4 while the agent still holds the pipe open, the lines ' +
  'read filed', { timeout: 30_000 }, async () => {
  const out = join(tmpDir(), 'o');
  const args = [BIN, '--out', out, '-q', '--stdout', 'none', '--require-version', '>=2.1.219'];
  const child = spawn(process.execPath, args, { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const lines = [
    JSON.stringify({ type: 'system', subtype: 'init', session_id: 's', claude_code_version: '2.1.210' }),
    JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text: 'a' }] } }),
  ];
  child.stdin.write(lines.join('\n') + '\n');
  // stdin is never closed: subtee ends on its own.
  const [code] = (await once(child, 'exit')) as [number];
  child.stdin.destroy();
  assert.equal(code, 4, stderr);
  const refused = /Claude Code 2\.1\.210 does not satisfy --require-version >=2\.1\.219 \[ERR_VERSION\]/;
  assert.match(stderr, refused);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.input.lines, 2);
  assert.deepEqual(linesInFolder(out), lines);
  const said = index.warnings.map((w: { code: string; message: string }) => [
    w.code,
    /refused at line 1:/.test(w.message),
  ]);
  assert.deepEqual(said, [['VERSION_REFUSED', true]]);
});

test('a refused version is recorded in index.json: a VERSION_REFUSED warning says where it was ' +
  'refused, the CLI says it once, as its error', () => {
  const file = join(FIXTURES, 'nested-depth-3.jsonl');
  const noInit = join(tmpDir(), 'no-init.jsonl');
  const text = readFileSync(file, 'utf8').split('\n');
  writeFileSync(noInit, text.filter((l) => !l.includes('"subtype":"init"')).join('\n'));
  for (const [input, said] of [
    [file, 'Claude Code 2.1.328 does not satisfy --require-version >=3; refused at line 1: ' +
      'reading stopped, the lines read by then are filed'],
    [noInit, "the agent's version is unknown and --require-version >=3 is set; " +
      'refused at the end of the input'],
  ]) {
    const out = join(tmpDir(), 'o');
    const args = [BIN, '--out', out, '-q', '--stdout', 'none', '--require-version', '>=3', input];
    const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
    assert.equal(r.status, 4, r.stderr);
    assert.doesNotMatch(r.stderr, /warning VERSION_REFUSED/);
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.deepEqual(index.warnings, [{ code: 'VERSION_REFUSED', message: said }]);
    // Whatever was read is in the folder (a file this short is read whole).
    assert.equal(index.input.lines, linesInFolder(out).length);
  }
});
