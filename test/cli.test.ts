import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { OPTIONS, helpText, parseArgs } from '../src/options.js';
import { BIN, ROOT, linesOf, readTree, tmpDir } from './helpers.js';

function subtee(args: string[], input?: string | Buffer) {
  return spawnSync(process.execPath, [BIN, ...args], { input, encoding: 'utf8', timeout: 30_000 });
}

const stream = [
  { type: 'system', subtype: 'init', session_id: 's', claude_code_version: '2.1.328' },
  { type: 'assistant', parent_tool_use_id: null, message: { id: 'm1', content: [{ type: 'text', text: 'main says hi' }, { type: 'tool_use', id: 'toolu_sub1', name: 'Agent', input: { subagent_type: 'Explore', description: 'd' } }] } },
  { type: 'assistant', parent_tool_use_id: 'toolu_sub1', message: { id: 'm2', content: [{ type: 'text', text: 'sub says \x1b[31mhi\x1b[0m' }] } },
  { type: 'user', parent_tool_use_id: null, message: { content: [{ type: 'tool_result', tool_use_id: 'toolu_sub1', content: 'ok' }] } },
  { type: 'result', subtype: 'success', is_error: false, result: 'done' },
].map((l) => JSON.stringify(l)).join('\n') + '\nnot json\n';

test('--help lists every option of the table; --version prints the package version', () => {
  const help = subtee(['--help']);
  assert.equal(help.status, 0);
  for (const o of OPTIONS) assert.ok(help.stdout.includes(`--${o.name}`), o.name);
  for (const o of OPTIONS) assert.ok(help.stdout.includes(o.help), `help text of ${o.name}`);
  assert.ok(help.stdout.includes(helpText('').slice(1)));
  const v = subtee(['--version']);
  assert.equal(v.status, 0);
  assert.equal(v.stdout.trim(), `subtee ${JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version}`);
});

for (const [args, code] of [
  [['--bogus'], 'ERR_UNKNOWN_OPTION'],
  [['--stdout', 'loud'], 'ERR_BAD_OPTION'],
  [['--max-open-files', '2'], 'ERR_BAD_OPTION'],
  [['--max-line-bytes', 'lots'], 'ERR_BAD_OPTION'],
  [['--out'], 'ERR_BAD_OPTION'],
  [['a', 'b'], 'ERR_USAGE'],
] as const) {
  test(`bad usage ${args.join(' ')} → one line, exit 2, ${code}`, () => {
    const r = subtee([...args], '');
    assert.equal(r.status, 2);
    assert.equal(r.stderr.split('\n').filter(Boolean).length, 1, r.stderr);
    assert.ok(r.stderr.includes(`[${code}]`), r.stderr);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  });
}

test('parseArgs throws typed errors', () => {
  assert.throws(() => parseArgs(['--nope']), { code: 'ERR_UNKNOWN_OPTION' });
  assert.equal(parseArgs(['-o', 'x']).out, 'x');
  assert.equal(parseArgs([])['max-open-files'], 128);
});

test('unusable input or output: exit 3 with one line', () => {
  const dir = tmpDir();
  writeFileSync(join(dir, 'file'), 'x');
  for (const args of [['--out', join(dir, 'file')], ['--out', dir], ['--out', join(dir, 'new'), join(dir, 'missing.jsonl')]]) {
    const r = subtee(args, '');
    assert.equal(r.status, 3, r.stderr);
    assert.equal(r.stderr.split('\n').filter(Boolean).length, 1, r.stderr);
  }
});

test('stdin to files: text on stdout with labels, escaped; summary on stderr', () => {
  const out = join(tmpDir(), 'o');
  const r = subtee(['--out', out], stream);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'main says hi\n[Explore·sub1] sub says \\x1b[31mhi\\x1b[0m\n[Explore·sub1] [status] completed — ok\n');
  assert.match(r.stderr, /1 subagents \(1 completed, 0 failed, 0 running\), 6 lines, 1 quarantined/);
  assert.doesNotMatch(r.stderr, /\x1b/);
  const files = readTree(out);
  assert.deepEqual(linesOf(files.get('quarantine.log')), ['not json']);
  assert.deepEqual(JSON.parse(files.get('index.json')!.toString()).quarantine_lines, [6]);
});

test('--stdout raw copies the input unchanged; main and none', () => {
  const input = '\ufeff' + stream.replace(/\n/g, '\r\n') + '\n\n{"trunc';
  const raw = subtee(['--out', join(tmpDir(), 'o'), '--stdout', 'raw', '-q'], input);
  assert.equal(raw.status, 0);
  assert.equal(raw.stdout, input);
  assert.equal(raw.stderr, '');
  const main = subtee(['--out', join(tmpDir(), 'o'), '--stdout', 'main', '-q'], stream);
  assert.equal(main.stdout, 'main says hi\n');
  const none = subtee(['--out', join(tmpDir(), 'o'), '--stdout', 'none', '-q'], stream);
  assert.equal(none.stdout, '');
});

test('a closed stdout (| head -1) ends that sink only: files complete, exit 0', async () => {
  const out = join(tmpDir(), 'o');
  const big = Array.from({ length: 20_000 }, (_, i) => JSON.stringify({ type: 'assistant', parent_tool_use_id: null, message: { id: `m${i}`, content: [{ type: 'text', text: `line ${i} ${'x'.repeat(100)}` }] } })).join('\n') + '\n';
  const child = spawn('bash', ['-c', `"${process.execPath}" "${BIN}" --out "${out}" --stdout raw | head -1 > /dev/null; exit \${PIPESTATUS[0]}`], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  child.stdin.end(big);
  const code = await new Promise((res) => child.on('close', res));
  assert.equal(code, 0);
  assert.doesNotMatch(stderr, /error|EPIPE/i);
  const files = readTree(out);
  assert.equal(linesOf(files.get('main.jsonl')).length, 20_000);
  assert.equal(JSON.parse(files.get('index.json')!.toString()).input.lines, 20_000);
});

test('the README documents every option, warning code and error code', async () => {
  // notes/fleet-docs.md holds README sections of the fleet sinks until they are moved in.
  const pending = join(ROOT, 'notes', 'fleet-docs.md');
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8') + (existsSync(pending) ? readFileSync(pending, 'utf8') : '');
  for (const o of OPTIONS) assert.ok(readme.includes(`--${o.name}`), `--${o.name}`);
  const sources = ['src/stages/line-parser.ts', 'src/stages/version-guard.ts', 'src/stages/idle-watchdog.ts'].map((f) => readFileSync(join(ROOT, f), 'utf8')).join('\n');
  const warnings = new Set([...sources.matchAll(/'([A-Z]+(?:_[A-Z]+)+)'/g)].map((m) => m[1]).filter((c) => !c.startsWith('ERR_')));
  assert.ok(warnings.size >= 10);
  for (const c of warnings) assert.ok(readme.includes(`\`${c}\``), c);
  const all = readdirSync(join(ROOT, 'src'), { recursive: true }).filter((f) => String(f).endsWith('.ts')).map((f) => readFileSync(join(ROOT, 'src', String(f)), 'utf8')).join('\n');
  const errors = new Set([...all.matchAll(/(?:Error\(|super\()\s*'(ERR_[A-Z_]+)'/g)].map((x) => x[1]));
  assert.ok(errors.size >= 14);
  for (const m of errors) assert.ok(readme.includes(`\`${m}\``), m);
});
