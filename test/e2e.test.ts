import assert from 'node:assert/strict';
import { execSync, spawn, spawnSync } from 'node:child_process';
import { createReadStream, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { test } from 'node:test';
import { open } from '../src/index.js';
import { claudeCommand, describeWithClaude } from './e2e/claude.js';
import { pipeClaudeIntoSubtee, subteeRunsClaude } from './e2e/pipe.js';
import { SCENARIOS } from './e2e/scenarios.js';
import {
  BIN,
  checkDetails,
  checkOutput,
  FIXTURES as ROOT_FIXTURES,
  fixtureFiles,
  tmpDir,
} from './helpers/helpers.js';
import { checkCollected, collect } from './helpers/projection-check.js';

describeWithClaude('real Claude Code CLI piped into subtee', (apiUrl) => {
  for (const s of SCENARIOS) {
    test(s.name, async () => {
      const out = join(tmpDir(), 'out');
      const r = await pipeClaudeIntoSubtee(
        BIN,
        { prompt: s.prompt, apiUrl: apiUrl(), forward: s.forward, partial: s.partial },
        out,
      );
      assert.equal(r.claudeCode, 0, r.claudeStderr);
      assert.equal(r.subteeCode, 0, r.subteeStderr);
      const { index, expected } = checkOutput(r.raw, out, s.name);
      checkDetails(index, expected, s.name);
      const subs = index.channels.filter((c: any) => c.id !== null);
      assert.equal(subs.length, s.expect.subagents, 'subagents');
      assert.equal(Math.max(...subs.map((c: any) => c.depth)), s.expect.maxDepth, 'max depth');
      assert.ok(
        subs.every((c: any) => c.depth >= 1 && !c.orphan),
        'every subagent placed in the tree',
      );
      assert.equal(subs.filter((c: any) => c.status === 'completed').length, s.expect.completed, 'completed');
      assert.equal(subs.filter((c: any) => c.status === 'failed').length, s.expect.failed, 'failed');
      assert.equal(index.channels[0].status, 'completed', 'main');
      assert.equal(index.claude_code_version, '2.1.328');
    });
  }

  for (const s of SCENARIOS) {
    test(`${s.name}: the library projection, live on the CLI's stdout, equals a plain reading`, async () => {
      const { argv, env, cleanup } = claudeCommand({
        prompt: s.prompt,
        apiUrl: apiUrl(),
        forward: s.forward,
        partial: s.partial,
      });
      try {
        const claude = spawn(argv[0], argv.slice(1), {
          env,
          cwd: env.SUBTEE_E2E_CWD,
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        const raw: Buffer[] = [];
        claude.stdout.on('data', (chunk: Buffer) => raw.push(chunk));
        const exited = new Promise((resolve) => claude.on('close', resolve));
        const run = open(claude.stdout, { out: join(tmpDir(), 'out') });
        // Read while the CLI runs; checked against the captured bytes once it is done.
        const live = await collect(run);
        assert.equal(await exited, 0);
        const { subagents } = await checkCollected(Buffer.concat(raw).toString('utf8'), live);
        assert.equal(subagents, s.expect.subagents);
      } finally {
        cleanup();
      }
    });
  }

  test('a background subagent silent for longer than the idle timeout is not a hang', async () => {
    const out = join(tmpDir(), 'out');
    // The idle timeout must outlast the CLI's own start (about 6 s before its first line on a
    // loaded 2-core machine, when nothing is in the background yet); the worker's silence is
    // twice the timeout.
    const r = await subteeRunsClaude(
      BIN,
      { prompt: 'SCRIPT:quiet:24000', apiUrl: apiUrl() },
      out,
      ['--idle-timeout-ms', '12000'],
      120_000,
    );
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /STALL/);
    assert.ok(r.ms > 24_000, `the worker was silent for 24 s (run took ${r.ms} ms)`);
    const { index, expected } = checkOutput(r.raw, out, 'quiet background worker');
    checkDetails(index, expected, 'quiet background worker');
    assert.equal(index.stalled, false);
    assert.deepEqual(
      index.channels.map((c: any) => c.status),
      ['completed', 'completed'],
    );
  });

  test('a hung API under subtee run: stall reported, the CLI stopped, exit 124', async () => {
    const out = join(tmpDir(), 'out');
    const r = await subteeRunsClaude(BIN, { prompt: 'SCRIPT:hang', apiUrl: apiUrl() }, out, [
      '--idle-timeout-ms',
      '1500',
      '--model-timeout-ms',
      '1500',
      '--stall-grace-ms',
      '0',
      '--kill-grace-ms',
      '1000',
    ]);
    assert.equal(r.code, 124, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(
        String.raw`warning STALL: no input for [\d.]+ s \(allowed 1\.50* s\): ` +
          String.raw`model request silent [\d.]+ s of its allowed 1\.5 s in main`,
      ),
    );
    assert.ok(r.ms < 20_000, `stopped in ${r.ms} ms`);
    const { index } = checkOutput(r.raw, out, 'hung API');
    assert.equal(index.stalled, true);
    assert.equal(index.channels[0].status, 'running');
    assert.equal(
      execSync(`ps -eo args | grep -c "[S]CRIPT:hang" || true`, { encoding: 'utf8' }).trim(),
      '0',
      'the CLI is gone',
    );
  });

  test('a hung API on a pipe: exit 124', async () => {
    const out = join(tmpDir(), 'out');
    const r = await pipeClaudeIntoSubtee(
      BIN,
      { prompt: 'SCRIPT:hang', apiUrl: apiUrl() },
      out,
      ['--idle-timeout-ms', '1500', '--model-timeout-ms', '1500', '--stall-grace-ms', '0'],
      15_000,
    );
    assert.equal(r.subteeCode, 124, r.subteeStderr);
    assert.match(r.subteeStderr, /STALL/);
    assert.equal(JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')).stalled, true);
  });
});

test('recorded CLI streams: usage, counts, background and summary match the independent reading', () => {
  for (const file of fixtureFiles()) {
    const out = join(tmpDir(), 'out');
    const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '-q', file], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(r.status, 0, r.stderr);
    const { index, expected } = checkOutput(readFileSync(file), out, basename(file));
    checkDetails(index, expected, basename(file));
    assert.ok(
      index.channels.some((c: any) => c.usage.output_tokens > 0),
      `${basename(file)}: has usage to compare`,
    );
  }
});

test("a main Bash silent past 30 s (recorded): its heartbeat is main's line, no subagent, no status", () => {
  const file = join(ROOT_FIXTURES, 'long-bash-heartbeat.jsonl');
  const heartbeats = readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.includes('"heartbeat":true'));
  assert.equal(heartbeats.length, 1, 'the recording has the heartbeat');
  const out = join(tmpDir(), 'out');
  const r = spawnSync(process.execPath, [BIN, '--out', out, '-q', file], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(r.status, 0, r.stderr);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.deepEqual(
    index.channels.map((c: any) => [c.id, c.status]),
    [[null, 'completed']],
  );
  assert.ok(readFileSync(join(out, 'main.jsonl'), 'utf8').includes(heartbeats[0]));
  assert.doesNotMatch(r.stdout, /\[status\]|agent·/);
});

test('a helper reporting 25 s after its spawn (recorded): 25 s in index.json, stats, library', async () => {
  const file = join(ROOT_FIXTURES, 'slow-background-helper.jsonl');
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l));
  // An independent reading: the spawn line's time, and the latest time before its notification.
  const spawnLine = lines.find((v) => v.message?.content?.some((b: any) => b.name === 'Agent'));
  const id = spawnLine.message.content.find((b: any) => b.name === 'Agent').id;
  const report = lines.findIndex((v) => v.subtype === 'task_notification' && v.tool_use_id === id);
  const reportedAt = lines
    .slice(0, report)
    .filter((v) => typeof v.timestamp === 'string')
    .at(-1).timestamp;
  const expected = Date.parse(reportedAt) - Date.parse(spawnLine.timestamp);
  assert.ok(expected >= 25_000, `${expected} ms`);
  const own = lines.filter((v) => v.parent_tool_use_id === id && v.timestamp);
  assert.ok(Date.parse(own.at(-1).timestamp) - Date.parse(own[0].timestamp) < 1000, 'its lines are close');

  const out = join(tmpDir(), 'out');
  const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '-q', file], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  const helper = index.channels.find((c: any) => c.id === id);
  assert.deepEqual(
    [helper.started_at, helper.ended_at, helper.elapsed_ms],
    [spawnLine.timestamp, reportedAt, expected],
  );
  const stats = spawnSync(process.execPath, [BIN, 'stats', out, '--json'], { encoding: 'utf8' });
  assert.equal(stats.status, 0, stats.stderr);
  const costliest = JSON.parse(stats.stdout).costliest.find((s: any) => s.channel === id);
  assert.equal(costliest.elapsed_ms, expected);
  const run = open(createReadStream(file), {});
  for await (const sub of run.subagents) {
    const outcome = await sub.outcome;
    assert.equal(outcome.elapsedMs, expected);
    assert.equal(outcome.startedAt, spawnLine.timestamp);
  }
  await run.done;
});
