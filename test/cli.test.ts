import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import * as zlib from 'node:zlib';
import { OPTIONS, helpText, parseArgs } from '../src/cli/options.js';
import { writeStream } from '../bench/gen.js';
import {
  BIN,
  FIXTURES,
  ROOT,
  checkOutput,
  cliModules,
  fanoutInput,
  linesOf,
  readTree,
  stuckReader,
  tmpDir,
} from './helpers/helpers.js';
import { allDocs, codeBlocks, readDoc } from './helpers/docs.js';

function subtee(args: string[], input?: string | Buffer, env: NodeJS.ProcessEnv = process.env) {
  return spawnSync(process.execPath, [BIN, ...args], { input, encoding: 'utf8', timeout: 30_000, env });
}

const helps = new Map<string, ReturnType<typeof subtee>>();
/** A help command's result, run once per file: the same command without input prints the same. */
function helpOf(args: string[]) {
  const key = args.join('\0');
  if (!helps.has(key)) helps.set(key, subtee(args));
  return helps.get(key)!;
}

const stream =
  [
    { type: 'system', subtype: 'init', session_id: 's', claude_code_version: '2.1.328' },
    {
      type: 'assistant',
      parent_tool_use_id: null,
      message: {
        id: 'm1',
        content: [
          { type: 'text', text: 'main says hi' },
          {
            type: 'tool_use',
            id: 'toolu_sub1',
            name: 'Agent',
            input: { subagent_type: 'Explore', description: 'd' },
          },
        ],
      },
    },
    {
      type: 'assistant',
      parent_tool_use_id: 'toolu_sub1',
      message: { id: 'm2', content: [{ type: 'text', text: 'sub says \x1b[31mhi\x1b[0m' }] },
    },
    {
      type: 'user',
      parent_tool_use_id: null,
      message: { content: [{ type: 'tool_result', tool_use_id: 'toolu_sub1', content: 'ok' }] },
    },
    { type: 'result', subtype: 'success', is_error: false, result: 'done' },
  ]
    .map((l) => JSON.stringify(l))
    .join('\n') + '\nnot json\n';

test('--help lists every option of the table; --version prints the package version', () => {
  const help = helpOf(['--help']);
  assert.equal(help.status, 0);
  const oneLine = help.stdout.replace(/\n\s+/g, ' ');
  for (const o of OPTIONS) assert.ok(help.stdout.includes(`--${o.name}`), o.name);
  for (const o of OPTIONS) assert.ok(oneLine.includes(o.help), `help text of ${o.name}`);
  assert.ok(help.stdout.includes(helpText('').slice(1)));
  const v = subtee(['--version']);
  assert.equal(v.status, 0);
  assert.equal(
    v.stdout.trim(),
    `subtee ${JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version}`,
  );
});

for (const [args, code] of [
  [['--bogus'], 'ERR_UNKNOWN_OPTION'],
  [['--stdout', 'loud'], 'ERR_BAD_OPTION'],
  [['--max-open-files', '2'], 'ERR_BAD_OPTION'],
  [['--max-line-bytes', 'lots'], 'ERR_BAD_OPTION'],
  // A negative number is a bad value, not the unknown option `-1`.
  [['--thinking-max-chars', '-1'], 'ERR_BAD_OPTION'],
  [['--out'], 'ERR_BAD_OPTION'],
  [['-', '-'], 'ERR_USAGE'],
] as const) {
  test(`bad usage ${args.join(' ')} → one line, exit 2, ${code}`, () => {
    const r = subtee([...args], '');
    assert.equal(r.status, 2);
    assert.equal(r.stderr.split('\n').filter(Boolean).length, 1, r.stderr);
    assert.ok(r.stderr.includes(`[${code}]`), r.stderr);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  });
}

test('under a descriptor limit too low to load subtee: one line with its code, exit 3, no stack', () => {
  const out = join(tmpDir(), 'o');
  const input = join(FIXTURES, 'nested-depth-3.jsonl');
  const r = spawnSync(
    'bash',
    ['-c', `ulimit -n 40 && exec "${process.execPath}" "${BIN}" --out "${out}" "${input}"`],
    { encoding: 'utf8', timeout: 30_000 },
  );
  assert.equal(r.status, 3, r.stderr);
  assert.equal(
    r.stderr,
    'subtee: too many open files to load subtee (ulimit -n is too low); raise the limit, ' +
      'e.g. ulimit -n 1024 [ERR_FILE_LIMIT]\n',
  );
});

