import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import {
  BIN,
  ROOT,
  checkOutput,
  fanoutInput,
  linesOf,
  readTree,
  stuckReader,
  tmpDir,
} from './helpers/helpers.js';
import { DEFAULT_STAGES } from '../src/chain/chain.js';
import { commandVersion, VERSION_QUESTION } from '../src/cli/run-command.js';
import { claudeCommand, describeWithClaude } from './e2e/claude.js';
import { codexAvailable, codexCommand } from './e2e/codex.js';
import { startFakeResponses } from './e2e/fake-responses.js';

const recording = join(ROOT, 'test', 'fixtures', 'nested-depth-3.jsonl');

/** A stand-in agent: prints a recording, answers --version like Claude Code, exits as told. */
function fakeAgent(version: string, exitCode = 0, extra = ''): string {
  const p = join(tmpDir(), 'agent.sh');
  writeFileSync(
    p,
    `#!/bin/sh\nif [ "$1" = "--version" ]; then echo "${version} (Claude Code)"; exit 0; fi\n` +
      `cat "${recording}"\necho "agent stderr line" >&2\n${extra}\nexit ${exitCode}\n`,
  );
  chmodSync(p, 0o755);
  return p;
}

test('subtee run: reads the command, passes its stderr, exits with its code', () => {
  const out = join(tmpDir(), 'o');
  const r = spawnSync(
    process.execPath,
    [BIN, 'run', '--out', out, '--stdout', 'none', '-q', '--', fakeAgent('2.1.328', 7)],
    { encoding: 'utf8' },
  );
  assert.equal(r.status, 7, r.stderr);
  assert.match(r.stderr, /agent stderr line/);
  const files = readTree(out);
  assert.equal(
    linesOf(files.get('main.jsonl')).length +
      [...files.keys()]
        .filter((k) => k.startsWith('agents/') && k.endsWith('.jsonl'))
        .reduce((n, k) => n + linesOf(files.get(k)).length, 0),
    linesOf(readFileSync(recording)).length,
  );
});

test('subtee run --require-version: refuses a too-old agent before starting it', () => {
  const out = join(tmpDir(), 'o');
  const marker = join(tmpDir(), 'started');
  const agent = fakeAgent('2.1.210', 0, `touch "${marker}"`);
  const r = spawnSync(
    process.execPath,
    [BIN, 'run', '--out', out, '--require-version', '>=2.1.219', '--', agent],
    { encoding: 'utf8' },
  );
  assert.equal(r.status, 4);
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  assert.match(
    r.stderr,
    /Claude Code 2\.1\.210 does not satisfy --require-version >=2\.1\.219 \[ERR_VERSION\]/,
  );
  assert.throws(() => readFileSync(marker), 'the agent never ran');
  const ok = spawnSync(
    process.execPath,
    [
      BIN,
      'run',
      '--out',
      join(tmpDir(), 'o'),
      '-q',
      '--stdout',
      'none',
      '--require-version',
      '>=2.1.219',
      '--',
      fakeAgent('2.1.328'),
    ],
    { encoding: 'utf8' },
  );
  assert.equal(ok.status, 0, ok.stderr);
});

/**
 * An agent whose `--version` starts a background job holding its output (writing the job's pid
 * to `pid`), then answers `answer` and exits, or with no `answer` never answers.
 */
function versionWithJob(answer?: string): { agent: string; job: () => number | null } {
  const dir = tmpDir();
  const agent = join(dir, 'agent.sh');
  const pidFile = join(dir, 'pid');
  const then = answer === undefined ? 'while true; do sleep 0.1; done' : `echo "${answer}"; exit 0`;
  writeFileSync(
    agent,
    `#!/bin/sh
if [ "$1" = "--version" ]; then sleep 600 & echo $! > "${pidFile}.tmp"; ` +
      `mv "${pidFile}.tmp" "${pidFile}"; ${then}; fi
cat "${recording}"
`,
  );
  chmodSync(agent, 0o755);
  const job = () => {
    if (!existsSync(pidFile)) return null;
    const pid = Number(readFileSync(pidFile, 'utf8'));
    strays.push(pid);
    return pid;
  };
  return { agent, job };
}

test('the --version question ends its whole process group: an answer is read though a job it ' +
  'started holds the output, and a command that never answers is named with the time it had', async () => {
  const answering = versionWithJob('2.1.328 (Claude Code)');
  const t0 = Date.now();
  assert.deepEqual(await commandVersion(answering.agent), { version: '2.1.328', unknownBecause: null });
  assert.ok(Date.now() - t0 < VERSION_QUESTION.timeoutMs / 2, 'not held until the time is up');
  const answeredJob = answering.job();
  assert.ok(answeredJob !== null);
  await waitFor(() => !running(answeredJob), 'the job the answer left behind to end');
  const silent = versionWithJob();
  const asked = await commandVersion(silent.agent, undefined, 300);
  assert.equal(asked.version, null);
  assert.equal(asked.unknownBecause, `${silent.agent} --version gave no answer within 0.3 s`);
  const silentJob = silent.job();
  assert.ok(silentJob !== null);
  await waitFor(() => !running(silentJob), 'the silent command\'s job to end');
});

test('the --version question does not wait for a process the command set free of its group ' +
  'holding the output: the answer is read, the question ends', async () => {
  const dir = tmpDir();
  const agent = join(dir, 'agent.mjs');
  const pidFile = join(dir, 'pid');
  writeFileSync(
    agent,
    `#!${process.execPath}\nimport { spawn } from 'node:child_process';\n` +
      "import { writeFileSync } from 'node:fs';\n" +
      "const free = spawn('sleep', ['600'], { detached: true, stdio: ['ignore', 'inherit', 'ignore'] });\n" +
      `writeFileSync(${JSON.stringify(pidFile)}, String(free.pid));\nfree.unref();\n` +
      "console.log('2.1.328 (Claude Code)');\n",
  );
  chmodSync(agent, 0o755);
  const t0 = Date.now();
  const asked = await commandVersion(agent);
  strays.push(Number(readFileSync(pidFile, 'utf8')));
  assert.deepEqual(asked, { version: '2.1.328', unknownBecause: null });
  assert.ok(Date.now() - t0 < VERSION_QUESTION.timeoutMs / 2, 'not held by the freed process');
});

