import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  linkSync,
  lstatSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { shownUrl, withoutUrlSecrets } from '../src/shown-url.js';
import { BIN, boundedSubtee, closedPort, ROOT, tmpDir } from './helpers/helpers.js';

const recording = readFileSync(join(ROOT, 'test', 'fixtures', 'nested-depth-3.jsonl'));

function subtee(args: string[], input: Buffer | string = recording) {
  return boundedSubtee(args, input);
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

test('report.html.tmp: a planted link is replaced, never written through (--html, subtee report)', () => {
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
  const page = join(out, 'report.html');
  assert.ok(!existsSync(page) || !readFileSync(page, 'utf8').includes(marker));
});

test('subtee report refuses a hard link planted at a channel\'s .jsonl: no outside file in the page', () => {
  for (const planted of ['agent', 'main', 'every agent']) {
    const out = writtenFolder();
    const secret = join(tmpDir('subtee-victim-'), 'secret.jsonl');
    const marker = `outside-file-marker-${planted.replace(' ', '-')}`;
    writeFileSync(secret, `${JSON.stringify({ type: 'user', message: { role: 'user', content: marker } })}\n`);
    const agents = readdirSync(join(out, 'agents'))
      .filter((f) => f.endsWith('.jsonl'))
      .map((f) => join(out, 'agents', f));
    const paths =
      planted === 'main' ? [join(out, 'main.jsonl')] : planted === 'agent' ? [firstAgentJsonl(out)] : agents;
    for (const path of paths) {
      execFileSync('rm', [path]);
      linkSync(secret, path);
    }
    const r = subtee(['report', '-q', out]);
    assert.equal(r.status, 3, `${planted}: ${r.stderr || String(r.error)}`);
    assert.match(r.stderr, /it is a hard link .*\[ERR_INPUT\]\n$/, planted);
    const page = join(out, 'report.html');
    assert.ok(!existsSync(page) || !readFileSync(page, 'utf8').includes(marker), planted);
  }
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

test('--force --clickhouse never appends rows through a link planted at clickhouse-spool.jsonl', async () => {
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

const SECRETS = ['s3cretpw', 't0kenvalue'];

function assertNoSecret(where: string, text: string): void {
  for (const s of SECRETS) assert.ok(!text.includes(s), `${where} shows ${s}`);
}

/** Every file under `dir`, for a look for secrets. */
function everyFileText(dir: string): Map<string, string> {
  const texts = new Map<string, string>();
  for (const name of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    const path = join(dir, name);
    if (lstatSync(path).isFile()) texts.set(name, readFileSync(path, 'utf8'));
  }
  return texts;
}

test('OTLP credentials (user:password@, ?token=) from a config or the environment are redacted', async () => {
  const port = await closedPort();
  const secretUrl = `http://us3r:s3cretpw@127.0.0.1:${port}/v1/traces?token=t0kenvalue`;
  for (const from of ['config', 'env'] as const) {
    const dir = tmpDir();
    const out = join(dir, 'o');
    const config = {
      stages: [{ use: 'line-parser' }, { use: 'channel-router' }],
      sinks: [
        { use: 'files', out },
        { use: 'otlp', ...(from === 'config' ? { url: secretUrl } : {}), retryMs: 100, flushTimeoutMs: 300 },
        { use: 'pino', destination: join(out, 'events.pino.log') },
        { use: 'report', out, html: true },
      ],
    };
    writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://us3r:s3cretpw@127.0.0.1:${port}?token=t0kenvalue`,
    };
    if (from === 'config') delete env.OTEL_EXPORTER_OTLP_ENDPOINT;
    delete env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
    const args = [BIN, '--config', join(dir, 'config.json'), '-q', '--stdout', 'none'];
    const r = spawnSync(process.execPath, args, {
      input: recording,
      encoding: 'utf8',
      env,
      timeout: 30_000,
      killSignal: 'SIGKILL',
    });
    assert.equal(r.status, 0, `${from}: ${r.stderr || String(r.error)}`);
    assert.match(r.stderr, /OTLP_UNDELIVERED/, from);
    assertNoSecret(`${from}: stderr`, r.stderr);
    const texts = everyFileText(out);
    const pinoLog = texts.get('events.pino.log') ?? '';
    assert.match(pinoLog, /OTLP_UNDELIVERED/, `${from}: the pino log has the warning`);
    for (const [name, text] of texts) assertNoSecret(`${from}: ${name}`, text);
  }
  const badUrl = 'http://us3r:s3cretpw@ho st/?token=t0kenvalue';
  const bad = subtee(['--out', join(tmpDir(), 'o'), '-q', `--otlp=${badUrl}`]);
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, /\[ERR_BAD_OPTION\]\n$/);
  assertNoSecret('a bad --otlp URL', bad.stderr);
});

test('a ClickHouse URL with ?password=, or one that does not parse, is shown redacted', async () => {
  const badUrl = 'http://us3r:s3cretpw@ho st:8123/?password=t0kenvalue';
  const bad = subtee(['--out', join(tmpDir(), 'o'), '-q', '--clickhouse', badUrl]);
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, /\[ERR_BAD_OPTION\]\n$/);
  assertNoSecret('a bad --clickhouse URL', bad.stderr);

  // The client refuses a query it does not know, and says so: the refusal names no value.
  const url = `http://us3r:s3cretpw@127.0.0.1:${await closedPort()}/?password=t0kenvalue`;
  const refused = subtee(['--out', join(tmpDir(), 'o'), '-q', '--stdout', 'none', '--clickhouse', url]);
  assert.equal(refused.status, 2, refused.stderr || String(refused.error));
  assert.match(refused.stderr, /\[ERR_BAD_OPTION\]\n$/);
  assertNoSecret('a refused --clickhouse URL', refused.stderr);
});

test('shownUrl redacts the user part, the query and path parameters of any URL, parsed or not', () => {
  const cases: Array<[string, string]> = [
    ['http://u:s3cretpw@h:8123/db?password=t0kenvalue#frag', 'http://***@h:8123/db?***'],
    ['https://h/v1/traces?token=t0kenvalue&x=1', 'https://h/v1/traces?***'],
    ['http://h:4318/v1/traces', 'http://h:4318/v1/traces'],
    ['us3r:s3cretpw@host:8123', '***@host:8123'],
    ['http://u:s3cretpw@ho st/?password=t0kenvalue', 'http://***@ho st/?***'],
    ['not a url', 'not a url'],
    ['https://h/v1/traces;token=t0kenvalue', 'https://h/v1/traces;***'],
    ['https://h/a;s3cretpw/b;k=t0kenvalue;x=1?q=1', 'https://h/a;***/b;***?***'],
    ['u:s3cretpw@h st/v1;token=t0kenvalue', '***@h st/v1;***'],
    ['us3r:s3cretpw;x@h st/v1;token=t0kenvalue', '***@h st/v1;***'],
    ['http://us3r:s3cretpw;x@h st/', 'http://***@h st/'],
  ];
  for (const [url, shown] of cases) assert.equal(shownUrl(url), shown, url);
  assert.ok(shownUrl(`http://h/${'a'.repeat(5000)}`).length < 400);
  const quoted = 'http://u:s3cretpw@h/?token=t0kenvalue';
  const message = withoutUrlSecrets(`connect failed: ${quoted}`, quoted);
  assertNoSecret('a library message', message);
  const inPath = 'https://h/v1/traces;token=t0kenvalue';
  assertNoSecret('a library message quoting a path parameter', withoutUrlSecrets(`bad: ${inPath}`, inPath));
});

test('a config key named like an Object member (__proto__, constructor) is an unknown option', () => {
  for (const key of ['__proto__', 'constructor', 'toString']) {
    const dir = tmpDir();
    const config = `{"sinks":[{"use":"files","out":${JSON.stringify(join(dir, 'o'))},"${key}":1}]}`;
    writeFileSync(join(dir, 'config.json'), config);
    const r = subtee(['--config', join(dir, 'config.json'), '-q'], '');
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /\[ERR_CONFIG\]\n$/);
    assert.match(r.stderr, new RegExp(`sinks\\[0\\]\\.${key}: unknown option`), key);
    assert.doesNotMatch(r.stderr, /undefined/, key);
  }
});

test('--serve on 0.0.0.0 warns SERVE_EXPOSED (stderr and index.json); on loopback it does not', () => {
  const hosts = [
    ['0.0.0.0', true],
    ['127.0.0.1', false],
    ['127.1', false],
    ['[::ffff:127.0.0.1]', false],
  ] as const;
  for (const [host, exposed] of hosts) {
    const out = join(tmpDir(), 'o');
    const r = subtee(['--out', out, '-q', '--stdout', 'none', '--serve', `${host}:0`]);
    assert.equal(r.status, 0, r.stderr || String(r.error));
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')) as {
      warnings?: Array<{ code: string }>;
    };
    const codes = (index.warnings ?? []).map((w) => w.code);
    assert.equal(codes.includes('SERVE_EXPOSED'), exposed, `${host}: ${codes.join(', ')}`);
    assert.equal(/SERVE_EXPOSED/.test(r.stderr), exposed, `${host}: ${r.stderr}`);
  }
});

test('a later --force run removes the .subtee-spool-* a killed run left in OUT, and only that', () => {
  const out = writtenFolder();
  const gone = spawnSync(process.execPath, ['-e', '']).pid;
  assert.ok(gone > 0);
  const leftover = join(out, `.subtee-spool-${gone}-7-0123456789ab`);
  const live = join(out, `.subtee-spool-${process.pid}-7-0123456789ab`);
  const lookalike = join(out, `.subtee-spool-${gone}-notes`);
  for (const path of [leftover, live, lookalike]) writeFileSync(path, '{"a":');
  const r = subtee(['--out', out, '--force', '-q', '--stdout', 'none']);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(existsSync(leftover), false, 'the dead run’s spool is removed');
  assert.equal(existsSync(live), true, 'a live process’s spool is kept');
  assert.equal(existsSync(lookalike), true, 'a name subtee does not make is kept');
});