test('a flag that takes no value is on, off by --no-FLAG or =false, on by =true; any other value is ' +
  'refused, as a flag and as its alias', () => {
  assert.equal(parseArgs(['--force']).force, true);
  assert.equal(parseArgs(['--no-force']).force, false);
  assert.equal(parseArgs(['--force=false']).force, false);
  assert.equal(parseArgs(['--force=true']).force, true);
  assert.equal(parseArgs(['-q=false']).quiet, false);
  const refused = ['--force=no', '--force=0', '--force=', '--force=yes', '--html=no', '-q=1', '--quiet=off'];
  const bad = { code: 'ERR_BAD_OPTION', message: / takes no value .*, not "/ };
  for (const arg of refused) assert.throws(() => parseArgs([arg]), bad, arg);
  // After -- the arguments are the command's.
  assert.deepEqual(parseArgs(['--', 'cmd', '--force=no']).rest, ['cmd', '--force=no']);
});

test('--force=no does not replace a folder and --html=no writes no report: exit 2, one line', () => {
  const dir = tmpDir();
  const input = join(FIXTURES, 'nested-depth-3.jsonl');
  const out = join(dir, 'o');
  assert.equal(subtee(['--out', out, '-q', '--stdout', 'none', input]).status, 0);
  const before = readFileSync(join(out, 'index.json'), 'utf8');
  for (const flag of ['--force=no', '--force=0', '--force=']) {
    const r = subtee(['--out', out, '-q', '--stdout', 'none', flag, input]);
    assert.equal(r.status, 2, `${flag}: ${r.stderr}`);
    assert.equal(r.stderr, `subtee: --force takes no value (--force, --no-force, --force=true or ` +
      `--force=false), not "${flag.slice('--force='.length)}" [ERR_BAD_OPTION]\n`);
  }
  assert.equal(readFileSync(join(out, 'index.json'), 'utf8'), before, 'the folder was left alone');
  assert.equal(subtee(['--out', out, '-q', '--stdout', 'none', '--force=false', input]).status, 3);
  const html = subtee(['--out', join(dir, 'h'), '-q', '--stdout', 'none', '--html=no', input]);
  assert.equal(html.status, 2, html.stderr);
  assert.equal(existsSync(join(dir, 'h')), false);
});

test('parseArgs throws typed errors', () => {
  assert.throws(() => parseArgs(['--nope']), { code: 'ERR_UNKNOWN_OPTION' });
  assert.equal(parseArgs(['-o', 'x']).out, 'x');
  assert.equal(parseArgs(['-o', '-1']).out, '-1');
  // After `--` everything is the command's, negative numbers too.
  assert.deepEqual(parseArgs(['-o', 'x', '--', 'cmd', '--top', '-1']).rest, ['cmd', '--top', '-1']);
  assert.equal(
    parseArgs([])['max-open-files'],
    undefined,
    'left to the files sink, whose default fits the descriptor limit',
  );
});

test('a sink URL that is not an http one: exit 2, one line without its secrets, nothing written', () => {
  const dir = tmpDir();
  const file = join(dir, 'in.jsonl');
  writeFileSync(file, stream);
  for (const flag of ['--otlp=http://[::1:9', '--clickhouse=not a url', '--clickhouse=ftp://u:secret@host']) {
    const out = join(dir, `o${flag.length}`);
    const r = subtee(['--out', out, '-q', flag, file], '');
    assert.equal(r.status, 2, r.stderr);
    assert.equal(r.stderr.split('\n').filter(Boolean).length, 1, r.stderr);
    assert.match(r.stderr, /must be an http or https URL, not ".*" \[ERR_BAD_OPTION\]\n$/);
    assert.doesNotMatch(r.stderr, /secret/);
    assert.equal(existsSync(out), false, `${flag}: ${out} was made`);
  }
  // The same when the endpoint comes from the environment, checked before the files sink makes the folder.
  for (const [variable, value] of [
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'http://u:secret@[::1:9'],
    ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'ftp://u:secret@host/v1/traces'],
  ]) {
    const out = join(dir, variable);
    const r = subtee(['--out', out, '-q', file, '--otlp'], '', { ...process.env, [variable]: value });
    assert.equal(r.status, 2, r.stderr);
    assert.equal(r.stderr.split('\n').filter(Boolean).length, 1, r.stderr);
    const problem = new RegExp(
      `otlp: ${variable} must be an http or https URL, not ".*" \\[ERR_BAD_OPTION\\]\n$`,
    );
    assert.match(r.stderr, problem);
    assert.doesNotMatch(r.stderr, /secret/);
    assert.equal(existsSync(out), false, `${variable}: ${out} was made`);
  }
});

test('unusable input or output: exit 3 with one line', () => {
  const dir = tmpDir();
  writeFileSync(join(dir, 'file'), 'x');
  for (const args of [
    ['--out', join(dir, 'file')],
    ['--out', dir],
    ['--out', join(dir, 'new'), join(dir, 'missing.jsonl')],
  ]) {
    const r = subtee(args, '');
    assert.equal(r.status, 3, r.stderr);
    assert.equal(r.stderr.split('\n').filter(Boolean).length, 1, r.stderr);
  }
});