test('subtee run --require-version: a signal while --version gets no answer ends subtee at once, ' +
  'exit 130, and what the question started with it', async () => {
  const silent = versionWithJob();
  const child = spawn(
    process.execPath,
    [BIN, 'run', '--out', join(tmpDir(), 'o'), '-q', '--require-version', '>=2.1.0', '--', silent.agent],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const closed = new Promise<number | null>((r) => child.on('close', r));
  await waitFor(() => silent.job() !== null, 'the --version question to start its job');
  const signalledAt = Date.now();
  child.kill('SIGINT');
  assert.equal(await closed, 130, stderr);
  assert.ok(Date.now() - signalledAt < VERSION_QUESTION.timeoutMs / 2, 'not held until the time is up');
  const job = silent.job()!;
  await waitFor(() => !running(job), 'the job to end');
});

test('subtee run --require-version reads the version wherever --version ' +
  'prints it (GitHub Copilot CLI, opencode), and names the agent', () => {
  const printing = (output: string, stream = recording, command = 'agent.sh') => {
    const dir = tmpDir();
    writeFileSync(join(dir, 'version.txt'), output);
    const p = join(dir, command);
    writeFileSync(
      p,
      `#!/bin/sh\nif [ "$1" = "--version" ]; then cat "${join(dir, 'version.txt')}"; exit 0; fi\n` +
        `cat "${stream}"\n`,
    );
    chmodSync(p, 0o755);
    return p;
  };
  const run = (agent: string, range: string) =>
    spawnSync(
      process.execPath,
      [
        BIN,
        'run',
        '--out',
        join(tmpDir(), 'o'),
        '-q',
        '--stdout',
        'none',
        '--require-version',
        range,
        '--',
        agent,
      ],
      { encoding: 'utf8' },
    );
  const copilot = printing("GitHub Copilot CLI 1.0.102.\nRun 'copilot update' to check for updates.\n");
  const refused = run(copilot, '>=1.0.103');
  assert.equal(refused.status, 4, refused.stderr);
  assert.match(refused.stderr, / 1\.0\.102 does not satisfy --require-version >=1\.0\.103 \[ERR_VERSION\]/);
  // The recording the stand-in prints is Claude Code 2.1.328's: the stream's version is checked too.
  assert.equal(run(copilot, '1.0.102 || 2.1.328').status, 0);
  assert.equal(run(printing('1.18.33\n'), '1.18.33 || 2.1.328').status, 0);
  // opencode's stream states no version: the one its --version printed and met the range stands.
  const opencodeStream = join(ROOT, 'test', 'fixtures', 'other-agents', 'opencode', 'spawn-2.jsonl');
  const opencode = printing('1.18.33\n', opencodeStream, 'opencode');
  const accepted = run(opencode, '1.18.33');
  assert.equal(accepted.status, 0, accepted.stderr);
  const tooOld = run(opencode, '>=1.19');
  assert.equal(tooOld.status, 4, tooOld.stderr);
  assert.match(
    tooOld.stderr,
    /opencode 1\.18\.33 does not satisfy --require-version >=1\.19 \[ERR_VERSION\]/,
  );
});

test('subtee run --require-version: an answer to --version without a whole version is ' +
  'refused saying what it printed, escaped and cut short', () => {
  const refusal = (answer: string) => {
    const dir = tmpDir();
    const marker = join(dir, 'started');
    writeFileSync(join(dir, 'version.txt'), answer);
    const agent = join(dir, 'agent.sh');
    writeFileSync(
      agent,
      `#!/bin/sh\nif [ "$1" = "--version" ]; then cat "${join(dir, 'version.txt')}"; exit 0; fi\n` +
        `touch "${marker}"\ncat "${recording}"\n`,
    );
    chmodSync(agent, 0o755);
    const args = ['run', '--out', join(dir, 'o'), '-q', '--require-version', '>=1', '--', agent];
    const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8' });
    assert.equal(r.status, 4, r.stderr);
    assert.ok(!existsSync(marker), 'the agent never ran');
    return r.stderr.replace(agent, 'AGENT');
  };
  assert.equal(
    refusal('claude 2.1\n'),
    'subtee: the agent\'s version is unknown (AGENT --version printed "claude 2.1": no word of it ' +
      'is a whole version x.y.z) and --require-version >=1 is set [ERR_VERSION]\n',
  );
  const long = refusal(`tool \x1b[31m(GNU coreutils) 9.1\nWritten by ${'x'.repeat(200)}\n`);
  const shown = /printed "(.*)": no word/.exec(long)?.[1] ?? '';
  assert.ok(shown.startsWith('tool \\u001b[31m(GNU coreutils) 9.1\\nWritten by xxx'), long);
  assert.ok(shown.length < VERSION_QUESTION.shownChars + 20, long);
  assert.match(shown, /\[…\d+ chars cut…\]$/);
});

test('--require-version on a pipe: exit 4 when the stream says the version is too old', () => {
  const old = readFileSync(recording, 'utf8').replace(
    '"claude_code_version":"2.1.328"',
    '"claude_code_version":"2.1.218"',
  );
  const r = spawnSync(
    process.execPath,
    [BIN, '--out', join(tmpDir(), 'o'), '-q', '--require-version', '>=2.1.219'],
    { input: old, encoding: 'utf8' },
  );
  assert.equal(r.status, 4);
  assert.match(r.stderr, /\[ERR_VERSION\]/);
  const warn = spawnSync(process.execPath, [BIN, '--out', join(tmpDir(), 'o'), '-q', '--stdout', 'none'], {
    input: old,
    encoding: 'utf8',
  });
  assert.equal(warn.status, 0);
  assert.match(warn.stderr, /warning VERSION_NO_NESTED_FORWARDING/);
  assert.match(warn.stderr, /warning VERSION_NO_NESTING: .*CLAUDE_CODE_MAX_SUBAGENT_SPAWN_DEPTH/);
});

/** Polls until `pred` holds: a readiness signal, never a fixed sleep. */
async function waitFor(pred: () => boolean, what: string, ms = 30_000) {
  const t0 = Date.now();
  while (!pred()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Lines in main.jsonl so far: once the agent's first lines are there, subtee's signal handlers
 * are installed.
 */
const mainLines = (out: string) =>
  existsSync(join(out, 'main.jsonl')) ? linesOf(readFileSync(join(out, 'main.jsonl'))).length : 0;

test('subtee run forwards SIGTERM to the command and exits with its code', async () => {
  const out = join(tmpDir(), 'o');
  const agent = join(tmpDir(), 'slow.sh');
  // The trap is set before the first line is printed, so lines on disk mean both sides are ready.
  writeFileSync(
    agent,
    `#!/bin/sh\ntrap 'echo got-term >&2; exit 143' TERM\nhead -3 "${recording}"\n` +
      'while true; do sleep 0.1; done\n',
  );
  chmodSync(agent, 0o755);
  const child = spawn(process.execPath, [BIN, 'run', '--out', out, '-q', '--stdout', 'none', '--', agent], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  await waitFor(() => mainLines(out) === 3, 'the first three lines on disk');
  child.kill('SIGTERM');
  const code = await new Promise((r) => child.on('close', r));
  assert.equal(code, 143, stderr);
  assert.match(stderr, /got-term/);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.interrupted, true);
  assert.equal(index.input.lines, 3);
});

test('usage errors of subtee run', () => {
  for (const args of [
    ['run'],
    ['run', '--out', 'x'],
    ['--', 'ls'],
    ['run', '--', join(tmpDir(), 'no-such-command')],
  ]) {
    const r = spawnSync(process.execPath, [BIN, ...args, ...(args.length === 0 ? [] : [])], {
      encoding: 'utf8',
      input: '',
    });
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  }
});

test(
  'subtee run on a terminal: stdout holds the transcript only, and no status line is drawn ' +
    'on the stderr the command writes to',
  { skip: spawnSync('script', ['--version']).status !== 0 && 'script(1) is not installed' },
  () => {
    const dir = tmpDir();
    const agent = join(dir, 'slow.sh');
    const script = `head -5 "${recording}"\necho agent-stderr >&2\ntail -n +6 "${recording}"\n`;
    writeFileSync(agent, `#!/bin/sh\n${script}`);
    chmodSync(agent, 0o755);
    const stdoutFile = join(dir, 'stdout.txt');
    const out = join(dir, 'o');
    const cmd = `"${process.execPath}" "${BIN}" run --out "${out}" -- "${agent}" > "${stdoutFile}"`;
    const r = spawnSync('script', ['-qec', cmd, '/dev/null'], { encoding: 'utf8', timeout: 20_000 });
    assert.equal(r.status, 0, r.stdout);
    assert.match(r.stdout, /^agent-stderr\r?$/m, 'the command\'s line on a row of its own');
    assert.match(r.stdout, /^subtee: 3 subagents/m);
    assert.doesNotMatch(r.stdout, /\x1b\[2K| lines \(\d+\/s\) · /);
    const stdout = readFileSync(stdoutFile, 'utf8');
    assert.doesNotMatch(stdout, /subtee:|\x1b/);
    assert.match(stdout, /Level 3 report: done\./);
  },
);

test('subtee run: a stalled command that ignores SIGTERM is killed after the grace, exit 124', () => {
  const out = join(tmpDir(), 'o');
  const dir = tmpDir();
  const agent = join(dir, 'stubborn.sh');
  const pidFile = join(dir, 'pid');
  writeFileSync(
    agent,
    `#!/bin/sh\ntrap '' TERM\necho $$ > "${pidFile}"\nhead -3 "${recording}"\nexec sleep 60\n`,
  );
  chmodSync(agent, 0o755);
  const started = Date.now();
  const r = spawnSync(
    process.execPath,
    [
      BIN,
      'run',
      '--out',
      out,
      '-q',
      '--stdout',
      'none',
      '--idle-timeout-ms',
      '800',
      '--model-timeout-ms',
      '800',
      '--stall-grace-ms',
      '0',
      '--kill-grace-ms',
      '500',
      '--',
      agent,
    ],
    { encoding: 'utf8', timeout: 30_000 },
  );
  assert.equal(r.status, 124, r.stderr);
  assert.ok(Date.now() - started < 15_000, 'did not wait for the command to finish on its own');
  assert.match(r.stderr, /warning STALL/);
  const pid = Number(readFileSync(pidFile, 'utf8'));
  assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' }, 'the command is gone');
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.stalled, true);
  assert.equal(index.input.lines, 3);
});

/** The chain of the command line, with the watchdog's drain time after a stall set to `stallDrainMs`. */
function drainConfig(dir: string, out: string, stallDrainMs: number): string {
  const config = join(dir, 'config.json');
  const stages = DEFAULT_STAGES.map((s) => (s.use === 'idle-watchdog' ? { ...s, stallDrainMs } : s));
  const spec = { stages, sinks: [{ use: 'files', out }, { use: 'stdout', mode: 'none' }] };
  writeFileSync(config, JSON.stringify(spec));
  return config;
}

for (const [kind, trap, end] of [
  ['stops on SIGTERM', '', { exit_code: 143, signal: 'SIGTERM' }],
  ['ignores SIGTERM past the stall\'s drain time', "trap '' TERM\n", { exit_code: 137, signal: 'SIGKILL' }],
] as const) {
  test(`subtee run: a stall ends with one [ERR_STALL] line, and index.json records the end of the ` +
    `command it stopped, one that ${kind}`, () => {
    const dir = tmpDir();
    const out = join(dir, 'o');
    const agent = join(dir, 'agent.sh');
    writeFileSync(agent, `#!/bin/sh\n${trap}head -3 "${recording}"\nexec sleep 60\n`);
    chmodSync(agent, 0o755);
    // The chain may drain for 100 ms after a stall; the command is given 1 s before SIGKILL.
    const limits = ['--idle-timeout-ms', '800', '--model-timeout-ms', '800', '--stall-grace-ms', '0'];
    const r = spawnSync(
      process.execPath,
      [BIN, 'run', '-c', drainConfig(dir, out, 100), '-q', ...limits, '--kill-grace-ms', '1000', '--', agent],
      { encoding: 'utf8', timeout: 30_000 },
    );
    assert.equal(r.status, 124, r.stderr);
    const lines = r.stderr.trimEnd().split('\n');
    assert.match(lines[0], /^subtee: warning STALL: no input for /);
    assert.equal(
      lines.at(-1),
      'subtee: stalled; the command was stopped; index.json marks what was still running [ERR_STALL]',
    );
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.equal(index.stalled, true);
    assert.deepEqual(index.command, { name: agent, ...end });
    const codes = index.warnings.map((w: any) => w.code);
    assert.ok(codes.includes('STALL'), codes.join(' '));
    assert.ok(!codes.includes('COMMAND_KILLED'), 'the command stopped by subtee is not killed from outside');
  });
}

test('a stall on a pipe ends with one [ERR_STALL] line', async () => {
  const out = join(tmpDir(), 'o');
  const child = spawn(
    process.execPath,
    [BIN, '--out', out, '-q', '--stdout', 'none', '--idle-timeout-ms', '500'],
    { stdio: ['pipe', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  // A run's last line, and the pipe stays open: silence with nothing in flight.
  child.stdin.write(`${JSON.stringify({ type: 'result', subtype: 'success', is_error: false })}\n`);
  const code = await new Promise((r) => child.on('close', r));
  child.stdin.destroy();
  assert.equal(code, 124, stderr);
  assert.equal(
    stderr.trimEnd().split('\n').at(-1),
    'subtee: stalled; index.json marks what was still running [ERR_STALL]',
  );
});

const strays: number[] = [];
after(() => {
  for (const pid of strays) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

test("subtee run: an agent that exits while a process it started holds its stdout → the agent's code, " +
  "PIPE_HELD, no wait, that process stopped", async () => {
  const dir = tmpDir();
  const out = join(dir, 'o');
  const pidFile = join(dir, 'grandchild.pid');
  // The grandchild inherits the agent's stdout (not its stderr) and keeps it open for a minute.
  const agent = fakeAgent('2.1.328', 5, `sleep 60 2>/dev/null &\necho $! > "${pidFile}"`);
  const child = spawn(
    process.execPath,
    [BIN, 'run', '--out', out, '--stdout', 'none', '--idle-timeout-ms', '600000', '--', agent],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((r) => child.on('close', r));
  // Without the fix subtee waits for the pipe's end, that is for the grandchild.
  const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 20_000).unref());
  const result = await Promise.race([exited, timeout]);
  if (existsSync(pidFile)) strays.push(Number(readFileSync(pidFile, 'utf8')));
  if (result === 'timeout') child.kill('SIGKILL');
  assert.equal(result, 5, stderr);
  assert.match(
    stderr,
    /warning PIPE_HELD: \S+agent\.sh exited with code 5, but a process it started still holds its stdout/,
  );
  assert.equal(running(Number(readFileSync(pidFile, 'utf8'))), false, 'the process that held stdout is gone');
  assert.doesNotMatch(stderr, /STALL/);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  // Other warnings may come (the recording names a Claude Code session whose transcripts are
  // not on this machine); a stall is not one of them.
  const codes = index.warnings.map((w: any) => w.code);
  assert.ok(codes.includes('PIPE_HELD') && !codes.includes('STALL'), codes.join(' '));
  assert.equal(index.stalled, false);
  checkOutput(readFileSync(recording), out, 'held pipe');
});

test('subtee run: a process the agent started that keeps ' +
  'writing to its stdout is let go too, and stopped', async () => {
  const dir = tmpDir();
  const out = join(dir, 'o');
  const pidFile = join(dir, 'grandchild.pid');
  // A line every 100 ms for as long as anyone reads: never 1 s of silence.
  const agent = fakeAgent(
    '2.1.328',
    5,
    `(while true; do echo "grandchild noise"; sleep 0.1; done) 2>/dev/null &\necho $! > "${pidFile}"`,
  );
  const child = spawn(
    process.execPath,
    [BIN, 'run', '--out', out, '-q', '--stdout', 'none', '--idle-timeout-ms', '600000', '--', agent],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((r) => child.on('close', r));
  const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 30_000).unref());
  const result = await Promise.race([exited, timeout]);
  if (existsSync(pidFile)) strays.push(Number(readFileSync(pidFile, 'utf8')));
  if (result === 'timeout') child.kill('SIGKILL');
  assert.equal(result, 5, stderr);
  assert.match(stderr, /warning PIPE_HELD/);
  assert.equal(running(Number(readFileSync(pidFile, 'utf8'))), false, 'the process that wrote is gone');
  const files = readTree(out);
  const routed = [...files.keys()].filter((k) => k.endsWith('.jsonl')).flatMap((k) => linesOf(files.get(k)));
  assert.deepEqual(routed.sort(), linesOf(readFileSync(recording)).sort(), 'every line the agent wrote');
  assert.ok(linesOf(files.get('quarantine.log')).every((l) => l === 'grandchild noise'));
});

test('subtee run: an agent that closes its stdout and ' +
  'then hangs is stopped by the watchdog (exit 124)', () => {
  const dir = tmpDir();
  const out = join(dir, 'o');
  const pidFile = join(dir, 'pid');
  const agent = join(dir, 'closer.sh');
  writeFileSync(agent, `#!/bin/sh\necho $$ > "${pidFile}"\ncat "${recording}"\nexec >&-\nexec sleep 60\n`);
  chmodSync(agent, 0o755);
  const r = spawnSync(
    process.execPath,
    [
      BIN,
      'run',
      '--out',
      out,
      '-q',
      '--stdout',
      'none',
      '--idle-timeout-ms',
      '1000',
      '--kill-grace-ms',
      '500',
      '--',
      agent,
    ],
    { encoding: 'utf8', timeout: 25_000 },
  );
  if (existsSync(pidFile)) strays.push(Number(readFileSync(pidFile, 'utf8')));
  assert.equal(r.status, 124, r.stderr);
  assert.match(r.stderr, /warning STALL/);
  assert.throws(
    () => process.kill(Number(readFileSync(pidFile, 'utf8')), 0),
    { code: 'ESRCH' },
    'the agent was stopped',
  );
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.stalled, true);
  checkOutput(readFileSync(recording), out, 'closed stdout');
});

for (const [sig, code] of [
  ['SIGTERM', 143],
  ['SIGINT', 130],
] as const) {
  test(`subtee run: a second ${sig} stops at once with ${code}, killing an agent that ignores the ` +
    `first; index.json records the agent's end`, async () => {
    const dir = tmpDir();
    const out = join(dir, 'o');
    const pidFile = join(dir, 'pid');
    const agent = join(dir, 'stubborn.sh');
    writeFileSync(
      agent,
      `#!/bin/sh\necho $$ > "${pidFile}"\ntrap 'echo got-signal >&2' INT TERM\n` +
        `head -3 "${recording}"\nwhile true; do sleep 0.1; done\n`,
    );
    chmodSync(agent, 0o755);
    // A grace far beyond the test's patience: the second signal must not wait for it.
    const child = spawn(
      process.execPath,
      [BIN, 'run', '--out', out, '-q', '--stdout', 'none', '--kill-grace-ms', '600000', '--', agent],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const closed = new Promise<number | null>((r) => child.on('close', r));
    await waitFor(() => mainLines(out) === 3, 'the first three lines on disk');
    strays.push(Number(readFileSync(pidFile, 'utf8')));
    child.kill(sig);
    await waitFor(() => stderr.includes('got-signal'), 'the agent to receive the first signal');
    child.kill(sig);
    const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 20_000).unref());
    const result = await Promise.race([closed, timeout]);
    if (result === 'timeout') child.kill('SIGKILL');
    assert.equal(result, code, stderr);
    assert.throws(
      () => process.kill(Number(readFileSync(pidFile, 'utf8')), 0),
      { code: 'ESRCH' },
      'the agent is gone',
    );
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.equal(index.interrupted, true);
    assert.equal(index.input.lines, 3);
    assert.deepEqual(index.command, { name: agent, exit_code: 137, signal: 'SIGKILL' }, 'its end');
  });
}

test('subtee run: a second SIGINT while the stdout reader takes nothing exits 130 at once, ' +
  'killing an agent that ignores the first', async () => {
  const dir = tmpDir();
  const out = join(dir, 'o');
  const input = join(dir, 'fan-out.jsonl');
  // Text far beyond what a pipe holds, so stdout stays stuck.
  writeFileSync(input, fanoutInput(20, 60_000));
  const pidFile = join(dir, 'pid');
  const agent = join(dir, 'stubborn.sh');
  writeFileSync(
    agent,
    `#!/bin/sh\necho $$ > "${pidFile}"\ntrap 'echo got-signal >&2' INT\ncat "${input}"\n` +
      'while true; do sleep 0.1; done\n',
  );
  chmodSync(agent, 0o755);
  // A grace far beyond the test's patience: the second signal must not wait for it.
  const reader = stuckReader(dir);
  const args = [BIN, 'run', '--out', out, '--kill-grace-ms', '600000', '--', agent];
  const child = spawn(process.execPath, args, { stdio: ['ignore', reader.fd, 'pipe'] });
  closeSync(reader.fd);
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const closed = new Promise<number | null>((r) => child.on('close', r));
  await reader.firstBytes;
  await waitFor(() => existsSync(pidFile), 'the agent to start');
  strays.push(Number(readFileSync(pidFile, 'utf8')));
  child.kill('SIGINT');
  await waitFor(() => stderr.includes('got-signal'), 'the agent to receive the first signal');
  child.kill('SIGINT');
  const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 20_000).unref());
  const result = await Promise.race([closed, timeout]);
  if (result === 'timeout') child.kill('SIGKILL');
  assert.equal(result, 130, stderr);
  assert.equal(running(Number(readFileSync(pidFile, 'utf8'))), false, 'the agent is gone');
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.interrupted, true);
  reader.close();
});

test('subtee run --require-version: a system/init stating no version is met by the checked --version', () => {
  const dir = tmpDir();
  const stream = join(dir, 'no-version.jsonl');
  const text = readFileSync(recording, 'utf8');
  assert.ok(text.includes('"claude_code_version":"2.1.328",'));
  writeFileSync(stream, text.replace('"claude_code_version":"2.1.328",', ''));
  const agent = join(dir, 'agent.sh');
  writeFileSync(
    agent,
    `#!/bin/sh\nif [ "$1" = "--version" ]; then echo "2.1.328 (Claude Code)"; exit 0; fi\ncat "${stream}"\n`,
  );
  chmodSync(agent, 0o755);
  const args = ['--out', join(dir, 'o'), '-q', '--stdout', 'none', '--require-version', '>=2.1.219'];
  const accepted = spawnSync(process.execPath, [BIN, 'run', ...args, '--', agent], { encoding: 'utf8' });
  assert.equal(accepted.status, 0, accepted.stderr);
  assert.doesNotMatch(accepted.stderr, /ERR_VERSION/);
  // On a pipe nothing stands for it: the same stream is refused.
  const piped = spawnSync(process.execPath, [BIN, ...args.slice(2), '--out', join(dir, 'p')], {
    input: readFileSync(stream),
    encoding: 'utf8',
  });
  assert.equal(piped.status, 4, piped.stderr);
  assert.match(piped.stderr, /\[ERR_VERSION\]/);
});

/**
 * Whether a process still runs: one that has ended but was not reaped yet (a grandchild
 * whose new parent, an init process, does not reap) is a zombie and counts as gone.
 */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]$/.test(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0]);
  } catch {
    if (existsSync('/proc/self/stat')) return false;
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A stand-in agent that starts a grandchild holding its stdout (a shell's background job,
 * which ignores SIGINT as such jobs do), writes both pids, prints three lines, then waits:
 * it exits 0 on SIGINT and SIGTERM, as a CLI that treats Ctrl-C as a clean end does.
 */
function agentWithGrandchild(dir: string): {
  agent: string;
  pids: () => { agent: number; grandchild: number };
} {
  const agent = join(dir, 'parent.sh');
  const pidFile = join(dir, 'pids');
  writeFileSync(
    agent,
    `#!/bin/sh\ntrap 'exit 0' HUP INT TERM\nsleep 600 &\necho "$$ $!" > "${pidFile}.tmp"\n` +
      `mv "${pidFile}.tmp" "${pidFile}"\nhead -3 "${recording}"\nwhile true; do sleep 0.1; done\n`,
  );
  chmodSync(agent, 0o755);
  const pids = () => {
    const [a, g] = readFileSync(pidFile, 'utf8').trim().split(' ').map(Number);
    strays.push(a, g);
    return { agent: a, grandchild: g };
  };
  return { agent, pids };
}

for (const [sig, code] of [
  ['SIGHUP', 129],
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const) {
  test(`subtee run: on ${sig} the command and every process it started are gone when subtee exits ` +
    `${code} with one ERR_INTERRUPTED line, though the agent exits 0`, async () => {
    const dir = tmpDir();
    const out = join(dir, 'o');
    const { agent, pids } = agentWithGrandchild(dir);
    const child = spawn(
      process.execPath,
      [BIN, 'run', '--out', out, '-q', '--stdout', 'none', '--kill-grace-ms', '300', '--', agent],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const closed = new Promise<number | null>((r) => child.on('close', r));
    await waitFor(() => mainLines(out) === 3, 'the first three lines on disk');
    const { agent: agentPid, grandchild } = pids();
    assert.ok(running(grandchild), 'the grandchild runs before the signal');
    child.kill(sig);
    const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 20_000).unref());
    const result = await Promise.race([closed, timeout]);
    if (result === 'timeout') child.kill('SIGKILL');
    assert.equal(result, code, stderr);
    assert.equal(running(agentPid), false, 'the agent is gone');
    assert.equal(running(grandchild), false, 'the process the agent started is gone');
    const line = `interrupted by ${sig}; index\\.json marks what was still running \\[ERR_INTERRUPTED\\]`;
    assert.match(stderr, new RegExp(`^subtee: ${line}$`, 'm'));
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.equal(index.interrupted, true);
    assert.deepEqual(index.command, { name: agent, exit_code: 0, signal: null });
  });
}

test('subtee run: one SIGINT to a command that ignores it is ' +
  'followed by SIGKILL after --kill-grace-ms: exit 130', async () => {
  const dir = tmpDir();
  const out = join(dir, 'o');
  const pidFile = join(dir, 'pid');
  const agent = join(dir, 'deaf.sh');
  writeFileSync(
    agent,
    `#!/bin/sh\ntrap 'echo got-signal >&2' INT\necho $$ > "${pidFile}"\nhead -3 "${recording}"\n` +
      'while true; do sleep 0.1; done\n',
  );
  chmodSync(agent, 0o755);
  const child = spawn(
    process.execPath,
    [BIN, 'run', '--out', out, '-q', '--stdout', 'none', '--kill-grace-ms', '300', '--', agent],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const closed = new Promise<number | null>((r) => child.on('close', r));
  await waitFor(() => mainLines(out) === 3, 'the first three lines on disk');
  strays.push(Number(readFileSync(pidFile, 'utf8')));
  child.kill('SIGINT');
  const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 20_000).unref());
  const result = await Promise.race([closed, timeout]);
  if (result === 'timeout') child.kill('SIGKILL');
  assert.equal(result, 130, stderr);
  assert.match(stderr, /got-signal/);
  assert.equal(running(Number(readFileSync(pidFile, 'utf8'))), false, 'the command is gone');
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.interrupted, true);
  assert.deepEqual(index.command, { name: agent, exit_code: 137, signal: 'SIGKILL' });
});

