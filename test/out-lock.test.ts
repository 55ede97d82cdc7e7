import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { runChain } from '../src/chain/chain.js';
import { createFilesSink } from '../src/chain/sinks/files.js';
import { OUT_LOCK_NAME } from '../src/chain/sinks/out-lock.js';
import { Session } from '../src/model/session.js';
import { BIN, checkOutput, chunked, FIXTURES, readTree, tmpDir } from './helpers/helpers.js';
import { until } from './helpers/projection-runs.js';

const recording = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'));
const firstLine = recording.subarray(0, recording.indexOf(0x0a) + 1);

/** Runs the tests hold open: stopped at the end, so a failed test does not leave one waiting. */
const live = new Set<ChildProcess>();
after(() => {
  for (const child of live) child.kill('SIGKILL');
});

/**
 * A run into `out` whose stdin the test holds: it has its first line filed (the folder is
 * locked and written, and nothing more is written until more input comes) when this resolves,
 * and ends when `finish` hands it the rest.
 */
async function liveRun(out: string, args: string[] = []) {
  const child = spawn(process.execPath, [BIN, '--out', out, '-q', '--stdout', 'none', ...args], {
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  let stderr = '';
  child.stderr!.on('data', (c) => (stderr += c));
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  child.stdin!.write(firstLine);
  // The line is filed once main.jsonl has it and main.log its header (written just after).
  const bytesOf = (name: string) => (existsSync(join(out, name)) ? readFileSync(join(out, name)) : null);
  const filed = () =>
    bytesOf('main.jsonl')?.includes(0x0a) === true && (bytesOf('main.log')?.length ?? 0) > 0;
  let gone = false;
  void exited.then(() => (gone = true));
  await until(() => gone || filed());
  assert.ok(!gone, `the run into ${out} ended before its first line: ${stderr}`);
  return {
    child,
    exited,
    stderr: () => stderr,
    async finish() {
      child.stdin!.end(recording.subarray(firstLine.length));
      const [code] = await exited;
      assert.equal(code, 0, stderr);
    },
  };
}

/** Every entry of the folder, hidden ones too, with its bytes. */
function snapshot(out: string): Map<string, string> {
  const entries = new Map<string, string>();
  for (const [path, bytes] of readTree(out)) entries.set(path, bytes.toString('hex'));
  for (const name of readdirSync(out)) if (!entries.has(name)) entries.set(name, '(folder)');
  return entries;
}

const subtee = (args: string[], input: Buffer | string = recording) =>
  spawnSync(process.execPath, [BIN, ...args], { input, encoding: 'utf8' });

/** The pid of a process that has ended. */
function deadPid(): number {
  const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
    encoding: 'utf8',
  });
  return Number(gone.stdout);
}

test('a second run into a folder a live run is writing is refused with ERR_OUT_BUSY and writes ' +
  'nothing, with or without --force', async () => {
  const out = join(tmpDir(), 'logs');
  const first = await liveRun(out);
  const pid = first.child.pid!;
  const before = snapshot(out);
  assert.ok(before.has(OUT_LOCK_NAME), 'the live run holds the folder');
  for (const force of [[], ['--force']]) {
    const second = subtee(['--out', out, '-q', ...force]);
    assert.equal(second.status, 3, second.stderr);
    const busy = `^subtee: --out \\S+ is being written by another subtee run \\(pid ${pid}\\); `;
    assert.match(second.stderr, new RegExp(`${busy}.*\\[ERR_OUT_BUSY\\]\n$`));
    assert.deepEqual(snapshot(out), before, `${force.join('') || 'no --force'}: the folder is as it was`);
  }
  // A program's files sink shares the check.
  const sink = () => createFilesSink({ out, force: true, session: new Session() });
  assert.throws(sink, { code: 'ERR_OUT_BUSY' });
  // Several inputs: every folder is checked before the first input is read.
  const parent = tmpDir();
  const held = await liveRun(join(parent, 'b'));
  const inputs = join(tmpDir(), 'inputs');
  mkdirSync(inputs);
  for (const name of ['a.jsonl', 'b.jsonl']) writeFileSync(join(inputs, name), recording);
  const series = subtee(['--out', parent, '-q', '--force', join(inputs, 'a.jsonl'), join(inputs, 'b.jsonl')]);
  assert.equal(series.status, 3, series.stderr);
  assert.match(series.stderr, /b is being written by another subtee run .*\[ERR_OUT_BUSY\]\n$/);
  assert.ok(!existsSync(join(parent, 'a')), 'no input was read');
  await held.finish();
  await first.finish();
  checkOutput(recording, out, 'the first run');
});

test('a lock left by a run that was killed (SIGKILL) does not hold the folder: --force takes it ' +
  'over', async () => {
  const out = join(tmpDir(), 'logs');
  const killed = await liveRun(out);
  killed.child.kill('SIGKILL');
  await killed.exited;
  assert.ok(existsSync(join(out, OUT_LOCK_NAME)), 'the killed run left its lock');
  const refused = subtee(['--out', out, '-q']);
  assert.equal(refused.status, 3, refused.stderr);
  assert.match(refused.stderr, /already holds files.*\[ERR_OUT_NOT_EMPTY\]\n$/);
  const forced = subtee(['--out', out, '-q', '--force', '--stdout', 'none']);
  assert.equal(forced.status, 0, forced.stderr);
  checkOutput(recording, out, 'forced over a stale lock');
  assert.ok(!existsSync(join(out, OUT_LOCK_NAME)), 'the forced run let go of the lock it took over');
  // A link planted under the lock's name is removed, never followed or written through.
  const target = join(tmpDir(), 'target');
  writeFileSync(target, JSON.stringify({ pid: process.pid }));
  symlinkSync(target, join(out, OUT_LOCK_NAME));
  const overLink = subtee(['--out', out, '-q', '--force', '--stdout', 'none']);
  assert.equal(overLink.status, 0, overLink.stderr);
  assert.equal(readFileSync(target, 'utf8'), JSON.stringify({ pid: process.pid }));
  assert.ok(!existsSync(join(out, OUT_LOCK_NAME)));
});