test('stdin to files: text on stdout with labels, escaped; summary on stderr', () => {
  const out = join(tmpDir(), 'o');
  const r = subtee(['--out', out], stream);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(
    r.stdout,
    'main says hi\n[d] sub says \\x1b[31mhi\\x1b[0m\n[d] [status] completed — ok\n',
  );
  assert.match(r.stderr, /1 subagent \(1 completed, 0 failed, 0 running\), 6 lines, 1 quarantined/);
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
  const big =
    Array.from({ length: 20_000 }, (_, i) =>
      JSON.stringify({
        type: 'assistant',
        parent_tool_use_id: null,
        message: { id: `m${i}`, content: [{ type: 'text', text: `line ${i} ${'x'.repeat(100)}` }] },
      }),
    ).join('\n') + '\n';
  const child = spawn(
    'bash',
    [
      '-c',
      `"${process.execPath}" "${BIN}" --out "${out}" --stdout raw | head -1 > /dev/null; ` +
        'exit ${PIPESTATUS[0]}',
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
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

/** Lines of every `.jsonl` file and of the quarantine in an output folder: where input lines land. */
function linesFiled(out: string): number {
  let n = 0;
  for (const [name, bytes] of readTree(out))
    if (name.endsWith('.jsonl') || name === 'quarantine.log') n += linesOf(bytes).length;
  return n;
}

test('SIGHUP (the terminal closed) mid-stream: what arrived is on disk, index.json says interrupted, ' +
  'exit 129 with one ERR_INTERRUPTED line', async () => {
  const out = join(tmpDir(), 'o');
  const child = spawn(process.execPath, [BIN, '--out', out, '--stdout', 'none'], {
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const closed = new Promise<number | null>((r) => child.on('close', r));
  const lines = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'), 'utf8').split('\n').slice(0, 10);
  child.stdin.write(lines.join('\n') + '\n');
  // Ready when every line is on disk; the input stays open, as a live agent's does.
  for (const t0 = Date.now(); !existsSync(out) || linesFiled(out) < 10; ) {
    assert.ok(Date.now() - t0 < 30_000, 'the first lines on disk');
    await new Promise((r) => setTimeout(r, 20));
  }
  child.kill('SIGHUP');
  assert.equal(await closed, 129, stderr);
  assert.match(
    stderr,
    /^subtee: interrupted by SIGHUP; index\.json marks what was still running \[ERR_INTERRUPTED\]$/m,
  );
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.interrupted, true);
  assert.equal(index.input.lines, 10);
  child.stdin.destroy();
});

test('SIGINT while the stdout reader takes nothing (| less left open): stdout is let go, the ' +
  'files and index.json are completed, exit 130 without waiting for the reader', async () => {
  const dir = tmpDir();
  const input = join(dir, 'fan-out.jsonl');
  // Text far beyond what a pipe holds, so stdout stays stuck.
  writeFileSync(input, fanoutInput(20, 60_000));
  const out = join(dir, 'o');
  const reader = stuckReader(dir);
  const child = spawn(process.execPath, [BIN, '--out', out, input], { stdio: ['ignore', reader.fd, 'pipe'] });
  closeSync(reader.fd);
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const closed = new Promise<number | null>((r) => child.on('close', r));
  await reader.firstBytes;
  child.kill('SIGINT');
  const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 20_000).unref());
  const result = await Promise.race([closed, timeout]);
  if (result === 'timeout') child.kill('SIGKILL');
  assert.equal(result, 130, stderr);
  assert.match(stderr, /interrupted by SIGINT/);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.interrupted, true);
  assert.ok(index.input.lines > 0 && index.input.lines < 60_020, String(index.input.lines));
  assert.equal(linesFiled(out), index.input.lines, 'every line read is in the folder');
  reader.close();
});

test('a stdout reader that takes nothing does not hold back index.json: it is written once every ' +
  'line is filed, while stdout still waits', async () => {
  const dir = tmpDir();
  const input = join(dir, 'long-last-text.jsonl');
  const lines = linesOf(readFileSync(join(FIXTURES, 'nested-depth-3.jsonl')));
  // Main's last text far beyond what a pipe holds, just before the result: stdout is stuck on it.
  const text = { type: 'assistant', parent_tool_use_id: null, session_id: 's',
    message: { id: 'msg_long', role: 'assistant', content: [{ type: 'text', text: 'x'.repeat(300_000) }] } };
  writeFileSync(input, [...lines.slice(0, -1), JSON.stringify(text), lines.at(-1)].join('\n') + '\n');
  const out = join(dir, 'o');
  const reader = stuckReader(dir);
  const child = spawn(process.execPath, [BIN, '--out', out, input], { stdio: ['ignore', reader.fd, 'pipe'] });
  closeSync(reader.fd);
  const closed = new Promise((r) => child.on('close', r));
  const deadline = Date.now() + 20_000;
  while (!existsSync(join(out, 'index.json')) && Date.now() < deadline && child.exitCode === null)
    await new Promise((r) => setTimeout(r, 20));
  const running = child.exitCode === null && child.signalCode === null;
  child.kill('SIGKILL');
  await closed;
  reader.close();
  assert.ok(existsSync(join(out, 'index.json')), 'index.json written');
  assert.ok(running, 'written while subtee still waited for stdout');
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.input.lines, lines.length + 1);
  assert.equal(index.interrupted, false);
});

test('the documentation names every option (and none the command line lacks), ' +
  'warning code and error code', async () => {
  const options = readDoc('docs/options.md');
  const readme = allDocs();
  for (const o of OPTIONS) assert.ok(options.includes(`--${o.name}`), `--${o.name}`);
  // The options table says each flag's default as --help does (both read the option specs).
  const rows = options.split('\n').filter((l) => l.startsWith('| `'));
  for (const o of OPTIONS) {
    if (o.type === 'boolean' || o.default === undefined) continue;
    const row = rows.find((l) => l.includes(`--${o.name}`));
    const shown = row?.split('|')[2] ?? '';
    assert.ok(shown.includes(String(o.default)), `docs/options.md default of --${o.name}: ${o.default}`);
  }
  // ...and names no option the command line does not have.
  const names = new Set(OPTIONS.map((o) => o.name));
  for (const row of rows.filter((l) => l.startsWith('| `-'))) {
    const flag = /--([a-z0-9-]+)/.exec(row.split('|')[1])?.[1];
    assert.ok(flag !== undefined && names.has(flag), `docs/options.md documents ${row.split('|')[1].trim()}`);
  }
  const warningSources = [
    'src/chain/stages/line-parser.ts',
    'src/chain/stages/version-guard.ts',
    'src/chain/stages/idle-watchdog.ts',
    'src/chain/stages/channel-router.ts',
    'src/model/session.ts',
    'src/cli/main.ts',
    'src/cli/run-command.ts',
    'src/cli/inputs.ts',
  ];
  const sources = warningSources.map((f) => readFileSync(join(ROOT, f), 'utf8')).join('\n');
  // Environment variables the watchdog reads are not warning codes.
  const envNames = new Set([...sources.matchAll(/envMs\(env, '([A-Z_]+)'\)/g)].map((m) => m[1]));
  const codes = [...sources.matchAll(/'([A-Z]+(?:_[A-Z]+)+)'/g)].map((m) => m[1]);
  const warnings = new Set(codes.filter((c) => !c.startsWith('ERR_') && !envNames.has(c)));
  assert.ok(warnings.size >= 10);
  for (const c of warnings) assert.ok(readme.includes(`\`${c}\``), c);
  const all = readdirSync(join(ROOT, 'src'), { recursive: true })
    .filter((f) => String(f).endsWith('.ts'))
    .map((f) => readFileSync(join(ROOT, 'src', String(f)), 'utf8'))
    .join('\n');
  const errors = new Set([...all.matchAll(/(?:Error\(|super\()\s*'(ERR_[A-Z_]+)'/g)].map((x) => x[1]));
  assert.ok(errors.size >= 14);
  for (const m of errors) assert.ok(readme.includes(`\`${m}\``), m);
});

/** A recording large enough that a reader closing after one line closes while subtee still writes. */
function bigInput(): string {
  const file = join(tmpDir(), 'big.jsonl');
  const lines = Array.from({ length: 20_000 }, (_, i) =>
    JSON.stringify({
      type: 'assistant',
      parent_tool_use_id: null,
      timestamp: '2026-01-01T00:00:00.000Z',
      message: { id: `m${i}`, content: [{ type: 'text', text: `line ${i} ${'x'.repeat(100)}` }] },
    }),
  );
  writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

/** Runs subtee in a shell pipeline and returns subtee's own exit status (PIPESTATUS[0]). */
function inPipeline(pipeline: string) {
  return spawnSync('bash', ['-c', `${pipeline}; exit \${PIPESTATUS[0]}`], {
    encoding: 'utf8',
    timeout: 60_000,
  });
}

test('--pino - into | head -1: the closed reader ends the pino output only; files complete, exit 0', () => {
  const input = bigInput();
  const out = join(tmpDir(), 'o');
  const r = inPipeline(
    `"${process.execPath}" "${BIN}" --out "${out}" --stdout none --pino - "${input}" | head -1 > /dev/null`,
  );
  assert.equal(r.status, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /EPIPE|ERR_|error/i);
  const files = readTree(out);
  assert.equal(linesOf(files.get('main.jsonl')).length, 20_000);
  assert.equal(JSON.parse(files.get('index.json')!.toString()).input.lines, 20_000);
});

test('2>&1 | head -1: closed stdout and stderr end those outputs only; files complete, exit 0', () => {
  const input = bigInput();
  for (const extra of [[], ['--stdout', 'none', '--pino', '-']]) {
    const out = join(tmpDir(), 'o');
    // The summary (and any warning) is written to stderr after the reader has gone.
    const r = inPipeline(
      `"${process.execPath}" "${BIN}" --out "${out}" ${extra.join(' ')} "${input}" ` +
        '2>&1 | head -1 > /dev/null',
    );
    assert.equal(r.status, 0, `${extra.join(' ')}: ${r.stderr}`);
    const files = readTree(out);
    assert.equal(linesOf(files.get('main.jsonl')).length, 20_000);
    assert.equal(JSON.parse(files.get('index.json')!.toString()).input.lines, 20_000);
  }
});

test('a folder as input: exit 3 with ERR_INPUT, and no output folder is left behind', () => {
  const dir = tmpDir();
  const out = join(dir, 'o');
  mkdirSync(join(dir, 'in'));
  for (const args of [[join(dir, 'in')], [join(FIXTURES, 'nested-depth-3.jsonl'), join(dir, 'in')]]) {
    const r = subtee(['--out', out, ...args], '');
    assert.equal(r.status, 3, r.stderr);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, /in: it is a folder, not a file \[ERR_INPUT\]/);
    assert.equal(existsSync(out), false, 'no output folder');
  }
  const onStdin = spawnSync(
    'bash',
    ['-c', `"${process.execPath}" "${BIN}" --out "${out}" < "${join(dir, 'in')}"`],
    { encoding: 'utf8' },
  );
  assert.equal(onStdin.status, 3, onStdin.stderr);
  assert.match(onStdin.stderr, /^subtee: cannot read stdin: it is a folder, not a file \[ERR_INPUT\]\n$/);
  assert.equal(existsSync(out), false, 'no output folder');
});

test('gzip input is read by its magic bytes, from a file or stdin, several members too', () => {
  const recording = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'));
  const gz = zlib.gzipSync(recording);
  const dir = tmpDir();
  const named = join(dir, 'rec.jsonl'); // the name does not say gzip: the bytes do
  writeFileSync(named, gz);
  const fromFile = join(dir, 'a');
  assert.equal(subtee(['--out', fromFile, '-q', '--stdout', 'none', named]).status, 0);
  checkOutput(recording, fromFile, 'gzip file');
  const fromStdin = join(dir, 'b');
  const r = subtee(['--out', fromStdin, '-q', '--stdout', 'raw'], Buffer.concat([gz, gz]));
  assert.equal(r.status, 0, r.stderr);
  assert.equal(
    r.stdout,
    Buffer.concat([recording, recording]).toString(),
    '--stdout raw passes the decompressed stream on',
  );
  checkOutput(Buffer.concat([recording, recording]), fromStdin, 'two gzip members on stdin');
  // One byte at a time: the magic bytes arrive split.
  const slow = spawnSync(
    'bash',
    [
      '-c',
      `for b in $(od -An -v -tx1 "${named}"); do printf "\\\\x$b"; done | ` +
        `"${process.execPath}" "${BIN}" --out "${join(dir, 'c')}" -q --stdout none`,
    ],
    { encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(slow.status, 0, slow.stderr);
  checkOutput(recording, join(dir, 'c'), 'gzip in one-byte writes');
});

test('damaged gzip is exit 3 (ERR_INPUT); zstd read where Node.js can, else refused with a hint', () => {
  const recording = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'));
  const gz = zlib.gzipSync(recording);
  const cut = subtee(
    ['--out', join(tmpDir(), 'o'), '-q', '--stdout', 'none'],
    gz.subarray(0, gz.length - 20),
  );
  assert.equal(cut.status, 3, cut.stderr);
  // Said once, as the error (index.json records it as the INPUT_CUT_SHORT warning).
  const cutLines = /^subtee: cannot read stdin: gzip data is damaged or cut short .*\[ERR_INPUT\]\n$/;
  assert.match(cut.stderr, cutLines);
  const z = zlib as unknown as { zstdCompressSync?: (b: Buffer) => Buffer };
  const zstdFile = join(tmpDir(), 'rec.jsonl.zst');
  const out = join(tmpDir(), 'o');
  if (typeof z.zstdCompressSync === 'function') {
    writeFileSync(zstdFile, z.zstdCompressSync(recording));
    assert.equal(subtee(['--out', out, '-q', '--stdout', 'none', zstdFile]).status, 0);
    checkOutput(recording, out, 'zstd');
  } else {
    writeFileSync(zstdFile, Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), recording]));
    const r = subtee(['--out', out, '-q', zstdFile]);
    assert.equal(r.status, 3, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(
        String.raw`rec\.jsonl\.zst: it is zstd-compressed and Node\.js v\d+\S* has no zstd decompressor ` +
          String.raw`.*zstd -dc FILE \| subtee … \[ERR_INPUT\]`,
      ),
    );
    assert.equal(existsSync(out), false, 'refused before the output folder is made');
  }
  const xz = subtee(
    ['--out', join(tmpDir(), 'o'), '-q'],
    Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 1, 2, 3]),
  );
  assert.equal(xz.status, 3);
  assert.match(xz.stderr, /it is xz-compressed; decompress it first: xz -dc FILE \| subtee … \[ERR_INPUT]/);
});

