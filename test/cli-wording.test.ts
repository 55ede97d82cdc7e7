import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { systemReason } from '../src/errors.js';
import { ProducerDetector } from '../src/chain/stages/input-format.js';
import { OPTIONS, parseArgs } from '../src/cli/options.js';
import { BIN, FIXTURES, tmpDir } from './helpers/helpers.js';
import { readDoc } from './helpers/docs.js';

const RECORDING = join(FIXTURES, 'nested-depth-3.jsonl');

function subtee(args: string[], options: { input?: string; cwd?: string } = {}) {
  return spawnSync(process.execPath, [BIN, ...args], {
    input: options.input ?? '',
    cwd: options.cwd,
    encoding: 'utf8',
    timeout: 30_000,
  });
}

/** The row of docs/options.md's table for `--name`. */
function docsRow(name: string): string {
  const row = readDoc('docs/options.md')
    .split('\n')
    .find((l) => l.startsWith('| `') && l.split('|')[1].includes(`--${name}`));
  assert.ok(row, `docs/options.md has a row for --${name}`);
  return row;
}

const helpOf = (name: string) => OPTIONS.find((o) => o.name === name)!.help;

test('--help names the flags a flag is compared with, never the config keys they set', () => {
  assert.match(helpOf('tool-timeout-ms'), /the larger of this and --model-timeout-ms\b/);
  const keys = new Set(OPTIONS.filter((o) => o.target).map((o) => o.target!.key));
  for (const o of OPTIONS) {
    const words = o.help.match(/\b[a-z]+(?:[A-Z][a-z]*)+\b/g) ?? [];
    assert.deepEqual(
      words.filter((w) => keys.has(w)),
      [],
      `--${o.name}: ${o.help}`,
    );
  }
});

test("--force: --help and docs/options.md both say an earlier run's transcripts are removed, " +
  'and they are while other files stay', () => {
  assert.doesNotMatch(helpOf('force'), /same names/);
  const removed = /every transcript, index\.json and report\.html an earlier run wrote there is removed/;
  assert.match(helpOf('force'), removed);
  assert.match(docsRow('force'), /is removed first/);
  const out = join(tmpDir(), 'o');
  const wide = join(FIXTURES, 'background-fanout-12.jsonl');
  assert.equal(subtee(['-q', '--stdout', 'none', '--out', out, wide]).status, 0);
  writeFileSync(join(out, 'notes.txt'), 'mine\n');
  const r = subtee(['-q', '--stdout', 'none', '--force', '--out', out, RECORDING]);
  assert.equal(r.status, 0, r.stderr);
  const agents = readdirSync(join(out, 'agents')).filter((f) => f.endsWith('.jsonl'));
  assert.equal(agents.length, 3, 'only this run’s three subagents');
  assert.ok(existsSync(join(out, 'notes.txt')), 'a file no run wrote is kept');
});

test('--otlp env is what --otlp alone means, and both --help and docs/options.md say so', () => {
  assert.equal(parseArgs(['--otlp', 'env']).otlp, 'env');
  assert.equal(parseArgs(['--otlp']).otlp, 'env');
  assert.match(helpOf('otlp'), /"env", also when no URL is given: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT/);
  assert.doesNotMatch(helpOf('otlp'), /absent/);
  assert.match(docsRow('otlp'), /`--otlp` alone, or `--otlp env`, takes the endpoint from/);
  const r = subtee(['--otlp', 'recording.jsonl', '--out', join(tmpDir(), 'o')]);
  assert.equal(r.status, 2);
  const refused = 'subtee: --otlp must be an http or https URL, not "recording.jsonl" [ERR_BAD_OPTION]\n';
  assert.equal(r.stderr, refused);
});

test('a missing config or price file, a recording given to subtee report and a folder given to ' +
  '--pino are each said in words on one line with its code, never as a system code', () => {
  const dir = tmpDir();
  const out = ['--out', join(dir, 'o'), '-q', '--stdout', 'none'];
  const noConfig = 'cannot read config nope.json: no such file [ERR_CONFIG_READ]';
  const cases: Array<[string[], number, string]> = [
    [['-c', 'nope.json', ...out, RECORDING], 2, noConfig],
    [['--prices', 'nope.json', ...out, RECORDING], 2, 'prices nope.json: no such file [ERR_PRICES]'],
    [['report', RECORDING], 3, `cannot read ${RECORDING}: it is a file, not an output folder [ERR_INPUT]`],
    [
      ['report', join(RECORDING, 'run')],
      3,
      `cannot read ${join(RECORDING, 'run', 'index.json')}: a part of its path is a file, not a folder ` +
        '[ERR_INPUT]',
    ],
    [['--pino=.', ...out, RECORDING], 3, 'cannot write .: it is a folder, not a file [ERR_WRITE]'],
  ];
  for (const [args, status, line] of cases) {
    const r = subtee(args, { cwd: dir });
    assert.equal(r.status, status, r.stderr);
    assert.equal(r.stderr, `subtee: ${line}\n`, args.join(' '));
  }
});