test('a lock from another host is taken to hold the folder, and the refusal says so', () => {
  const out = tmpDir();
  writeFileSync(join(out, OUT_LOCK_NAME), JSON.stringify({ pid: deadPid(), host: 'elsewhere.invalid' }));
  const refused = subtee(['--out', out, '-q', '--force']);
  assert.equal(refused.status, 3, refused.stderr);
  const why = /\(pid \d+ on host elsewhere\.invalid\); it cannot be checked from this host; /;
  assert.match(refused.stderr, why);
  assert.match(refused.stderr, /remove \S+\.subtee-lock \[ERR_OUT_BUSY\]\n$/);
});

test('the lock is gone once the run ends (normal end, a failure, SIGINT)', async () => {
  const lockOf = (out: string) => join(out, OUT_LOCK_NAME);
  const ended = join(tmpDir(), 'ended');
  const normal = subtee(['--out', ended, '-q', '--stdout', 'none']);
  assert.equal(normal.status, 0, normal.stderr);
  assert.ok(!existsSync(lockOf(ended)), 'normal end');

  // Input that breaks off (a gzip stream cut short) fails the run after what was read is filed.
  const failed = join(tmpDir(), 'failed');
  const gz = gzipSync(recording);
  const broken = subtee(['--out', failed, '-q', '--stdout', 'none'], gz.subarray(0, gz.length - 20));
  assert.equal(broken.status, 3, broken.stderr);
  assert.ok(existsSync(join(failed, 'index.json')), broken.stderr);
  assert.ok(!existsSync(lockOf(failed)), 'a failure');

  const interrupted = join(tmpDir(), 'interrupted');
  const run = await liveRun(interrupted);
  assert.ok(existsSync(lockOf(interrupted)));
  run.child.kill('SIGINT');
  const [code] = await run.exited;
  assert.equal(code, 130, run.stderr());
  assert.equal(JSON.parse(readFileSync(join(interrupted, 'index.json'), 'utf8')).interrupted, true);
  assert.ok(!existsSync(lockOf(interrupted)), 'SIGINT');

  // The folder is free again: a forced run is not refused.
  const again = subtee(['--out', interrupted, '-q', '--force', '--stdout', 'none']);
  assert.equal(again.status, 0, again.stderr);

  // A program's runs, whose process goes on: each lets go of the folder as it ends.
  const lib = join(tmpDir(), 'lib');
  const spec = (force: boolean) => ({
    stages: [{ use: 'line-parser' }, { use: 'channel-router' }],
    sinks: [{ use: 'files', out: lib, force }],
  });
  await runChain(chunked([recording]), spec(false));
  assert.ok(!existsSync(lockOf(lib)), "a program's run");
  const breaking = Readable.from(
    (async function* () {
      yield firstLine;
      throw new Error('the input broke');
    })(),
  );
  await assert.rejects(runChain(breaking, spec(true)), /the input broke/);
  assert.ok(!existsSync(lockOf(lib)), "a program's failed run");
  await runChain(chunked([recording]), spec(true));
});

/** An agent that marks it started, then prints the recording. */
function markingAgent(): { agent: string; started: string } {
  const dir = tmpDir();
  const agent = join(dir, 'agent.sh');
  const started = join(dir, 'started');
  writeFileSync(agent, `#!/bin/sh\ntouch "${started}"\ncat "${join(FIXTURES, 'nested-depth-3.jsonl')}"\n`);
  chmodSync(agent, 0o755);
  return { agent, started };
}

test('subtee run refused for a busy folder starts no command', async () => {
  const out = join(tmpDir(), 'logs');
  const first = await liveRun(out);
  const before = snapshot(out);
  for (const force of [[], ['--force']]) {
    const { agent, started } = markingAgent();
    const r = subtee(['run', '--out', out, '-q', ...force, '--', agent], '');
    assert.equal(r.status, 3, r.stderr);
    assert.match(r.stderr, /^subtee: .* is being written by another subtee run .*\[ERR_OUT_BUSY\]\n$/);
    assert.ok(!existsSync(started), `${force.join('') || 'no --force'}: the command never started`);
    assert.deepEqual(snapshot(out), before);
  }
  await first.finish();
  const { agent, started } = markingAgent();
  const freed = subtee(['run', '--out', out, '-q', '--force', '--stdout', 'none', '--', agent], '');
  assert.equal(freed.status, 0, freed.stderr);
  assert.ok(existsSync(started), 'once the folder is free, the command runs');
});

test("readers of a folder (report, stats) take no notice of a run's lock", () => {
  const out = join(tmpDir(), 'logs');
  assert.equal(subtee(['--out', out, '-q', '--stdout', 'none']).status, 0);
  writeFileSync(join(out, OUT_LOCK_NAME), JSON.stringify({ pid: deadPid(), host: 'x' }));
  const report = subtee(['report', out], '');
  assert.equal(report.status, 0, report.stderr);
  const stats = subtee(['stats', out], '');
  assert.equal(stats.status, 0, stats.stderr);
  assert.doesNotMatch(report.stderr + stats.stdout + stats.stderr, /subtee-lock/);
});