test('several inputs: one output folder each, OUT/<name>/, all checked before any is written', () => {
  const dir = tmpDir();
  const a = join(FIXTURES, 'nested-depth-3.jsonl');
  const b = join(FIXTURES, 'failing-beside-healthy.jsonl');
  mkdirSync(join(dir, 'x'));
  const sameName = join(dir, 'x', 'nested-depth-3.jsonl.gz');
  writeFileSync(sameName, zlib.gzipSync(readFileSync(a)));
  const out = join(dir, 'o');
  const r = subtee(['--out', out, '--stdout', 'none', a, b, sameName, '--pino']);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(readdirSync(out).sort(), ['failing-beside-healthy', 'nested-depth-3', 'nested-depth-3-2']);
  checkOutput(readFileSync(a), join(out, 'nested-depth-3'), 'first input');
  checkOutput(readFileSync(b), join(out, 'failing-beside-healthy'), 'second input');
  checkOutput(readFileSync(a), join(out, 'nested-depth-3-2'), 'third input (same name, gzip)');
  for (const sub of readdirSync(out))
    assert.ok(
      existsSync(join(out, sub, 'events.pino.log')),
      `the pino log inside OUT goes with each input: ${sub}`,
    );
  assert.equal(r.stderr.match(/^subtee: \d+ subagents/gm)?.length, 3, 'one summary per input');
  // A used folder for any input is refused before the first input is read.
  const again = subtee(['--out', out, '-q', join(FIXTURES, 'nested-depth-3-task-tool.jsonl'), b]);
  assert.equal(again.status, 3);
  assert.match(again.stderr, /failing-beside-healthy already holds files .*\[ERR_OUT_NOT_EMPTY\]/);
  assert.equal(existsSync(join(out, 'nested-depth-3-task-tool')), false);
});

