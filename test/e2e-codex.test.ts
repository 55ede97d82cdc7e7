import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CODEX, codexAvailable, codexCommand } from './e2e/codex.js';
import { startFakeResponses, type FakeResponses } from './e2e/fake-responses.js';
import { checkConservation, checkIndex, checkScenario } from './e2e/other-check.js';
import { readCodex } from './e2e/other-reader.js';
import { CODEX_SCENARIOS } from './e2e/other-scenarios.js';
import { pipeCliIntoSubtee, subteeRunsCli } from './e2e/pipe-cli.js';
import { BIN, FIXTURES, tmpDir } from './helpers.js';

const RECORDINGS = join(FIXTURES, 'other-agents', 'codex');

describe(
  'real Codex CLI piped into subtee',
  {
    skip:
      !codexAvailable() && 'the Codex CLI and its platform binary are not installed (.ci/run installs them)',
  },
  () => {
    let api: FakeResponses;
    before(async () => {
      api = await startFakeResponses();
    });
    after(async () => {
      await api?.close();
    });

    for (const s of CODEX_SCENARIOS) {
      test(`${s.name}: channels, statuses, tool calls and usage; every line kept once`, async () => {
        const out = join(tmpDir(), 'out');
        const r = await pipeCliIntoSubtee(BIN, codexCommand({ prompt: s.prompt, apiUrl: api.url }), out, [
          '--input-format',
          'codex',
        ]);
        assert.equal(r.cliCode, 0, r.cliStderr);
        assert.equal(r.subteeCode, 0, r.subteeStderr);
        const reading = readCodex(r.raw);
        checkScenario(reading, s);
        const index = checkConservation(reading, out, s.name);
        checkIndex(index, reading, 'codex', s.name);
      });
    }

    test('subtee run -- codex exec --json: recognised without --input-format', async () => {
      const out = join(tmpDir(), 'out');
      const s = CODEX_SCENARIOS.find((x) => x.name === 'failing-subagent')!;
      const r = await subteeRunsCli(BIN, codexCommand({ prompt: s.prompt, apiUrl: api.url }), out);
      assert.equal(r.code, 0, r.stderr);
      const reading = readCodex(r.raw);
      checkScenario(reading, s);
      checkIndex(checkConservation(reading, out, s.name), reading, 'codex', s.name);
    });

    // Neither stream states a version: `subtee run` asks the command, and that stands.
    test('--require-version is checked against what `codex --version` prints', async () => {
      const printed = execFileSync(CODEX, ['--version'], { encoding: 'utf8' }).trim();
      assert.match(printed, /^codex-cli \d+\.\d+\.\d+$/);
      const version = printed.split(' ')[1];
      const ok = await subteeRunsCli(
        BIN,
        codexCommand({ prompt: 'SCRIPT:say', apiUrl: api.url }),
        join(tmpDir(), 'out'),
        ['--require-version', `>=${version} <=${version}`],
      );
      assert.equal(ok.code, 0, ok.stderr);
      const refused = await subteeRunsCli(
        BIN,
        codexCommand({ prompt: 'SCRIPT:say', apiUrl: api.url }),
        join(tmpDir(), 'out'),
        ['--require-version', `>${version}`],
      );
      assert.equal(refused.code, 4, refused.stderr);
      assert.match(refused.stderr, new RegExp(`${version.replace(/\./g, '\\.')}.*ERR_VERSION`));
    });
  },
);

describe('recorded Codex CLI streams (test/fixtures/other-agents/codex)', () => {
  const files = readdirSync(RECORDINGS)
    .filter((f) => f.endsWith('.jsonl'))
    .sort();

  test('one recording per scenario, each showing what the scenario scripted', () => {
    assert.deepEqual(files, CODEX_SCENARIOS.map((s) => `${s.name}.jsonl`).sort());
    for (const s of CODEX_SCENARIOS)
      checkScenario(readCodex(readFileSync(join(RECORDINGS, `${s.name}.jsonl`))), s);
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
      const reading = readCodex(bytes);
      checkIndex(checkConservation(reading, out, file), reading, 'codex', file);
    });
  }
});
