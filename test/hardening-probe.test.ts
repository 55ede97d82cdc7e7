import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BIN, boundedSubtee, closedPort, ROOT, tmpDir } from './helpers/helpers.js';
import { clickhouseAvailable, startClickHouse } from './servers/clickhouse.js';

const recording = readFileSync(join(ROOT, 'test', 'fixtures', 'nested-depth-3.jsonl'));

function subtee(args: string[], input: Buffer | string = recording) {
  return boundedSubtee(args, input);
}

test('--force never appends through a hard link at clickhouse-spool.jsonl or events.pino.log', async () => {
  const url = `http://127.0.0.1:${await closedPort()}`;
  const cases = [
    { name: 'clickhouse-spool.jsonl', flags: ['--clickhouse', url] },
    { name: 'events.pino.log', flags: ['--pino'] },
  ];
  for (const c of cases) {
    const precious = join(tmpDir('subtee-victim-'), 'precious');
    // A pino log's first bytes, so that --pino's check of what the file holds lets it through
    // to the write, which must refuse the link.
    const kept = '{"level":30,"msg":"precious"}\n';
    writeFileSync(precious, kept);
    const out = tmpDir();
    linkSync(precious, join(out, c.name));
    const r = subtee(['--out', out, '--force', '-q', '--stdout', 'none', ...c.flags]);
    assert.equal(r.error, undefined, `${c.name}: the run finished`);
    assert.equal(r.status, 3, `${c.name}: ${r.stderr}`);
    assert.match(r.stderr, /\[ERR_WRITE\]\n$/, c.name);
    assert.equal(readFileSync(precious, 'utf8'), kept, `${c.name}: the outside file is untouched`);
  }
});

/** A stage plugin: `create` is the body of its factory, returning its function over records. */
function stagePlugin(dir: string, name: string, create: string): string {
  const file = join(dir, `${name}.mjs`);
  writeFileSync(
    file,
    `export default { name: '${name}', kind: 'stage', kit: '>=0.0.0', options: {}, create: () => { ${create} } };
`,
  );
  const config = join(dir, `${name}.json`);
  const stages = [{ use: 'line-parser' }, { use: name }, { use: 'channel-router' }];
  const spec = { plugins: [file], stages, sinks: [{ use: 'files', out: join(dir, name) }] };
  writeFileSync(config, JSON.stringify(spec));
  return config;
}

/** Runs a config with the plugin `create` makes: it fails by its name, exit 1, no stack. */
function assertFailsByName(name: string, create: string): void {
  const config = stagePlugin(tmpDir(), name, create);
  const r = subtee(['-c', config, '-q', '--stdout', 'none']);
  assert.equal(r.error, undefined, `${name}: the run finished`);
  assert.equal(r.status, 1, `${name}: ${r.stderr}`);
  assert.match(r.stderr, /\[ERR_PLUGIN_FAILED\]\n$/, name);
  assert.ok(r.stderr.includes(name), `${name}: the failure names the plugin`);
  assert.doesNotMatch(r.stderr, /^\s+at /m, `${name}: no stack`);
}

test('a plugin whose function throws a string is named: ERR_PLUGIN_FAILED', () => {
  assertFailsByName('string-thrower', "return () => { throw 'a string'; };");
});

test('a plugin whose function throws or rejects with a ' +
  'falsy value fails at once, by name, not by a stall', () => {
  // pipeline() takes a falsy error for "no error": the kit names what the plugin threw.
  for (const [name, value] of [
    ['null-thrower', 'null'],
    ['undefined-thrower', 'undefined'],
    ['zero-thrower', '0'],
    ['empty-thrower', "''"],
  ]) {
    assertFailsByName(name, `return () => { throw ${value}; };`);
    assertFailsByName(`${name}-async`, `return async () => { throw ${value}; };`);
  }
});

test('a plugin whose factory throws is named: ERR_PLUGIN_FAILED', () => {
  assertFailsByName('factory-thrower', "throw new Error('no factory');");
});

test(
  'a pino log on a full device fails the run with ERR_WRITE, and index.json still says why',
  {
    skip: !existsSync('/dev/full') && 'no /dev/full here',
  },
  () => {
    const out = join(tmpDir(), 'out');
    const r = subtee(['--out', out, '-q', '--stdout', 'none', '--pino=/dev/full']);
    assert.equal(r.error, undefined, 'the run finished');
    assert.equal(r.status, 3, r.stderr);
    assert.match(r.stderr, /\[ERR_WRITE\]\n$/);
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    const failed = index.warnings.filter((w: { code: string }) => w.code === 'OUTPUT_FAILED');
    assert.equal(failed.length, 1, JSON.stringify(index.warnings));
    assert.match(failed[0].message, /\/dev\/full/);
  },
);

