import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { describeCli } from './e2e/cli-suite.js';
import { startFakeGemini } from './e2e/fake-gemini.js';
import { GEMINI, geminiAvailable, geminiCommand } from './e2e/gemini.js';
import { readGemini } from './e2e/other-reader.js';
import { GEMINI_SCENARIOS } from './e2e/other-scenarios.js';
import { subteeRunsCli } from './e2e/pipe-cli.js';
import { BIN, tmpDir } from './helpers/helpers.js';

const skip = !geminiAvailable() && 'the Gemini CLI is not installed (`npm test` installs it)';

describeCli({
  format: 'gemini',
  title: 'Gemini CLI',
  skip,
  executable: GEMINI,
  versionOf: (printed) => (/^\d+\.\d+\.\d+$/.test(printed) ? printed : null),
  startApi: startFakeGemini,
  command: geminiCommand,
  read: readGemini,
  scenarios: GEMINI_SCENARIOS,
  wrappedScenario: 'unknown-subagent',
  wrappedTitle: 'subtee run -- gemini -p',
});

describe('real Gemini CLI under subtee run: the idle watchdog', { skip }, () => {
  test('a subagent silent past the idle and model allowances (its steps are not in the stream) ' +
    'rides through under the tool allowance', { timeout: 120_000 }, async () => {
    const api = await startFakeGemini();
    try {
      const out = join(tmpDir(), 'out');
      // The subagent's one command sleeps 12 s: the parent's stream is silent all that time.
      const command = geminiCommand({ prompt: 'SCRIPT:spawn:slow.12', apiUrl: api.url });
      const limits = ['--idle-timeout-ms', '8000', '--model-timeout-ms', '1000', '--stall-grace-ms', '0'];
      const r = await subteeRunsCli(BIN, command, out, [...limits, '--tool-timeout-ms', '60000']);
      assert.equal(r.code, 0, r.stderr);
      const events = r.raw.toString('utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
      const at = (type: string) => Date.parse(events.find((e) => e.type === type).timestamp);
      assert.ok(at('tool_result') - at('tool_use') >= 12_000, 'the stream was silent while the subagent ran');
      const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      assert.equal(index.stalled, false);
      assert.deepEqual(
        index.channels.map((c: { status: string }) => c.status),
        ['completed', 'completed'],
      );
    } finally {
      await api.close();
    }
  });
});
