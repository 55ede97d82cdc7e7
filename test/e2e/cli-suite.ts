import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { CliCommand } from './codex.js';
import { checkConservation, checkIndex, checkScenario } from './other-check.js';
import type { Reading } from './other-reader.js';
import type { OtherScenario } from './other-scenarios.js';
import { pipeCliIntoSubtee, subteeRunsCli } from './pipe-cli.js';
import { BIN, FIXTURES, tmpDir } from '../helpers/helpers.js';

/** A CLI run headless against a stand-in API on loopback, as the end-to-end suites need it. */
export interface CliUnderTest {
  /** `codex`, `gemini`: the `--input-format` name and the fixtures folder. */
  format: string;
  /** Shown in the suites' names. */
  title: string;
  /** Why the live suite is skipped, or false when the CLI is installed. */
  skip: string | false;
  /** The CLI's executable, asked for `--version`. */
  executable: string;
  /** The version number in what `--version` prints, or null when it is not in the expected form. */
  versionOf: (printed: string) => string | null;
  startApi: () => Promise<{ url: string; close(): Promise<void> }>;
  command: (run: { prompt: string; apiUrl: string }) => CliCommand;
  read: (bytes: Buffer) => Reading;
  scenarios: readonly OtherScenario[];
  /** The scenario `subtee run -- …` is tried with. */
  wrappedScenario: string;
  wrappedTitle: string;
}

/**
 * The two suites each CLI gets: the real CLI piped into subtee and wrapped by `subtee run`,
 * then its recordings through subtee, each against an independent reading of the same bytes.
 */
export function describeCli(cli: CliUnderTest): void {
  const recordings = join(FIXTURES, 'other-agents', cli.format);

  describe(`real ${cli.title} piped into subtee`, { skip: cli.skip }, () => {
    let api: { url: string; close(): Promise<void> };
    before(async () => {
      api = await cli.startApi();
    });
    after(async () => {
      await api?.close();
    });

    for (const s of cli.scenarios) {
      test(`${s.name}: channels, statuses, tool calls and usage; every line kept once`, async () => {
        const out = join(tmpDir(), 'out');
        const command = cli.command({ prompt: s.prompt, apiUrl: api.url });
        const r = await pipeCliIntoSubtee(BIN, command, out, ['--input-format', cli.format]);
        assert.equal(r.cliCode, 0, r.cliStderr);
        assert.equal(r.subteeCode, 0, r.subteeStderr);
        const reading = cli.read(r.raw);
        checkScenario(reading, s);
        checkIndex(checkConservation(reading, out, s.name), reading, cli.format, s.name);
      });
    }

    test(`${cli.wrappedTitle}: recognised without --input-format`, async () => {
      const out = join(tmpDir(), 'out');
      const s = cli.scenarios.find((x) => x.name === cli.wrappedScenario)!;
      const r = await subteeRunsCli(BIN, cli.command({ prompt: s.prompt, apiUrl: api.url }), out);
      assert.equal(r.code, 0, r.stderr);
      const reading = cli.read(r.raw);
      checkScenario(reading, s);
      checkIndex(checkConservation(reading, out, s.name), reading, cli.format, s.name);
    });

    // Neither stream states a version: `subtee run` asks the command, and that stands.
    test(`--require-version is checked against what \`${cli.format} --version\` prints`, async () => {
      const printed = execFileSync(cli.executable, ['--version'], { encoding: 'utf8' }).trim();
      const version = cli.versionOf(printed);
      assert.ok(version !== null, printed);
      const runWith = (range: string) =>
        subteeRunsCli(BIN, cli.command({ prompt: 'SCRIPT:say', apiUrl: api.url }), join(tmpDir(), 'out'), [
          '--require-version',
          range,
        ]);
      const ok = await runWith(`>=${version} <=${version}`);
      assert.equal(ok.code, 0, ok.stderr);
      const refused = await runWith(`>${version}`);
      assert.equal(refused.code, 4, refused.stderr);
      assert.match(refused.stderr, new RegExp(`${version.replace(/\./g, '\\.')}.*ERR_VERSION`));
    });
  });

  describe(`recorded ${cli.title} streams (test/fixtures/other-agents/${cli.format})`, () => {
    const files = readdirSync(recordings)
      .filter((f) => f.endsWith('.jsonl'))
      .sort();

    test('one recording per scenario, each showing what the scenario scripted', () => {
      assert.deepEqual(files, cli.scenarios.map((s) => `${s.name}.jsonl`).sort());
      for (const s of cli.scenarios)
        checkScenario(cli.read(readFileSync(join(recordings, `${s.name}.jsonl`))), s);
    });

    for (const file of files) {
      test(`${file}: index.json agrees with the independent reading; every line kept once`, () => {
        const out = join(tmpDir(), 'out');
        const bytes = readFileSync(join(recordings, file));
        const argv = [BIN, '--out', out, '--stdout', 'none', '-q', join(recordings, file)];
        const r = spawnSync(process.execPath, argv, { encoding: 'utf8' });
        assert.equal(r.status, 0, r.stderr);
        const reading = cli.read(bytes);
        checkIndex(checkConservation(reading, out, file), reading, cli.format, file);
      });
    }
  });
}