test('several inputs: a link planted as an input\'s folder is refused, or removed under --force', () => {
  const dir = tmpDir();
  const a = join(FIXTURES, 'nested-depth-3.jsonl');
  const b = join(FIXTURES, 'failing-beside-healthy.jsonl');
  const elsewhere = join(dir, 'elsewhere');
  mkdirSync(join(elsewhere, 'agents'), { recursive: true });
  writeFileSync(join(elsewhere, 'agents', 'precious.jsonl'), 'kept\n');
  const out = join(dir, 'o');
  mkdirSync(out);
  symlinkSync(elsewhere, join(out, 'nested-depth-3'));
  const refused = subtee(['--out', out, '-q', a, b]);
  assert.equal(refused.status, 3, refused.stderr);
  assert.match(refused.stderr, /nested-depth-3 is a link: subtee does not write through one/);
  assert.match(refused.stderr, /\[ERR_OUT_NOT_DIR]\n$/);
  assert.deepEqual(readdirSync(out), ['nested-depth-3'], 'nothing written before the refusal');
  const forced = subtee(['--out', out, '-q', '--force', a, b]);
  assert.equal(forced.status, 0, forced.stderr);
  assert.equal(lstatSync(join(out, 'nested-depth-3')).isDirectory(), true, 'a folder of its own');
  checkOutput(readFileSync(a), join(out, 'nested-depth-3'), 'the input behind the link');
  assert.deepEqual(readdirSync(elsewhere, { recursive: true }).sort(), ['agents', 'agents/precious.jsonl']);
  assert.equal(readFileSync(join(elsewhere, 'agents', 'precious.jsonl'), 'utf8'), 'kept\n');
});

test('an input with no JSON object line at all gets an INPUT_QUARANTINED warning', () => {
  const out = join(tmpDir(), 'o');
  const r = subtee(['--out', out, '--stdout', 'none'], 'PK\x03\x04 not a stream\nnot json either\n');
  assert.equal(r.status, 0);
  assert.match(r.stderr, /warning INPUT_QUARANTINED: none of the 2 input lines is a JSON object/);
  assert.deepEqual(
    JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')).warnings.map((w: any) => w.code),
    ['INPUT_QUARANTINED'],
  );
  const fine = subtee(['--out', join(tmpDir(), 'o'), '--stdout', 'none'], stream);
  assert.doesNotMatch(
    fine.stderr,
    /INPUT_QUARANTINED/,
    'one noise line among JSON lines is no reason to warn',
  );
});

