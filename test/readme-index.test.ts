import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BIN, FIXTURES, ROOT, tmpDir } from './helpers/helpers.js';
import { codeBlocks, section } from './helpers/docs.js';

/**
 * A top-level field being added beside `stalled` (the watchdog's account of a stall); until
 * both the code and docs/output-folder.md carry it, either side may lack it.
 */
const FIELD_IN_FLIGHT = 'stall';

/** The JSON block of the `index.json` section of docs/output-folder.md. */
function readmeSample(): any {
  const [block] = codeBlocks(section('docs/output-folder.md', '## `index.json`'), 'json');
  assert.ok(block, 'the index.json section holds a json block');
  return JSON.parse(block);
}

/** The command the page names above the sample, run on its fixture. */
function realIndex(): any {
  const out = join(tmpDir(), 'demo-out');
  const input = join(FIXTURES, 'nested-depth-3.jsonl');
  const args = [BIN, '--out', out, '--stdout', 'none', '-q', input];
  const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
}

type Shape = string | Array<[string, Shape]> | Shape[];

/** Keys in order and the JSON type of every value, at every depth. */
function shapeOf(value: unknown): Shape {
  if (value === null) return 'null';
  if (Array.isArray(value)) return value.map(shapeOf);
  if (typeof value !== 'object') return typeof value;
  return Object.entries(value).map(([k, v]): [string, Shape] => [k, shapeOf(v)]);
}

function withoutFieldInFlight(index: Record<string, unknown>): Record<string, unknown> {
  const { [FIELD_IN_FLIGHT]: _inFlight, ...rest } = index;
  return rest;
}

test("the documented index.json sample has the fields, order and value types of a real index.json", () => {
  const sample = withoutFieldInFlight(readmeSample());
  const real = withoutFieldInFlight(realIndex());
  const sampleChannels = sample.channels as unknown[];
  const realChannels = real.channels as unknown[];
  assert.ok(sampleChannels.length >= 2, 'the sample shows the main channel and a subagent');
  assert.ok(sampleChannels.length <= realChannels.length);
  const shown = { ...real, channels: realChannels.slice(0, sampleChannels.length) };
  assert.deepEqual(shapeOf({ ...sample, channels: [] }), shapeOf({ ...shown, channels: [] }), 'top level');
  for (const [i, ch] of sampleChannels.entries()) {
    assert.deepEqual(shapeOf(ch), shapeOf(realChannels[i]), `channels[${i}]`);
  }
  assert.deepEqual(sample, shown, 'the values the command writes');
});