test('subtee run: when subtee ends early (the stream states a ' +
  'refused version) the command and what it started are stopped, and index.json records how', async () => {
  const dir = tmpDir();
  const old = join(dir, 'old.jsonl');
  writeFileSync(
    old,
    readFileSync(recording, 'utf8').replace(
      '"claude_code_version":"2.1.328"',
      '"claude_code_version":"2.1.218"',
    ),
  );
  const agent = join(dir, 'agent.sh');
  const pidFile = join(dir, 'pids');
  writeFileSync(
    agent,
    `#!/bin/sh\nif [ "$1" = "--version" ]; then echo "2.1.328 (Claude Code)"; exit 0; fi\n` +
      `sleep 600 &\necho "$$ $!" > "${pidFile}.tmp"\nmv "${pidFile}.tmp" "${pidFile}"\n` +
      `head -3 "${old}"\nwhile true; do sleep 0.1; done\n`,
  );
  chmodSync(agent, 0o755);
  const args = ['run', '--out', join(dir, 'o'), '-q', '--stdout', 'none', '--kill-grace-ms', '300'];
  const child = spawn(process.execPath, [BIN, ...args, '--require-version', '>=2.1.219', '--', agent], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const closed = new Promise<number | null>((r) => child.on('close', r));
  const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 20_000).unref());
  const result = await Promise.race([closed, timeout]);
  if (result === 'timeout') child.kill('SIGKILL');
  const [agentPid, grandchild] = readFileSync(pidFile, 'utf8').trim().split(' ').map(Number);
  strays.push(agentPid, grandchild);
  assert.equal(result, 4, stderr);
  assert.match(stderr, /\[ERR_VERSION\]/);
  assert.equal(running(agentPid), false, 'the agent is gone');
  assert.equal(running(grandchild), false, 'the process the agent started is gone');
  const index = JSON.parse(readFileSync(join(dir, 'o', 'index.json'), 'utf8'));
  assert.deepEqual(index.command, { name: agent, exit_code: 143, signal: 'SIGTERM' });
  assert.doesNotMatch(stderr, /COMMAND_KILLED/, 'stopped by subtee, not killed from outside');
});

