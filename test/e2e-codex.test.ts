import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { CODEX, codexAvailable, codexCommand } from './e2e/codex.js';
import { describeCli } from './e2e/cli-suite.js';
import { startFakeResponses } from './e2e/fake-responses.js';
import { readCodex } from './e2e/other-reader.js';
import { CODEX_SCENARIOS } from './e2e/other-scenarios.js';
import { pipeCliIntoSubtee } from './e2e/pipe-cli.js';
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