test('an input with no lines (empty, or blank lines only) is INPUT_EMPTY, exit 3, with one line', () => {
  for (const [input, held] of [
    ['', 'no lines'],
    ['\n\n  \n', 'only blank lines'],
  ]) {
    const out = join(tmpDir(), 'o');
    const r = subtee(['--out', out], input);
    assert.equal(r.status, 3, JSON.stringify(input));
    assert.equal(
      r.stderr,
      `subtee: the input held ${held}: nothing to split (Claude Code prints stream-json only with ` +
        '--output-format stream-json --verbose) [INPUT_EMPTY]\n',
    );
    assert.equal(JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')).input.lines, 0);
  }
  // One line is enough, even one that is not JSON (that one is quarantined and warned about).
  assert.equal(subtee(['--out', join(tmpDir(), 'o'), '-q'], 'not json\n').status, 0);
});

/** Every help text the command line prints. */
const HELPS = [
  ['help'],
  ['--help'],
  ['help', 'run'],
  ['help', 'report'],
  ['help', 'stats'],
  ['help', 'help'],
];

test('subtee help [COMMAND] prints the help of the command, the same as COMMAND --help', () => {
  const main = helpOf(['--help']);
  assert.equal(helpOf(['help']).stdout, main.stdout);
  assert.equal(helpOf(['-h']).stdout, main.stdout);
  const usage = ['subtee \\[options\\] \\[FILE…\\] ', 'subtee run ', 'subtee report ', 'subtee stats '];
  assert.match(main.stdout, new RegExp(`^${usage.join('.*\\n')}.*\\nsubtee help `));
  for (const command of ['run', 'report', 'stats']) {
    const viaHelp = helpOf(['help', command]);
    const viaFlag = helpOf([command, '--help']);
    assert.equal(viaHelp.status, 0, viaHelp.stderr);
    assert.equal(viaFlag.status, 0, viaFlag.stderr);
    assert.equal(viaHelp.stdout, viaFlag.stdout, command);
    assert.match(viaHelp.stdout, new RegExp(`^subtee ${command} \\[options\\]`), command);
    assert.notEqual(viaHelp.stdout, main.stdout, `${command} has a help of its own`);
  }
  assert.match(helpOf(['run', '--help']).stdout, /--kill-grace-ms MS/);
  assert.match(helpOf(['run', '--help']).stdout, /Exit codes: the command's own;/);
  const unknown = subtee(['help', 'nosuch']);
  assert.equal(unknown.status, 2);
  assert.equal(
    unknown.stderr,
    'subtee: no command nosuch: the commands are run, report, stats, help [ERR_USAGE]\n',
  );
  assert.match(subtee(['help', 'reprot']).stderr, /did you mean report\?/);
});

test("the help's exit codes are the documented ones, and exit 1 names a failed plugin", () => {
  const table = readDoc('docs/options.md').split('## Exit codes')[1].split('\n\n')[1];
  const documented = [...table.matchAll(/^\| ([\d /]+) \|/gm)].flatMap((m) => m[1].split(' / '));
  assert.ok(documented.includes('124') && documented.includes('143'), table);
  const main = helpOf(['--help']).stdout.split('Exit codes:')[1];
  for (const code of documented) assert.match(main, new RegExp(`\\b${code} `), `exit ${code}`);
  assert.match(main, /\b1 internal error or a plugin failed/);
  assert.match(helpOf(['run', '--help']).stdout.split('Exit codes:')[1], /\b1 a plugin failed/);
});

test('every help line fits in 100 columns', () => {
  for (const args of HELPS) {
    const r = helpOf(args);
    assert.equal(r.status, 0, `${args.join(' ')}: ${r.stderr}`);
    for (const line of r.stdout.split('\n'))
      assert.ok([...line].length <= 100, `${args.join(' ')}: ${line.length} columns: ${line}`);
  }
});

test('a mistyped command is named as one when no such file exists, and read as a file when one does', () => {
  const dir = tmpDir();
  for (const [word, command] of [
    ['reprot', 'report'],
    ['stat', 'stats'],
    ['rnu', 'run'],
  ]) {
    const r = spawnSync(process.execPath, [BIN, word], { cwd: dir, input: '', encoding: 'utf8' });
    assert.equal(r.status, 2, r.stderr);
    const said = `subtee: no file or command ${word}: did you mean subtee ${command}? [ERR_USAGE]\n`;
    assert.equal(r.stderr, said);
    assert.equal(existsSync(join(dir, 'subtee-out')), false, 'nothing written');
  }
  // A name like no command is a missing file, as before.
  const missing = spawnSync(process.execPath, [BIN, 'transcript'], { cwd: dir, input: '', encoding: 'utf8' });
  assert.equal(missing.status, 3);
  assert.match(missing.stderr, /\[ERR_INPUT\]/);
  writeFileSync(join(dir, 'reprot'), stream);
  const file = spawnSync(process.execPath, [BIN, '-q', '--stdout', 'none', 'reprot'], {
    cwd: dir,
    encoding: 'utf8',
  });
  assert.equal(file.status, 0, file.stderr);
  assert.ok(existsSync(join(dir, 'subtee-out', 'index.json')));
});

test('subtee run with its command given without --: the error shows the line with -- in its place', () => {
  const r = subtee(['run', '--out', 'x', 'claude', '-p', 'hi there', '--verbose']);
  assert.equal(r.status, 2);
  assert.equal(
    r.stderr,
    'subtee: unknown option -p; the command goes after --, as in: ' +
      "subtee run --out x -- claude -p 'hi there' --verbose [ERR_UNKNOWN_OPTION]\n",
  );
  const bare = subtee(['run', '-q', '--out', 'x', 'claude']);
  assert.equal(bare.status, 2);
  assert.equal(
    bare.stderr,
    'subtee: subtee run needs the command after --, as in: subtee run -q --out x -- claude [ERR_USAGE]\n',
  );
  // An option subtee does not know before any command is the mistake itself.
  const bogus = subtee(['run', '--bogus', 'claude']);
  assert.equal(bogus.stderr, 'subtee: unknown option --bogus (see subtee run --help) [ERR_UNKNOWN_OPTION]\n');
});

test("docs/options.md: the console block of subtee run without -- prints what the page shows", () => {
  const blocks = codeBlocks(readDoc('docs/options.md'), 'console');
  const block = blocks.find((b) => b.startsWith('$ subtee run '));
  assert.ok(block, 'the page shows subtee run without --');
  const [command, ...shown] = block.split('\n');
  const r = subtee(command.replace(/^\$ subtee /, '').split(' '));
  assert.equal(r.status, 2);
  assert.equal(r.stderr, shown.join('\n').trimEnd() + '\n');
});

/**
 * Main spawns one subagent per description; each shows its report as text (unless `silent`
 * says not) and main receives the same text as the spawn's result. Subagent k spends
 * 100·(k+1) output tokens; `failing` ones end in an error.
 */
function fleet(descriptions: string[], o: { failing?: number[]; silent?: number[] } = {}): string {
  const model = 'claude-sonnet-4-5';
  const init = { type: 'system', subtype: 'init', session_id: 's', claude_code_version: '2.1.328' };
  const lines: object[] = [init];
  descriptions.forEach((description, k) => {
    const spawn = { type: 'tool_use', id: `toolu_${k}`, name: 'Agent', input: { description, prompt: 'go' } };
    const usage = { input_tokens: 1, output_tokens: 1 };
    const message = { id: `s${k}`, model, content: [spawn], usage };
    lines.push({ type: 'assistant', parent_tool_use_id: null, message });
  });
  descriptions.forEach((_, k) => {
    if (!o.silent?.includes(k)) {
      const usage = { input_tokens: 10, output_tokens: 100 * (k + 1) };
      const content = [{ type: 'text', text: `Report ${k}: done.` }];
      const message = { id: `m${k}`, model, content, usage };
      lines.push({ type: 'assistant', parent_tool_use_id: `toolu_${k}`, message });
    }
    const result = { type: 'tool_result', tool_use_id: `toolu_${k}`, content: `Report ${k}: done.` };
    const is_error = o.failing?.includes(k) ?? false;
    lines.push({ type: 'user', parent_tool_use_id: null, message: { content: [{ ...result, is_error }] } });
  });
  lines.push({ type: 'result', subtype: 'success', is_error: false, result: 'all reported' });
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

test("stdout: a subagent's final report once; labels are descriptions cut to a width, a repeated one " +
  "with its tag", () => {
  const long = 'a description far longer than the label width';
  const input = fleet(['part 0', long, 'part 0', 'part 3'], { silent: [3] });
  const r = subtee(['--out', join(tmpDir(), 'o'), '-q'], input);
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.split('\n');
  assert.deepEqual(lines.slice(0, 7), [
    '[part 0] Report 0: done.',
    '[part 0] [status] completed',
    '[a description far longe…] Report 1: done.',
    '[a description far longe…] [status] completed',
    '[part 0·2] Report 2: done.',
    '[part 0·2] [status] completed',
    // Not shown as text (its text was not forwarded): the status line carries the report.
    '[part 3] [status] completed — Report 3: done.',
  ]);
  assert.equal(r.stdout.match(/Report 0: done\./g)!.length, 1, 'printed once');
  assert.equal('a description far longe…'.length, 24, 'the width');
});

test('the summary of a large tree is bounded: its top, ' +
  'the failed and the costliest below it, how many more', () => {
  const n = 60;
  const descriptions = Array.from({ length: n }, (_, k) => `part ${k}`);
  const input = fleet(descriptions, { failing: [50] });
  const r = subtee(['--out', join(tmpDir(), 'o'), '--stdout', 'none'], input);
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stderr.trimEnd().split('\n');
  const counts = /^subtee: 60 subagents \(59 completed, 1 failed, 0 running\), 182 lines, 0 quarantined/;
  assert.match(lines[0], counts);
  assert.ok(lines.length <= 36, `${lines.length} lines`);
  // The top: main, then the first 19 subagents main spawned, then how many more it spawned.
  assert.match(lines[2], /^main  completed  lines 122 /);
  for (let k = 0; k < 19; k++)
    assert.match(lines[3 + k], new RegExp(`^├─ part ${k}  completed  depth 1 `));
  assert.equal(lines[22], '└─ … 41 more spawned by main');
  assert.equal(lines[23], 'failed: 1');
  assert.match(lines[24], /^ {3}part 50  failed  depth 1 /);
  assert.equal(lines[25], 'costliest below the top:');
  const costliest = lines.slice(26, 31).map((l) => /^ {3}(part \d+) /.exec(l)?.[1]);
  assert.deepEqual(costliest, ['part 59', 'part 58', 'part 57', 'part 56', 'part 55']);
  const listed = lines.filter((l) => /^(├─ | {3})part \d+ /.test(l)).length;
  assert.equal(listed, 19 + 1 + 5);
  assert.equal(
    lines[31],
    `… and ${n - listed} more subagents: index.json lists every one, ` +
      `subtee report ${lines[0].split('→ ')[1]} draws the whole tree`,
  );
  assert.equal(lines.length, 32);
});

test('the summary counts in the singular and says main read no lines when it read none', () => {
  const one = subtee(['--out', join(tmpDir(), 'o'), '--stdout', 'none'], fleet(['only']));
  assert.match(one.stderr, /^subtee: 1 subagent \(1 completed, 0 failed, 0 running\), 5 lines,/m);
  assert.match(one.stderr, /\n└─ only  completed  depth 1 /);
  const junk = subtee(['--out', join(tmpDir(), 'o'), '--stdout', 'none'], 'not json\n');
  assert.match(junk.stderr, /^subtee: 0 subagents \(.*\), 1 line, 1 quarantined/m);
  assert.match(junk.stderr, /\nmain  no lines  lines 0 /);
  assert.doesNotMatch(junk.stderr, /\nmain  running/);
});

test('labels from the stream are escaped on stdout and in ' +
  'the summary: no control sequence reaches a terminal', () => {
  const input = fleet(['evil\x1b[2J\nname', '']).replace(
    '"input":{"description":"","prompt":"go"}',
    '"input":{"description":"","prompt":"go","subagent_type":"type\\u001b[31m"}',
  );
  assert.ok(input.includes('type\\u001b[31m'), 'the second spawn names its type');
  const r = subtee(['--out', join(tmpDir(), 'o')], input);
  assert.equal(r.status, 0, r.stderr);
  assert.doesNotMatch(r.stdout + r.stderr, /\x1b/);
  assert.match(r.stdout, /^\[evil\\x1b\[2J name\] Report 0: done\.$/m);
  assert.match(r.stdout, /^\[type\\x1b\[31m·1\] Report 1: done\.$/m);
  assert.match(r.stderr, /\n├─ evil\\x1b\[2J name  completed /);
  assert.match(r.stderr, /\n└─ type\\x1b\[31m·1  completed /);
});

test('a model line that is a GitHub workflow command is shown escaped on stdout and in the .log, ' +
  'every line of a text, and kept as is in the .jsonl', () => {
  const lines = [
    { type: 'system', subtype: 'init', session_id: 's', claude_code_version: '2.1.328' },
    {
      type: 'assistant',
      parent_tool_use_id: null,
      message: {
        id: 'm1',
        content: [
          { type: 'thinking', thinking: '::notice::tagged\n  ::add-mask::later' },
          { type: 'text', text: '::add-mask::secret\nok ::warning::x\n\t::stop-commands::tok\n  ::error::x' },
          {
            type: 'tool_use',
            id: 'toolu_sub1',
            name: 'Agent',
            input: { subagent_type: 'Explore', description: 'd', prompt: '::warning::one\n::warning::two' },
          },
        ],
      },
    },
    {
      type: 'assistant',
      parent_tool_use_id: 'toolu_sub1',
      message: { id: 'm2', content: [{ type: 'text', text: '::error::sub\n::error::sub2' }] },
    },
    {
      type: 'user',
      parent_tool_use_id: null,
      message: { content: [{ type: 'tool_result', tool_use_id: 'toolu_sub1', content: 'ok' }] },
    },
  ].map((l) => JSON.stringify(l));
  const input = lines.join('\n') + '\n';
  const out = join(tmpDir(), 'o');
  const r = subtee(['--out', out, '-q'], input);
  assert.equal(r.status, 0, r.stderr);
  // Main's text starts its lines; a subagent's lines start with its label, so are no commands.
  assert.equal(
    r.stdout,
    '\\x3a:add-mask::secret\nok ::warning::x\n\t\\x3a:stop-commands::tok\n  \\x3a:error::x\n' +
      '[d] ::error::sub\n[d] ::error::sub2\n[d] [status] completed — ok\n',
  );
  const files = readTree(out);
  const mainLog = files.get('main.log')!.toString();
  assert.ok(
    mainLog.includes(
      '[thinking] ::notice::tagged\n  \\x3a:add-mask::later\n' +
        '\\x3a:add-mask::secret\nok ::warning::x\n\t\\x3a:stop-commands::tok\n  \\x3a:error::x\n',
    ),
    mainLog,
  );
  const subLog = files.get('agents/toolu_sub1.log')!.toString();
  const subShown = '[prompt] ::warning::one\n\\x3a:warning::two\n\\x3a:error::sub\n\\x3a:error::sub2\n';
  assert.ok(subLog.includes(subShown), subLog);
  const logs = [...files.keys()].filter((f) => f.endsWith('.log'));
  for (const f of logs)
    assert.doesNotMatch(files.get(f)!.toString(), /(^|\n)\s*::/, `${f} holds no workflow command`);
  // The .jsonl files keep the input's bytes.
  assert.equal(files.get('main.jsonl')!.toString(), [0, 1, 3].map((k) => lines[k] + '\n').join(''));
  assert.equal(files.get('agents/toolu_sub1.jsonl')!.toString(), lines[2] + '\n');
  // Thinking written whole to its own file is escaped the same way.
  const whole = join(tmpDir(), 'o');
  assert.equal(subtee(['--out', whole, '-q', '--thinking', 'file'], input).status, 0);
  const thinking = readFileSync(join(whole, 'main.thinking.log'), 'utf8');
  assert.ok(thinking.includes('\n\\x3a:notice::tagged\n  \\x3a:add-mask::later\n'), thinking);
});

test("a description that is a workflow command is escaped where the end-of-run summary starts a line " +
  'with it, after blanks only (stderr goes to the job log too)', () => {
  const descriptions = Array.from({ length: 21 }, (_, k) => (k === 20 ? '::add-mask::x' : `part ${k}`));
  const input = fleet(descriptions, { failing: [20] });
  const r = subtee(['--out', join(tmpDir(), 'o'), '--stdout', 'none'], input);
  assert.equal(r.status, 0, r.stderr);
  // Listed as failed below the top, after three spaces, which the runner would skip.
  assert.match(r.stderr, /\nfailed: 1\n {3}\\x3a:add-mask::x  failed  depth 1 /);
  assert.doesNotMatch(r.stderr, /(^|\n)\s*::/);
});

test('a `##[` workflow command anywhere in shown text is escaped on stdout, in the .log, the summary ' +
  "and pino's stdout lines, and kept as is in the .jsonl", () => {
  const lines = [
    { type: 'system', subtype: 'init', session_id: 's', claude_code_version: '2.1.328' },
    {
      type: 'assistant',
      parent_tool_use_id: null,
      message: {
        id: 'm1',
        content: [
          { type: 'text', text: 'see ##[add-mask]x\n##[warning]w' },
          {
            type: 'tool_use',
            id: 'toolu_sub1',
            name: 'Agent',
            input: { subagent_type: 'Explore', description: '##[group]d', prompt: 'p ##[debug]q' },
          },
          { type: 'tool_use', id: 'toolu_b', name: 'Bash', input: { command: 'echo ##[error]e' } },
        ],
      },
    },
    {
      type: 'assistant',
      parent_tool_use_id: 'toolu_sub1',
      message: { id: 'm2', content: [{ type: 'text', text: 'sub ##[error]boom' }] },
    },
    {
      type: 'user',
      parent_tool_use_id: null,
      message: { content: [{ type: 'tool_result', tool_use_id: 'toolu_b', content: 'out ##[error]boom' }] },
    },
    {
      type: 'user',
      parent_tool_use_id: null,
      message: { content: [{ type: 'tool_result', tool_use_id: 'toolu_sub1', content: 'ok ##[endgroup]' }] },
    },
  ].map((l) => JSON.stringify(l));
  const input = lines.join('\n') + '\n';
  const out = join(tmpDir(), 'o');
  const r = subtee(['--out', out], input);
  assert.equal(r.status, 0, r.stderr);
  // Main's lines and a subagent's, its label and its last words included.
  assert.equal(
    r.stdout,
    'see #\\x23[add-mask]x\n#\\x23[warning]w\n' +
      '[#\\x23[group]d] sub #\\x23[error]boom\n[#\\x23[group]d] [status] completed — ok #\\x23[endgroup]\n',
  );
  // The summary's row of the subagent, on stderr.
  assert.match(r.stderr, /\n└─ #\\x23\[group\]d  completed  depth 1 /);
  assert.doesNotMatch(r.stderr, /##\[/);
  const files = readTree(out);
  const mainLog = files.get('main.log')!.toString();
  for (const shown of [
    'see #\\x23[add-mask]x\n#\\x23[warning]w\n',
    '[tool] Bash {"command":"echo #\\x23[error]e"}\n',
    '[result] out #\\x23[error]boom\n',
  ])
    assert.ok(mainLog.includes(shown), mainLog);
  const subLog = files.get('agents/toolu_sub1.log')!.toString();
  assert.ok(subLog.includes('# description: #\\x23[group]d\n'), subLog);
  assert.ok(subLog.includes('[prompt] p #\\x23[debug]q\nsub #\\x23[error]boom\n'), subLog);
  for (const [f, bytes] of files)
    if (f.endsWith('.log')) assert.doesNotMatch(bytes.toString(), /##\[/, `${f} holds no workflow command`);
  // The .jsonl files keep the input's bytes.
  assert.equal(files.get('main.jsonl')!.toString(), [0, 1, 3, 4].map((k) => lines[k] + '\n').join(''));
  assert.equal(files.get('agents/toolu_sub1.jsonl')!.toString(), lines[2] + '\n');
  // pino's lines on stdout hold the same values, their `#` after a `#` written \u0023.
  const pino = subtee(['--out', join(tmpDir(), 'o'), '--stdout', 'none', '-q', '--pino', '-'], input);
  assert.equal(pino.status, 0, pino.stderr);
  assert.doesNotMatch(pino.stdout, /##\[/);
  assert.ok(pino.stdout.includes('"content":"see #\\u0023[add-mask]x\\n#\\u0023[warning]w"'), pino.stdout);
  const contents = linesOf(Buffer.from(pino.stdout)).map((l) => JSON.parse(l).content);
  assert.ok(contents.includes('see ##[add-mask]x\n##[warning]w'), String(contents));
  assert.ok(contents.includes('out ##[error]boom'), String(contents));
});

test('a plain split loads no code of report, stats or run, of the pino, otlp and clickhouse sinks ' +
  'or of the projection; --html and --pino load their sinks\' code', () => {
  const dir = tmpDir();
  const input = join(FIXTURES, 'nested-depth-3.jsonl');
  // The code of what this run does not use: other commands, other sinks, the projection.
  const unused = [
    'cli/report-command.js',
    'cli/stats-command.js',
    'cli/run-command.js',
    'cli/status-line.js',
    'chain/stats-clickhouse.js',
    'views/projection/projection.js',
    ...['report', 'pino', 'pino-batch', 'pino-target'].map((f) => `chain/sinks/${f}.js`),
    ...['otlp', 'otlp-spans'].map((f) => `chain/sinks/${f}.js`),
    ...['clickhouse', 'clickhouse-rows', 'clickhouse-spool'].map((f) => `chain/sinks/${f}.js`),
  ];
  const plain = cliModules(['--out', join(dir, 'plain'), '--stdout', 'none', '-q', input]);
  assert.ok(plain.includes('chain/sinks/files.js'), plain.join(' '));
  // Of the report's views, only the defaults of its limits (model.js): the sink's options.
  const page = (m: string) => m.startsWith('views/report/') && m !== 'views/report/model.js';
  assert.deepEqual(
    plain.filter((m) => unused.includes(m) || page(m)),
    [],
  );
  const sinks = ['--html', '--pino', join(dir, 'events.log')];
  const named = cliModules(['--out', join(dir, 'named'), '--stdout', 'none', '-q', ...sinks, input]);
  for (const m of ['chain/sinks/report.js', 'views/report/build.js', 'chain/sinks/pino.js'])
    assert.ok(named.includes(m), `${m} loaded by --html --pino`);
  assert.ok(existsSync(join(dir, 'named', 'report.html')) && statSync(join(dir, 'events.log')).size > 0);
});