test('subtee run: a command killed from outside is recorded ' +
  '(signal, exit code, interrupted) and its code passed on', () => {
  const dir = tmpDir();
  const out = join(dir, 'o');
  const agent = join(dir, 'killed.sh');
  writeFileSync(agent, `#!/bin/sh\nhead -3 "${recording}"\nkill -KILL $$\n`);
  chmodSync(agent, 0o755);
  const r = spawnSync(process.execPath, [BIN, 'run', '--out', out, '--stdout', 'none', '--', agent], {
    encoding: 'utf8',
    timeout: 20_000,
  });
  assert.equal(r.status, 137, r.stderr);
  assert.match(r.stderr, /warning COMMAND_KILLED: \S+killed\.sh was ended by SIGKILL \(exit 137\)/);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.interrupted, true);
  assert.deepEqual(index.command, { name: agent, exit_code: 137, signal: 'SIGKILL' });
  assert.equal(index.input.lines, 3);
});

test('subtee run: a command that prints no line is INPUT_EMPTY, exit 3, though it exits 0', () => {
  const dir = tmpDir();
  const agent = join(dir, 'silent.sh');
  writeFileSync(agent, `#!/bin/sh\necho "nothing on stdout" >&2\n`);
  chmodSync(agent, 0o755);
  const r = spawnSync(process.execPath, [BIN, 'run', '--out', join(dir, 'o'), '--', agent], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 3, r.stderr);
  const empty = /silent\.sh printed no lines on stdout: nothing to split .*--verbose\) \[INPUT_EMPTY\]\n$/;
  assert.match(r.stderr, empty);
});