test('systemReason: a system error in words (own words for a context first), else as the system ' +
  'describes it, else its code', () => {
  const sys = (code: string, message = `${code}: something else, open 'x'`) =>
    Object.assign(new Error(message), { code });
  assert.equal(systemReason(sys('EACCES')), 'permission denied');
  assert.equal(systemReason(sys('ENOTFOUND', 'getaddrinfo ENOTFOUND nohost.invalid')), 'no such host');
  assert.equal(systemReason(sys('EISDIR')), 'it is a folder, not a file');
  assert.equal(systemReason(sys('ELOOP'), { ELOOP: 'a link, not followed' }), 'a link, not followed');
  assert.equal(systemReason(sys('EXDEV', "EXDEV: cross-device link not permitted, rename 'a' -> 'b'")),
    'cross-device link not permitted');
  assert.equal(systemReason(sys('EWHAT', 'no description here')), 'EWHAT');
  assert.equal(systemReason('plain'), 'plain');
});

test('a damaged or cut-short gzip input is said once, as the error line; index.json records it ' +
  'as INPUT_CUT_SHORT', () => {
  const dir = tmpDir();
  const gz = gzipSync(readFileSync(RECORDING));
  const inputs = { cut: gz.subarray(0, 600), trailing: Buffer.concat([gz, Buffer.from('not gzip\n')]) };
  for (const [name, bytes] of Object.entries(inputs)) {
    const file = join(dir, `${name}.jsonl.gz`);
    writeFileSync(file, bytes);
    const out = join(dir, name);
    const r = subtee(['-q', '--stdout', 'none', '--out', out, file]);
    assert.equal(r.status, 3, r.stderr);
    const said = r.stderr.split('\n').filter((l) => l.includes('gzip data is damaged or cut short'));
    assert.equal(said.length, 1, r.stderr);
    assert.match(said[0], /^subtee: cannot read \S+: gzip data is damaged or cut short \(.+\) \[ERR_INPUT]$/);
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    const codes = index.warnings.map((w: { code: string }) => w.code);
    assert.ok(codes.includes('INPUT_CUT_SHORT'), codes.join());
  }
});

test('INPUT_FORMAT_MISMATCH tells who gave --input-format which format the line fits, and who ' +
  'did not to give one', () => {
  const out = join(tmpDir(), 'o');
  const r = subtee(['-q', '--stdout', 'none', '--out', out, '--input-format', 'codex', RECORDING]);
  const warning = r.stderr.split('\n').find((l) => l.includes('INPUT_FORMAT_MISMATCH'));
  assert.equal(
    warning,
    'subtee: warning INPUT_FORMAT_MISMATCH: line 1 looks like a claude event, not codex: it was read as ' +
      "codex, as --input-format codex says; if the input is claude's, pass --input-format claude or " +
      'leave the option out',
  );
  // Decided by auto (8 lines in a row), then a line of another producer.
  const detector = new ProducerDetector(null);
  const claude = { type: 'assistant', parent_tool_use_id: null, message: { id: 'm', content: [] } };
  for (let n = 1; n <= 8; n++) detector.observe(claude, n);
  const told = detector.observe({ type: 'thread.started', thread_id: 't' }, 9).warning;
  assert.equal(told?.code, 'INPUT_FORMAT_MISMATCH');
  const auto = 'line 9 looks like a codex event, not claude: it was read as claude; ' +
    'pass --input-format to choose';
  assert.equal(told!.message, auto);
});

test("--pino naming the run's input (by any name), or a file that holds something else than a " +
  'pino log, is refused before anything is read or written; a pino log is appended to', () => {
  const dir = tmpDir();
  const recording = join(dir, 'recording.jsonl');
  copyFileSync(RECORDING, recording);
  const before = readFileSync(recording);
  const other = readFileSync(join(FIXTURES, 'foreground-fanout-3.jsonl'), 'utf8');
  const out = join(dir, 'o');
  const fix = '; --pino alone goes after FILE, or write --pino=LOG [ERR_BAD_OPTION]\n';
  // `cat other | subtee --pino recording.jsonl`: the recording taken for the log's name.
  let r = subtee(['--out', out, '--pino', recording], { input: other });
  assert.equal(r.status, 2, r.stderr);
  assert.equal(
    r.stderr,
    `subtee: --pino ${recording} already holds something else than a pino log (a recording?): ` +
      `the log would be appended to it${fix}`,
  );
  // A pino log given as the input and, under another name, as the log.
  const log = join(dir, 'events.log');
  r = subtee(['-q', '--stdout', 'none', '--out', join(dir, 'first'), `--pino=${log}`, recording]);
  assert.equal(r.status, 0, r.stderr);
  const logLines = readFileSync(log, 'utf8').split('\n').length;
  const alias = `${dir}/./events.log`;
  r = subtee(['--out', out, `--pino=${alias}`, log]);
  assert.equal(r.status, 2, r.stderr);
  assert.equal(
    r.stderr,
    `subtee: --pino ${alias} is this run's input ${log}: the log would be appended to it${fix}`,
  );
  assert.deepEqual(readFileSync(recording), before, 'the recording is as it was');
  assert.equal(readFileSync(log, 'utf8').split('\n').length, logLines, 'the log is as it was');
  assert.ok(!existsSync(out), 'no output folder');
  // A pino log is what --pino appends to.
  r = subtee(['-q', '--stdout', 'none', '--out', join(dir, 'second'), `--pino=${log}`, recording]);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(readFileSync(log, 'utf8').split('\n').length, 2 * logLines - 1);
});