test(
  'stdout on a full device fails the run with ERR_WRITE (not exit 0), and index.json is written',
  {
    skip: !existsSync('/dev/full') && 'no /dev/full here',
  },
  () => {
    for (const mode of ['text', 'raw']) {
      const out = join(tmpDir(), 'out');
      const full = openSync('/dev/full', 'w');
      const r = spawnSync(process.execPath, [BIN, '--out', out, '-q', '--stdout', mode], {
        input: recording,
        stdio: ['pipe', full, 'pipe'],
        encoding: 'utf8',
        timeout: 30_000,
        killSignal: 'SIGKILL',
      });
      closeSync(full);
      assert.equal(r.error, undefined, `${mode}: the run finished`);
      assert.equal(r.status, 3, `${mode}: ${r.stderr}`);
      assert.match(r.stderr, /cannot write stdout: .*\[ERR_WRITE\]\n$/, mode);
      assert.ok(existsSync(join(out, 'index.json')), `${mode}: index.json`);
    }
  },
);

test(
  '--clickhouse-resend skips a FIFO or a link planted at a spool name: no hang, nothing read through',
  {
    skip: !clickhouseAvailable() && 'no clickhouse-server',
  },
  async () => {
    const server = await startClickHouse();
    try {
      const dir = tmpDir();
      const outside = join(tmpDir('subtee-victim-'), 'rows.jsonl');
      const row = { t: 'events', r: { run: 'planted', session: 's', line: 1, agent: 'outside' } };
      writeFileSync(outside, JSON.stringify(row) + '\n');
      for (const name of ['fifo', 'link']) mkdirSync(join(dir, name));
      execFileSync('mkfifo', [join(dir, 'fifo', 'clickhouse-spool.jsonl')]);
      symlinkSync(outside, join(dir, 'link', 'clickhouse-spool.jsonl'));
      const args = ['--out', join(dir, 'out'), '-q', '--stdout', 'none', '--clickhouse', server.url];
      const child = spawn(process.execPath, [BIN, ...args, '--clickhouse-resend', dir], { stdio: 'pipe' });
      let stderr = '';
      child.stderr.on('data', (chunk) => (stderr += chunk));
      child.stdin.end(recording);
      const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const [status] = await new Promise<[number | null]>((resolve) =>
        child.once('exit', (c) => resolve([c])),
      );
      clearTimeout(killer);
      assert.equal(status, 0, stderr);
      assert.ok(lstatSync(join(dir, 'fifo', 'clickhouse-spool.jsonl')).isFIFO(), 'the FIFO is left alone');
      assert.ok(lstatSync(join(dir, 'link', 'clickhouse-spool.jsonl')).isSymbolicLink(), 'the link too');
      const planted = await server.rows("SELECT count() AS n FROM subtee_events WHERE run = 'planted'");
      assert.equal(Number((planted[0] as { n: unknown }).n), 0, 'no row read through the link');
    } finally {
      await server.stop();
    }
  },
);

test('subtee report refuses an agents folder replaced by a link: no outside file shown, ERR_INPUT', () => {
  const out = join(tmpDir(), 'out');
  const r = subtee(['--out', out, '-q', '--stdout', 'none']);
  assert.equal(r.status, 0, r.stderr);
  // The same names outside, each holding a line the page would show.
  const outside = join(tmpDir('subtee-victim-'), 'agents');
  renameSync(join(out, 'agents'), outside);
  const planted = { type: 'assistant', parent_tool_use_id: null, message: { id: 'x', content: [] } };
  planted.message.content.push({ type: 'text', text: 'OUTSIDE-TEXT' } as never);
  for (const name of readdirSync(outside).filter((n) => n.endsWith('.jsonl')))
    writeFileSync(join(outside, name), JSON.stringify(planted) + '\n');
  symlinkSync(outside, join(out, 'agents'));
  const report = subtee(['report', out]);
  assert.equal(report.error, undefined, 'the report finished');
  assert.equal(report.status, 3, report.stderr);
  assert.match(report.stderr, /symbolic link.*\[ERR_INPUT\]\n$/);
  const page = join(out, 'report.html');
  assert.ok(!existsSync(page) || !readFileSync(page, 'utf8').includes('OUTSIDE-TEXT'), 'no outside text');
});