/** A stand-in agent that marks `started` as its first act, then prints the recording. */
function markingAgent(): { agent: string; started: string } {
  const dir = tmpDir();
  const started = join(dir, 'started');
  const agent = join(dir, 'agent.sh');
  writeFileSync(agent, `#!/bin/sh\ntouch "${started}"\ncat "${recording}"\n`);
  chmodSync(agent, 0o755);
  return { agent, started };
}

test('subtee run: an output folder or a pino log that cannot be written refuses the run before ' +
  'the command starts (exit 3), and leaves no new folder behind', () => {
  const refused = (args: string[], code: string) => {
    const { agent, started } = markingAgent();
    const r = spawnSync(process.execPath, [BIN, 'run', '-q', ...args, '--', agent], { encoding: 'utf8' });
    assert.equal(r.status, 3, r.stderr);
    assert.match(r.stderr, new RegExp(`^subtee: .*\\[${code}\\]\n$`));
    assert.ok(!existsSync(started), `${args.join(' ')}: the command never started`);
  };
  const dir = tmpDir();
  const earlier = join(dir, 'earlier');
  const made = spawnSync(process.execPath, [BIN, '--out', earlier, '-q'], { input: '{}\n' });
  assert.equal(made.status, 0);
  refused(['--out', earlier], 'ERR_OUT_NOT_EMPTY');
  writeFileSync(join(dir, 'a-file'), '');
  refused(['--out', join(dir, 'a-file')], 'ERR_OUT_NOT_DIR');
  symlinkSync(join(dir, 'elsewhere.log'), join(dir, 'link.log'));
  refused(['--out', join(dir, 'new'), `--pino=${join(dir, 'link.log')}`], 'ERR_WRITE');
  assert.ok(!existsSync(join(dir, 'new')), 'the folder made ready for the refused run is gone');
  assert.ok(!existsSync(join(dir, 'elsewhere.log')), 'nothing written through the link');
});

