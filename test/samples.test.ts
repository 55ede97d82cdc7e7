import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { test } from 'node:test';
import { fixtureFiles, linesOf, runToFiles, sampleFiles, splitEvery } from './helpers.js';
import { readStream } from './oracle.js';

/**
 * Checks one run's output against an independent reading of the same bytes: the tree,
 * each channel's lines in arrival order, and conservation (every non-blank input line in
 * exactly one .jsonl file or the quarantine file).
 */
export async function checkRecording(file: string, chunkSize?: number): Promise<void> {
  const bytes = readFileSync(file);
  const expected = readStream(bytes.toString('utf8'));
  const { index, files } = await runToFiles(chunkSize ? splitEvery(bytes, chunkSize) : [bytes]);
  const name = basename(file);

  const got = new Map<string | null, any>(index.channels.map((c: any) => [c.id, c]));
  assert.deepEqual([...got.keys()].sort(), [...expected.channels.keys()].sort(), `${name}: channel ids`);
  for (const [id, e] of expected.channels) {
    const c = got.get(id);
    assert.deepEqual({ parent: c.parent, depth: c.depth, status: c.status }, { parent: e.parent, depth: e.depth, status: e.status }, `${name}: channel ${id}`);
    if (id !== null) assert.equal(c.agent, e.agent, `${name}: agent of ${id}`);
    assert.deepEqual(linesOf(files.get(c.jsonl)), e.lines, `${name}: lines of ${id}`);
    assert.equal(c.lines, e.lines.length);
  }
  const all = [...index.channels.flatMap((c: any) => linesOf(files.get(c.jsonl))), ...linesOf(files.get('quarantine.log'))];
  assert.deepEqual(all.sort(), [...expected.nonBlank].sort(), `${name}: conservation`);
  assert.equal(index.input.lines, expected.nonBlank.length);
  assert.equal(index.input.quarantined, expected.quarantined.length);
}

const samples = [...sampleFiles(), ...fixtureFiles()];
if (sampleFiles().length === 0) test.skip('../shared/samples is not beside this checkout: its recordings are not checked');

for (const file of samples) {
  test(`tree and conservation: ${basename(file)}`, async () => {
    await checkRecording(file);
    await checkRecording(file, 977);
  });
}