test('--prices: a FIFO with no writer fails at once (ERR_PRICES); one with a writer is read', async () => {
  const dir = tmpDir();
  const fifo = join(dir, 'prices.fifo');
  execFileSync('mkfifo', [fifo]);
  const alone = subtee(['--out', join(dir, 'alone'), '-q', '--stdout', 'none', '--prices', fifo]);
  assert.equal(alone.error, undefined, 'no writer: the run finished');
  assert.equal(alone.status, 2, alone.stderr);
  assert.match(alone.stderr, /\[ERR_PRICES\]\n$/);
  const prices = join(dir, 'prices.json');
  const table = { date: '2026-01-01', models: { 'probe-model': { input: 1, output: 2 } } };
  writeFileSync(prices, JSON.stringify(table));
  // The writer and subtee open the FIFO in either order.
  const writer = spawn('sh', ['-c', 'cat "$1" > "$2"', 'sh', prices, fifo], { stdio: 'ignore' });
  const out = join(dir, 'fed');
  const child = spawn(process.execPath, [BIN, '--out', out, '-q', '--stdout', 'none', '--prices', fifo]);
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  child.stdin.end(recording);
  const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const [status] = await new Promise<[number | null]>((resolve) => child.once('exit', (c) => resolve([c])));
  clearTimeout(killer);
  writer.kill();
  assert.equal(status, 0, stderr);
  assert.ok(existsSync(join(out, 'index.json')));
});

test('a huge session_id is not copied whole onto every ClickHouse row: the spool stays small', async () => {
  const session = 'S'.repeat(200_000);
  const lines = [{ type: 'system', subtype: 'init', session_id: session, claude_code_version: '2.1.328' }];
  for (let k = 0; k < 100; k++) {
    const message = { id: `m${k}`, content: [{ type: 'text', text: `t${k}` }] };
    lines.push({ type: 'assistant', parent_tool_use_id: null, message } as never);
  }
  const input = lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
  const out = join(tmpDir(), 'out');
  const url = `http://127.0.0.1:${await closedPort()}`;
  const r = subtee(['--out', out, '-q', '--stdout', 'none', '--clickhouse', url], input);
  assert.equal(r.status, 0, r.stderr);
  const spool = readFileSync(join(out, 'clickhouse-spool.jsonl'), 'utf8');
  assert.equal(spool.trim().split('\n').length >= 101, true, 'a row per line');
  assert.ok(spool.length < input.length, `spool ${spool.length} bytes for ${input.length} of input`);
});

test(
  '--pino to a FIFO whose reader stopped reading fails the run (ERR_WRITE) instead of blocking for ever',
  {
    skip: process.platform !== 'linux' && 'named pipe semantics of Linux',
  },
  async () => {
    const dir = tmpDir();
    const fifo = join(dir, 'log.fifo');
    execFileSync('mkfifo', [fifo]);
    // A reader that holds the pipe open and never reads.
    const reader = spawn('sh', ['-c', 'exec 3<>"$1"; echo open; exec sleep 300', 'sh', fifo]);
    await new Promise<void>((resolve) => reader.stdout.once('data', () => resolve()));
    const lines: string[] = [];
    for (let k = 0; k < 2000; k++) {
      const message = { id: `m${k}`, content: [{ type: 'text', text: 'x'.repeat(500) }] };
      lines.push(JSON.stringify({ type: 'assistant', parent_tool_use_id: null, message }));
    }
    const out = join(dir, 'out');
    try {
      const child = spawn(process.execPath, [BIN, '--out', out, '-q', '--stdout', 'none', `--pino=${fifo}`]);
      let stderr = '';
      child.stderr.on('data', (chunk) => (stderr += chunk));
      child.stdin.on('error', () => {});
      child.stdin.end(lines.join('\n') + '\n');
      const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      const [status] = await new Promise<[number | null]>((resolve) =>
        child.once('exit', (c) => resolve([c])),
      );
      clearTimeout(killer);
      assert.equal(status, 3, stderr);
      assert.match(stderr, /\[ERR_WRITE\]\n$/);
      assert.ok(existsSync(join(out, 'index.json')), 'index.json');
    } finally {
      reader.kill('SIGKILL');
    }
  },
);