test('subtee run: a sink option refused without I/O (a URL the ClickHouse client does not take, a ' +
  'table name, an OTLP endpoint from the environment, a pino transport of no form or whose target ' +
  'pino does not find) refuses the run before the command starts (exit 2), and leaves no folder ' +
  'behind', () => {
  const configOf = (sink: Record<string, unknown>) => {
    const file = join(tmpDir(), 'subtee.json');
    writeFileSync(file, JSON.stringify({ sinks: [{ use: 'files', out: 'unused' }, sink] }));
    return file;
  };
  const clickhouse = 'http://127.0.0.1:1';
  for (const [args, env, message] of [
    [['--clickhouse', `${clickhouse}/?database=subtee`], {}, /Unknown URL parameters: database/],
    [['--clickhouse', `${clickhouse}/?password=x`], {}, /Unknown URL parameters: password/],
    [
      ['--config', configOf({ use: 'clickhouse', url: `${clickhouse}/?database=a` })],
      {},
      /^subtee: clickhouse: not a usable URL: .*\[ERR_BAD_OPTION\]\n$/,
    ],
    [
      ['--config', configOf({ use: 'clickhouse', url: clickhouse, eventsTable: 'a b; DROP' })],
      {},
      /sinks\[1\]\.eventsTable: must be a name such as .*\[ERR_CONFIG\]\n$/,
    ],
    [['--otlp'], { OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://x' }, /OTEL_EXPORTER_OTLP_ENDPOINT must be/],
    [['--otlp'], { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /protocol grpc is not supported/],
    [
      ['--config', configOf({ use: 'pino', transport: {} })],
      {},
      /sinks\[1\]\.transport: must have one of target .*\[ERR_CONFIG\]\n$/,
    ],
    [
      ['--config', configOf({ use: 'pino', transport: { target: 'no-such-transport-xyz' } })],
      {},
      /^subtee: pino transport no-such-transport-xyz: cannot load \(no module is found for target /,
    ],
  ] as const) {
    const { agent, started } = markingAgent();
    const out = join(tmpDir(), 'out');
    const r = spawnSync(
      process.execPath,
      [BIN, 'run', '--out', out, '-q', '--stdout', 'none', ...args, '--', agent],
      { encoding: 'utf8', env: { PATH: process.env.PATH, ...env } },
    );
    const what = `${args.join(' ')} ${JSON.stringify(env)}`;
    assert.equal(r.status, 2, `${what}: ${r.stderr}`);
    assert.match(r.stderr, /^subtee: [^\n]*\[ERR_(BAD_OPTION|CONFIG)\]\n$/, what);
    assert.match(r.stderr, message, what);
    assert.ok(!existsSync(started), `${what}: the command never started`);
    assert.ok(!existsSync(out), `${what}: no folder left behind`);
  }
});

test('subtee run: a command that cannot start leaves the output folder as it was: a new one ' +
  '(with its pino log) is gone, an empty one stays empty', () => {
  const dir = tmpDir();
  const fresh = join(dir, 'new', 'nested');
  const nothing = join(dir, 'nothing');
  const gone = spawnSync(process.execPath, [BIN, 'run', '--out', fresh, '--pino', '--', nothing]);
  assert.equal(gone.status, 2);
  assert.deepEqual(readdirSync(dir), []);
  const empty = join(dir, 'empty');
  mkdirSync(empty);
  const stays = spawnSync(process.execPath, [BIN, 'run', '--out', empty, '--', nothing]);
  assert.equal(stays.status, 2);
  assert.deepEqual(readdirSync(empty), []);
  // The folder is usable again: the run it was made ready for never happened.
  const { agent } = markingAgent();
  const args = ['run', '--out', empty, '-q', '--stdout', 'none', '--', agent];
  const again = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8' });
  assert.equal(again.status, 0, again.stderr);
});

test('subtee run: a command not on PATH reads "not found ' +
  'on PATH", a missing file "no such file" (exit 2)', () => {
  const onPath = spawnSync(process.execPath, [BIN, 'run', '--', 'subtee-no-such-command'], {
    encoding: 'utf8',
  });
  assert.equal(onPath.status, 2);
  assert.equal(
    onPath.stderr,
    'subtee: cannot start subtee-no-such-command: not found on PATH [ERR_COMMAND]\n',
  );
  const path = join(tmpDir(), 'no-such-agent');
  const file = spawnSync(process.execPath, [BIN, 'run', '--', path], { encoding: 'utf8' });
  assert.equal(file.status, 2);
  assert.equal(file.stderr, `subtee: cannot start ${path}: no such file [ERR_COMMAND]\n`);
});

test('subtee run: a command whose path runs through a file, which Node throws rather than emits, ' +
  'cannot start (exit 2, said in words), nor be asked its version', () => {
  const file = join(tmpDir(), 'a-file');
  writeFileSync(file, '');
  const agent = join(file, 'agent');
  const out = join(tmpDir(), 'o');
  const started = spawnSync(process.execPath, [BIN, 'run', '--out', out, '--', agent], { encoding: 'utf8' });
  assert.equal(started.status, 2, started.stderr);
  assert.equal(
    started.stderr,
    `subtee: cannot start ${agent}: a part of its path is a file, not a folder [ERR_COMMAND]\n`,
  );
  assert.equal(existsSync(out), false, 'no folder left behind');
  const asked = spawnSync(process.execPath, [BIN, 'run', '--require-version', '>=1', '--', agent], {
    encoding: 'utf8',
  });
  assert.equal(asked.status, 4, asked.stderr);
  assert.match(asked.stderr, /\(cannot run .*agent --version: a part of its path is a file, not a folder\)/);
});

/** Pids of running (not zombie) processes whose command line holds `marker`. */
function runningWith(marker: string): number[] {
  const ps = spawnSync('ps', ['-eo', 'pid=,stat=,args='], { encoding: 'utf8' }).stdout;
  return ps
    .split('\n')
    .filter((l) => l.includes(marker) && !/^\s*\d+\s+Z/.test(l) && !l.includes('ps -eo'))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
}

describeWithClaude('subtee run with the real Claude Code', (apiUrl) => {
  test('Claude Code without --verbose prints nothing: piped into subtee ' +
    'exit 3 (INPUT_EMPTY); under subtee run its own exit 1, said', () => {
    const { argv, env, cleanup } = claudeCommand({ prompt: 'SCRIPT:say:hi', apiUrl: apiUrl() });
    try {
      const plain = argv.filter((a) => a !== '--verbose');
      const quoted = plain.map((a) => `'${a.replaceAll("'", `'\\''`)}'`).join(' ');
      const piped = spawnSync(
        'bash',
        ['-c', `${quoted} | "${process.execPath}" "${BIN}" --out "${join(tmpDir(), 'p')}"; ` +
          'exit ${PIPESTATUS[1]}'],
        { env, cwd: env.SUBTEE_E2E_CWD, encoding: 'utf8', timeout: 60_000 },
      );
      assert.equal(piped.status, 3, piped.stderr);
      assert.match(piped.stderr, /requires --verbose/, "Claude Code's own error passes through");
      assert.match(piped.stderr, /subtee: the input held no lines: .* \[INPUT_EMPTY\]\n$/);
      const run = spawnSync(process.execPath, [BIN, 'run', '--out', join(tmpDir(), 'r'), '--', ...plain], {
        env,
        cwd: env.SUBTEE_E2E_CWD,
        encoding: 'utf8',
        timeout: 60_000,
      });
      assert.equal(run.status, 1, run.stderr);
      assert.match(run.stderr, /claude printed no lines on stdout: .* \[INPUT_EMPTY\]\n$/);
    } finally {
      cleanup();
    }
  });

  test('SIGINT while Claude Code runs a long Bash command: exit ' +
    '130, and neither it nor the command outlives subtee', async () => {
    const out = join(tmpDir(), 'o');
    // A Bash command silent for ten minutes, its own node process, recognisable by its text.
    const ms = 600_000 + Math.floor(Math.random() * 1000);
    const marker = `slept ${ms}`;
    const { argv, env, cleanup } = claudeCommand({ prompt: `SCRIPT:bash:${ms}:900000`, apiUrl: apiUrl() });
    const child = spawn(
      process.execPath,
      [BIN, 'run', '--out', out, '-q', '--stdout', 'none', '--kill-grace-ms', '2000', '--', ...argv],
      { env, cwd: env.SUBTEE_E2E_CWD, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const closed = new Promise<number | null>((r) => child.on('close', r));
    try {
      await waitFor(() => runningWith(marker).length > 0, 'the Bash command to run', 90_000);
      strays.push(...runningWith(marker), ...runningWith(`SCRIPT:bash:${ms}`));
      child.kill('SIGINT');
      const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 30_000).unref());
      const result = await Promise.race([closed, timeout]);
      if (result === 'timeout') child.kill('SIGKILL');
      assert.equal(result, 130, stderr);
      assert.deepEqual(runningWith(marker), [], 'the Bash command is gone');
      assert.deepEqual(runningWith(`SCRIPT:bash:${ms}`), [], 'Claude Code is gone');
      const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      assert.equal(index.interrupted, true);
      assert.equal(index.command.name, argv[0]);
    } finally {
      cleanup();
    }
  });
});

for (const [sig, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const) {
test(
  `${sig} while Codex runs a long command: exit ${code}, and neither Codex (a native binary) ` +
    'nor the command outlives subtee',
  { skip: !codexAvailable() && 'the Codex CLI and its platform binary are not installed' },
  async () => {
    const api = await startFakeResponses();
    const ms = 600_000 + Math.floor(Math.random() * 1000);
    const marker = `slept ${ms}`;
    const { argv, env, cwd, cleanup } = codexCommand({ prompt: `SCRIPT:long:${ms}`, apiUrl: api.url });
    const out = join(tmpDir(), 'o');
    const child = spawn(
      process.execPath,
      [BIN, 'run', '--out', out, '-q', '--stdout', 'none', '--kill-grace-ms', '2000', '--', ...argv],
      { env, cwd, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const closed = new Promise<number | null>((r) => child.on('close', r));
    try {
      await waitFor(() => runningWith(marker).length > 0, 'the command to run', 90_000);
      const codex = runningWith(`SCRIPT:long:${ms}`);
      assert.ok(codex.length > 0, 'Codex runs');
      strays.push(...runningWith(marker), ...codex);
      child.kill(sig);
      const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 30_000).unref());
      const result = await Promise.race([closed, timeout]);
      if (result === 'timeout') child.kill('SIGKILL');
      assert.equal(result, code, stderr);
      assert.deepEqual(runningWith(marker), [], 'the command is gone');
      assert.deepEqual(runningWith(`SCRIPT:long:${ms}`), [], 'Codex is gone');
      assert.equal(JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')).interrupted, true);
    } finally {
      cleanup();
      await api.close();
    }
  },
);
}
