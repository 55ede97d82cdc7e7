import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { describeWithClaude } from './e2e/claude.js';
import { subteeRunsClaude } from './e2e/pipe.js';
import { checkOutput, linesOf, tmpDir, BIN } from './helpers/helpers.js';

/**
 * The idle watchdog on live runs of the real Claude Code CLI: silences that the agent's own
 * tools and model allow ride through, real hangs are still stopped. The idle timeout is
 * short against each silence but long enough for the CLI's own start on a loaded machine
 * (about 6 s before its first line), when nothing is in flight yet. The runs spend most of
 * their time waiting out those silences, so three go at once.
 */
const IDLE_MS = 10_000;
const SILENT_MS = 22_000;

/** Lines of the stream with this `type`, parsed. */
const linesOfType = (raw: Buffer, type: string) =>
  linesOf(raw)
    .map((line) => JSON.parse(line))
    .filter((value) => value.type === type);

describeWithClaude('the idle watchdog on live runs', (apiUrl) => {
  /** `subtee run --idle-timeout-ms IDLE_MS [args] -- claude -p PROMPT`, checked for conservation. */
  async function run(prompt: string, args: string[] = [], partial = false) {
    const out = join(tmpDir(), 'out');
    const result = await subteeRunsClaude(
      BIN,
      { prompt, apiUrl: apiUrl(), partial },
      out,
      ['--idle-timeout-ms', String(IDLE_MS), ...args],
      120_000,
    );
    const { index } = checkOutput(result.raw, out, prompt);
    return { ...result, index };
  }

  test('a foreground command silent past the idle timeout, ' +
    'within its declared timeout, rides through', async () => {
    const r = await run(`SCRIPT:bash:${SILENT_MS}:85000`);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /STALL/);
    assert.equal(r.index.stalled, false);
    assert.equal(r.index.stall, null);
    const results = linesOfType(r.raw, 'user')
      .flatMap((u) => u.message.content)
      .filter((b: any) => b.type === 'tool_result');
    assert.match(JSON.stringify(results), new RegExp(`slept ${SILENT_MS}`), 'the command ran to its end');
  });

  test('a command outliving its declared timeout is cut short by Claude Code; the run goes on', async () => {
    const r = await run(`SCRIPT:bash:${SILENT_MS}:3000`);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /STALL/);
    const results = linesOfType(r.raw, 'user')
      .flatMap((u) => u.message.content)
      .filter((b: any) => b.type === 'tool_result');
    assert.match(JSON.stringify(results), /did not complete within its 3s timeout/);
  });

  test('an API slow before its first byte rides through up to the model allowance', async () => {
    const r = await run(`SCRIPT:late:${SILENT_MS}`);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /STALL/);
    assert.ok(r.ms > SILENT_MS, `the API was silent for ${SILENT_MS} ms (run took ${r.ms} ms)`);
  });

  test('an API silent past the model allowance is a hang: the CLI is stopped, exit 124', async () => {
    const r = await run('SCRIPT:hang', [
      '--model-timeout-ms',
      '14000',
      '--stall-grace-ms',
      '0',
      '--kill-grace-ms',
      '1000',
    ]);
    assert.equal(r.code, 124, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(
        String.raw`warning STALL: no input for [\d.]+ s \(allowed 14(\.0+)? s\): ` +
          String.raw`model request silent [\d.]+ s of its allowed 14 s in main`,
      ),
    );
    assert.equal(r.index.stall.allowedMs, 14_000);
    assert.deepEqual(
      r.index.stall.waitingOn.map((w: any) => [w.kind, w.what, w.channel]),
      [['model', 'model request', 'main']],
    );
    assert.ok(r.index.stall.silenceMs > 14_000);
  });

  test('a foreground subagent whose own command runs long rides through', async () => {
    const r = await run(`SCRIPT:fgbash:${SILENT_MS}:85000`);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /STALL/);
    const sub = r.index.channels.find((c: any) => c.id !== null);
    assert.equal(sub.status, 'completed');
    assert.equal(sub.background, false);
  });

  test('with partial messages, deltas that stop mid-message are a hang after the idle timeout', async () => {
    const r = await run('SCRIPT:cut', ['--kill-grace-ms', '1000'], true);
    assert.equal(r.code, 124, r.stderr);
    assert.match(r.stderr, /message stream silent \d+(\.\d+)? s of its allowed 10 s in main/);
    assert.equal(r.index.stall.allowedMs, IDLE_MS);
    assert.ok(r.ms < 60_000, `stopped in ${r.ms} ms, long before the model allowance`);
  });
}, { concurrency: 3 });
