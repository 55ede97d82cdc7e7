import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { test } from 'node:test';
import { checkOutput, fixtureFiles, runToFiles, sampleFiles, splitEvery } from './helpers.js';

const samples = [...sampleFiles(), ...fixtureFiles()];
if (sampleFiles().length === 0) test.skip('../shared/samples is not beside this checkout: its recordings are not checked');

for (const file of samples) {
  test(`tree and conservation: ${basename(file)}`, async () => {
    const bytes = readFileSync(file);
    for (const chunkSize of [bytes.length, 977, 64]) {
      const { out } = await runToFiles(splitEvery(bytes, chunkSize));
      checkOutput(bytes, out, `${basename(file)} in ${chunkSize}-byte chunks`);
    }
  });
}
