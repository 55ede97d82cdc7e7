import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { test } from 'node:test';
import { checkOutput, fixtureFiles, runToFiles, sampleFiles, splitEvery } from './helpers/helpers.js';

const samples = [...sampleFiles(), ...fixtureFiles()];

test('the recordings checked here are all present', () => {
  assert.deepEqual(
    sampleFiles().map((f) => basename(f)),
    [
      'background-fanout-3.jsonl',
      'failing-subagent.jsonl',
      'foreground-fanout-2.jsonl',
      'nested-depth-3.jsonl',
      'partial-messages.jsonl',
      'without-forward-flag.jsonl',
    ],
  );
  assert.ok(fixtureFiles().length >= 9);
});

for (const file of samples) {
  test(`tree and conservation: ${basename(file)}`, async () => {
    const bytes = readFileSync(file);
    for (const chunkSize of [bytes.length, 977, 64]) {
      const { out } = await runToFiles(splitEvery(bytes, chunkSize));
      checkOutput(bytes, out, `${basename(file)} in ${chunkSize}-byte chunks`);
    }
  });
}
