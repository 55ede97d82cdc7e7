// The projection's memory buffer (no `out`): what it holds stays within maxBufferedBytes, measured
// on the heap and the buffers outside it, against the same run with nothing buffered.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { fanoutInput, ROOT, tmpDir } from './helpers/helpers.js';

/**
 * Runs `open(input, { maxBufferedBytes })` with nobody reading, in a process of its own with
 * the collector exposed; prints what the heap and the buffers outside it grew by, collected,
 * while the run is still held.
 */
const HELD_PROGRAM = `
const [index, input, limit] = process.argv.slice(2);
const { open } = await import(index);
const settle = async () => {
  // Buffers outside the heap are freed after the collection: a few turns let them go.
  for (let k = 0; k < 4; k++) {
    globalThis.gc();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
};
const before = await settle();
const run = open(input, { maxBufferedBytes: Number(limit) });
const index_ = await run.done;
const grown = (await settle()) - before;
console.log(JSON.stringify({ lines: index_.input.lines, grown, channels: index_.channels.length }));
`;

function heldBy(input: string, limit: number): { lines: number; grown: number } {
  const dir = tmpDir();
  const program = join(dir, 'held.mjs');
  writeFileSync(program, HELD_PROGRAM);
  const index = pathToFileURL(join(ROOT, 'dist', 'src', 'index.js')).href;
  const child = spawnSync(process.execPath, ['--expose-gc', program, index, input, String(limit)], {
    encoding: 'utf8',
  });
  assert.equal(child.status, 0, child.stderr);
  return JSON.parse(child.stdout);
}

const MiB = 1024 * 1024;
/** What a run may hold beside its buffer that differs from one run to the next. */
const ALLOWANCE = MiB;

for (const [name, make] of [
  // 600,000 lines of `{}`: 1.8 MB of input, each line a few bytes of its own.
  ['tiny lines on one channel', () => Buffer.from('{}\n'.repeat(600_000))],
  // 2,000 subagents, 30,000 short lines dealt out over them: many channels, each a buffer.
  ['2,000 subagents', () => fanoutInput(2000, 30_000)],
] as const) {
  test(`the memory buffer holds no more than maxBufferedBytes: ${name}`, () => {
    const input = join(tmpDir(), 'input.jsonl');
    writeFileSync(input, make());
    const none = heldBy(input, 0);
    for (const limit of [MiB, 4 * MiB]) {
      const held = heldBy(input, limit);
      assert.equal(held.lines, none.lines);
      const buffered = held.grown - none.grown;
      assert.ok(
        buffered <= limit + ALLOWANCE,
        `${name}: ${(buffered / MiB).toFixed(1)} MiB held with maxBufferedBytes ${limit / MiB} MiB`,
      );
    }
  });
}
