import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { BIN, ROOT, tmpDir } from './helpers.js';

const recording = readFileSync(join(ROOT, 'test', 'fixtures', 'nested-depth-3.jsonl'));

/**
 * The real CLI, bounded: a run that blocks (on a named pipe) is killed after `timeout` and
 * shows up as `error`, so a hang fails the test instead of holding the suite.
 */
function subtee(args: string[], input: Buffer | string = recording) {
  return spawnSync(process.execPath, [BIN, ...args], {
    input,
    encoding: 'utf8',
    timeout: 30_000,
    killSignal: 'SIGKILL',
  });
}

/** A folder outside the output folder with one precious file. */
function victim() {
  const dir = tmpDir('subtee-victim-');
  writeFileSync(join(dir, 'precious'), 'precious\n');
  return { dir, file: join(dir, 'precious') };
}

/** An output folder written by a plain run, for `subtee report` to read. */
function writtenFolder(): string {
  const out = tmpDir();
  const r = subtee(['--out', out, '--force', '-q', '--stdout', 'none']);
  assert.equal(r.status, 0, r.stderr);
  return out;
}

function firstAgentJsonl(out: string): string {
  const name = readdirSync(join(out, 'agents')).find((n) => n.endsWith('.jsonl'));
  assert.ok(name, 'the recording has a subagent');
  return join(out, 'agents', name);
}

test('report.html.tmp: a planted link is replaced, never written through (--force --html and subtee report)', () => {
  const v = victim();
  const out = tmpDir();
  symlinkSync(v.file, join(out, 'report.html.tmp'));
  const run = subtee(['--out', out, '--force', '-q', '--stdout', 'none', '--html']);
  assert.equal(run.status, 0, run.stderr || String(run.error));
  assert.equal(readFileSync(v.file, 'utf8'), 'precious\n');
  assert.ok(lstatSync(join(out, 'report.html')).isFile());
  assert.equal(existsSync(join(out, 'report.html.tmp')), false);

  symlinkSync(v.file, join(out, 'report.html.tmp'));
  const report = subtee(['report', '-q', out]);
  assert.equal(report.status, 0, report.stderr || String(report.error));
  assert.equal(readFileSync(v.file, 'utf8'), 'precious\n');
  assert.deepEqual(readdirSync(v.dir), ['precious']);
  assert.match(readFileSync(join(out, 'report.html'), 'utf8'), /^<!doctype html>/i);
});

test('report.html.tmp: a planted FIFO does not block the report (--force --html and subtee report)', () => {
  const out = tmpDir();
  execFileSync('mkfifo', [join(out, 'report.html.tmp')]);
  const run = subtee(['--out', out, '--force', '-q', '--stdout', 'none', '--html']);
  assert.equal(run.error, undefined, 'the run finished');
  assert.equal(run.status, 0, run.stderr);
  assert.ok(lstatSync(join(out, 'report.html')).isFile());

  execFileSync('mkfifo', [join(out, 'report.html.tmp')]);
  const report = subtee(['report', '-q', out]);
  assert.equal(report.error, undefined, 'the report finished');
  assert.equal(report.status, 0, report.stderr);
  assert.ok(lstatSync(join(out, 'report.html')).isFile());
});

test('subtee report refuses a link planted at agents/*.jsonl: no outside file in the page, ERR_INPUT', () => {
  const out = writtenFolder();
  const secret = join(tmpDir('subtee-victim-'), 'secret.jsonl');
  const marker = 'outside-file-marker-7f3a';
  writeFileSync(secret, `${JSON.stringify({ type: 'user', message: { role: 'user', content: marker } })}\n`);
  const jsonl = firstAgentJsonl(out);
  execFileSync('rm', [jsonl]);
  symlinkSync(secret, jsonl);
  const r = subtee(['report', '-q', out]);
  assert.equal(r.status, 3, r.stderr || String(r.error));
  assert.match(r.stderr, /\[ERR_INPUT\]\n$/);
  assert.ok(!existsSync(join(out, 'report.html')) || !readFileSync(join(out, 'report.html'), 'utf8').includes(marker));
});

test('subtee report refuses a FIFO planted at agents/*.jsonl or index.json at once, ERR_INPUT', () => {
  for (const planted of ['agent', 'index']) {
    const out = writtenFolder();
    const path = planted === 'agent' ? firstAgentJsonl(out) : join(out, 'index.json');
    execFileSync('rm', [path]);
    execFileSync('mkfifo', [path]);
    const r = subtee(['report', '-q', out]);
    assert.equal(r.error, undefined, `${planted}: the report finished`);
    assert.equal(r.status, 3, r.stderr);
    assert.match(r.stderr, /\[ERR_INPUT\]\n$/);
  }
});

/** A loopback port nothing listens on: connections to it are refused at once. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

test('--force --clickhouse never appends spool rows through a link planted at clickhouse-spool.jsonl', async () => {
  const v = victim();
  const out = tmpDir();
  symlinkSync(v.file, join(out, 'clickhouse-spool.jsonl'));
  const url = `http://127.0.0.1:${await closedPort()}`;
  const r = subtee(['--out', out, '--force', '-q', '--stdout', 'none', '--clickhouse', url]);
  assert.equal(r.error, undefined, 'the run finished');
  assert.equal(r.status, 3, r.stderr);
  assert.match(r.stderr, /\[ERR_WRITE\]\n$/);
  assert.equal(readFileSync(v.file, 'utf8'), 'precious\n');
  assert.ok(lstatSync(join(out, 'clickhouse-spool.jsonl')).isSymbolicLink());
});

test('--force --clickhouse does not block on a FIFO planted at clickhouse-spool.jsonl', async () => {
  const out = tmpDir();
  execFileSync('mkfifo', [join(out, 'clickhouse-spool.jsonl')]);
  const url = `http://127.0.0.1:${await closedPort()}`;
  const r = subtee(['--out', out, '--force', '-q', '--stdout', 'none', '--clickhouse', url]);
  assert.equal(r.error, undefined, 'the run finished');
  assert.equal(r.status, 3, r.stderr);
  assert.match(r.stderr, /\[ERR_WRITE\]\n$/);
});
