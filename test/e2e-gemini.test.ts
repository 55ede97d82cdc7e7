import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { GEMINI, geminiAvailable, geminiCommand } from './e2e/gemini.js';
import { startFakeGemini, type FakeGemini } from './e2e/fake-gemini.js';
import { checkConservation, checkIndex, checkScenario } from './e2e/other-check.js';
import { readGemini } from './e2e/other-reader.js';
import { GEMINI_SCENARIOS } from './e2e/other-scenarios.js';
import { pipeCliIntoSubtee, subteeRunsCli } from './e2e/pipe-cli.js';
import { BIN, FIXTURES, tmpDir } from './helpers.js';

const RECORDINGS = join(FIXTURES, 'other-agents', 'gemini');

describe(
  'real Gemini CLI piped into subtee',
  {
    skip:
      !geminiAvailable() && 'the Gemini CLI is not installed (npm ci installs it)',
  },
  () => {
    let api: FakeGemini;
    before(async () => {
      api = await startFakeGemini();
    });
    after(async () => {
      await api?.close();
    });

    for (const s of GEMINI_SCENARIOS) {
      test(`${s.name}: channels, statuses, tool calls and usage; every line kept once`, async () => {
        const out = join(tmpDir(), 'out');
        const r = await pipeCliIntoSubtee(BIN, geminiCommand({ prompt: s.prompt, apiUrl: api.url }), out, [
          '--input-format',
          'gemini',
        ]);
        assert.equal(r.cliCode, 0, r.cliStderr);
        assert.equal(r.subteeCode, 0, r.subteeStderr);
        const reading = readGemini(r.raw);
        checkScenario(reading, s);
        const index = checkConservation(reading, out, s.name);
        checkIndex(index, reading, 'gemini', s.name);
      });
    }

    test('subtee run -- gemini -p: recognised without --input-format', async () => {
      const out = join(tmpDir(), 'out');
      const s = GEMINI_SCENARIOS.find((x) => x.name === 'unknown-subagent')!;
      const r = await subteeRunsCli(BIN, geminiCommand({ prompt: s.prompt, apiUrl: api.url }), out);
      assert.equal(r.code, 0, r.stderr);
      const reading = readGemini(r.raw);
      checkScenario(reading, s);
      checkIndex(checkConservation(reading, out, s.name), reading, 'gemini', s.name);
    });

    // Neither stream states a version: `subtee run` asks the command, and that stands.
    test('--require-version is checked against what `gemini --version` prints', async () => {
      const printed = execFileSync(GEMINI, ['--version'], { encoding: 'utf8' }).trim();
      assert.match(printed, /^\d+\.\d+\.\d+$/);
      const version = printed;
      const ok = await subteeRunsCli(
        BIN,
        geminiCommand({ prompt: 'SCRIPT:say', apiUrl: api.url }),
        join(tmpDir(), 'out'),
        ['--require-version', `>=${version} <=${version}`],
      );
      assert.equal(ok.code, 0, ok.stderr);
      const refused = await subteeRunsCli(
        BIN,
        geminiCommand({ prompt: 'SCRIPT:say', apiUrl: api.url }),
        join(tmpDir(), 'out'),
        ['--require-version', `>${version}`],
      );
      assert.equal(refused.code, 4, refused.stderr);
      assert.match(refused.stderr, new RegExp(`${version.replace(/\./g, '\\.')}.*ERR_VERSION`));
    });
  },
);

describe('recorded Gemini CLI streams (test/fixtures/other-agents/gemini)', () => {
  const files = readdirSync(RECORDINGS)
    .filter((f) => f.endsWith('.jsonl'))
    .sort();

  test('one recording per scenario, each showing what the scenario scripted', () => {
    assert.deepEqual(files, GEMINI_SCENARIOS.map((s) => `${s.name}.jsonl`).sort());
    for (const s of GEMINI_SCENARIOS)
      checkScenario(readGemini(readFileSync(join(RECORDINGS, `${s.name}.jsonl`))), s);
  });

  for (const file of files) {
    test(`${file}: index.json agrees with the independent reading; every line kept once`, () => {
      const out = join(tmpDir(), 'out');
      const bytes = readFileSync(join(RECORDINGS, file));
      const r = spawnSync(
        process.execPath,
        [BIN, '--out', out, '--stdout', 'none', '-q', join(RECORDINGS, file)],
        { encoding: 'utf8' },
      );
      assert.equal(r.status, 0, r.stderr);
      const reading = readGemini(bytes);
      checkIndex(checkConservation(reading, out, file), reading, 'gemini', file);
    });
  }
});
