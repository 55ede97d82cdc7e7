import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { CODEX, codexAvailable, codexCommand, type CliCommand } from './e2e/codex.js';
import { describeCli } from './e2e/cli-suite.js';
import { startFakeResponses } from './e2e/fake-responses.js';
import { readCodex } from './e2e/other-reader.js';
import { CODEX_SCENARIOS } from './e2e/other-scenarios.js';
import { pipeCliIntoSubtee, subteeRunsCli } from './e2e/pipe-cli.js';
import { BIN, tmpDir } from './helpers/helpers.js';

const skip =
  !codexAvailable() && 'the Codex CLI and its platform binary are not installed (.ci/run installs them)';

describeCli({
  format: 'codex',
  title: 'Codex CLI',
  skip,
  executable: CODEX,
  versionOf: (printed) => /^codex-cli (\d+\.\d+\.\d+)$/.exec(printed)?.[1] ?? null,
  startApi: startFakeResponses,
  command: codexCommand,
  read: readCodex,
  scenarios: CODEX_SCENARIOS,
  wrappedScenario: 'failing-subagent',
  wrappedTitle: 'subtee run -- codex exec --json',
});

describe('real Codex CLI whose API request fails', { skip }, () => {
  test("each top-level error is shown on main as [error] …; the turn's failure fails the run", async () => {
    const api = await startFakeResponses();
    try {
      const out = join(tmpDir(), 'out');
      const r = await pipeCliIntoSubtee(BIN, codexCommand({ prompt: 'SCRIPT:broken', apiUrl: api.url }), out);
      assert.equal(r.cliCode, 1, 'codex exits 1 on the failed request');
      assert.equal(r.subteeCode, 0, r.subteeStderr);
      const events = r.raw
        .toString('utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
      const errors = events.filter((ev) => ev.type === 'error').map((ev) => `[error] ${ev.message}`);
      assert.ok(errors.length >= 1, 'the CLI printed a top-level error');
      assert.match(errors.join('\n'), /scripted failure for this subagent/);
      const shown = readFileSync(join(out, 'main.log'), 'utf8').split('\n');
      for (const error of errors) assert.ok(shown.includes(error), `main.log shows ${error}`);
      const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      assert.equal(index.producer, 'codex');
      assert.equal(index.channels[0].status, 'failed');
    } finally {
      await api.close();
    }
  });
});

describe('real Codex CLI whose first model request is never answered', { skip }, () => {
  test('`subtee run` stops it at the stall, before its first turn\'s first item: the run is named ' +
    'by what it printed, a replay of that the same run; its turn.started was the model request ' +
    'the watchdog waited on', async () => {
    const api = await startFakeResponses();
    try {
      const out = join(tmpDir(), 'out');
      // The idle allowance covers the CLI's start, before its first line; the model request's is longer.
      const flags = ['--stall-grace-ms', '0', '--idle-timeout-ms', '8000', '--model-timeout-ms', '10000'];
      const command = codexCommand({ prompt: 'SCRIPT:silent', apiUrl: api.url });
      const r = await subteeRunsCli(BIN, command, out, flags);
      assert.equal(r.code, 124, r.stderr);
      const events = r.raw
        .toString('utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
      const turn = events.findIndex((e) => e.type === 'turn.started');
      assert.ok(turn > 0 && events[0].type === 'thread.started', `a thread and its turn: ${r.raw}`);
      assert.equal(events.length, turn + 1, 'nothing after the turn started');
      const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      assert.equal(index.producer, 'codex');
      assert.equal(index.stalled, true);
      assert.equal(index.stall.waitingOn[0]?.kind, 'model', JSON.stringify(index.stall));
      const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
      assert.match(index.run_id ?? '', uuid, 'named by what it printed');
      const again = join(tmpDir(), 'out');
      const replay = spawnSync(process.execPath, [BIN, '--out', again, '--stdout', 'none', '-q'], {
        input: r.raw,
      });
      assert.equal(replay.status, 0, String(replay.stderr));
      assert.equal(JSON.parse(readFileSync(join(again, 'index.json'), 'utf8')).run_id, index.run_id);
    } finally {
      await api.close();
    }
  });
});

describe('real Codex CLI resuming a thread (`codex exec resume`)', { skip }, () => {
  test('two runs of one thread are two runs (two run ids, both counted by subtee stats); a ' +
    'replay of either recording is the same run as it was live', async () => {
    const api = await startFakeResponses();
    const root = tmpDir();
    const first = codexCommand({ prompt: 'SCRIPT:shell:1', apiUrl: api.url, keepHome: true });
    try {
      const live = await pipeCliIntoSubtee(BIN, first, join(root, 'first'));
      assert.equal(live.subteeCode, 0, live.subteeStderr);
      const thread = JSON.parse(live.raw.toString('utf8').split('\n')[0]).thread_id as string;
      // The resume runs in the first run's CODEX_HOME, where the thread was kept.
      const next = codexCommand({ prompt: 'SCRIPT:shell:2', apiUrl: api.url });
      const argv = [...next.argv];
      argv.splice(argv.indexOf('exec') + 1, 0, 'resume');
      argv.splice(argv.length - 1, 0, thread);
      const resume: CliCommand = { ...next, argv, env: first.env };
      const resumed = await pipeCliIntoSubtee(BIN, resume, join(root, 'resumed'));
      assert.equal(resumed.subteeCode, 0, resumed.subteeStderr);
      const events = (raw: Buffer) =>
        raw.toString('utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
      assert.equal(events(resumed.raw)[0].thread_id, thread, 'the resume continues the thread');
      const runIdOf = (dir: string) => JSON.parse(readFileSync(join(root, dir, 'index.json'), 'utf8')).run_id;
      assert.notEqual(runIdOf('first'), runIdOf('resumed'));
      for (const [dir, raw] of [['first', live.raw], ['resumed', resumed.raw]] as const) {
        const args = [BIN, '--out', join(root, `${dir}-replay`), '--stdout', 'none', '-q'];
        const replay = spawnSync(process.execPath, args, { input: raw });
        assert.equal(replay.status, 0, String(replay.stderr));
        assert.equal(runIdOf(`${dir}-replay`), runIdOf(dir), `${dir}: the replay`);
      }
      // Counted here from the bytes: each turn's input and output tokens.
      const tokens = [live.raw, resumed.raw]
        .flatMap(events)
        .filter((e) => e.type === 'turn.completed')
        .reduce((n, e) => n + e.usage.input_tokens + e.usage.output_tokens, 0);
      const r = spawnSync(process.execPath, [BIN, 'stats', root, '--json'], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      const report = JSON.parse(r.stdout);
      assert.equal(report.runs, 2, 'each replay counted once with its live run, the two runs apart');
      assert.equal(report.total.tokens, tokens);
    } finally {
      rmSync(first.home, { recursive: true, force: true });
      await api.close();
    }
  });
});
