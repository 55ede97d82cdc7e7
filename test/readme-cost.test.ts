import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BIN, ROOT, tmpDir } from './helpers/helpers.js';
import { readDoc } from './helpers/docs.js';

/** The Cost page's shell commands, each as its words. */
function commands(): string[][] {
  const section = readDoc('docs/cost.md');
  return [...section.matchAll(/```sh\n([\s\S]*?)\n```/g)].map((m) => m[1].trim().split(/\s+/));
}

/** The Cost page: its price file and the command that uses it. */
function costSnippets(): { prices: any; command: string[] } {
  const section = readDoc('docs/cost.md');
  const json = /```json\n([\s\S]*?)\n```/.exec(section);
  const sh = commands().find((c) => c.includes('--prices'));
  assert.ok(json && sh, 'the Cost page holds a price file and a command');
  return { prices: JSON.parse(json[1]), command: sh };
}

test("the Cost page's price file and command run as shown", () => {
  const { prices, command } = costSnippets();
  assert.equal(command[0], 'subtee');
  const dir = tmpDir();
  writeFileSync(join(dir, 'prices.json'), JSON.stringify(prices));
  const input = command[command.length - 1];
  mkdirSync(join(dir, 'test', 'fixtures'), { recursive: true });
  copyFileSync(join(ROOT, input), join(dir, input));
  const r = spawnSync(process.execPath, [BIN, ...command.slice(1), '-q'], { cwd: dir, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const out = command[command.indexOf('--out') + 1];
  const index = JSON.parse(readFileSync(join(dir, out, 'index.json'), 'utf8'));
  // The file's date stands for the table; the result line still decides the dollars.
  assert.equal(index.cost.prices_date, prices.date);
  assert.equal(index.cost.basis, 'result');
  const recorded = readFileSync(join(ROOT, input), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  const result = recorded.filter((v) => v.type === 'result').pop();
  const channels = index.channels.reduce((s: number, c: any) => s + c.cost.usd, 0);
  assert.ok(Math.abs(channels - result.total_cost_usd) < 1e-5, `${channels} vs ${result.total_cost_usd}`);
});

test("the Cost page's --transcripts command gives every agent's exact output tokens", () => {
  const command = commands().find((c) => c.includes('--transcripts'));
  assert.ok(command, 'the Cost page holds a --transcripts command');
  assert.equal(command[0], 'subtee');
  const dir = tmpDir();
  const recording = join('test', 'fixtures', 'transcripts', 'binary-tree-depth-2');
  cpSync(join(ROOT, recording), join(dir, recording), { recursive: true });
  const r = spawnSync(process.execPath, [BIN, ...command.slice(1), '-q'], { cwd: dir, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const out = command[command.indexOf('--out') + 1];
  const index = JSON.parse(readFileSync(join(dir, out, 'index.json'), 'utf8'));
  assert.deepEqual(index.cost.channels_by_basis, { exact: 7, estimated: 0, stream: 0, unknown: 0 });
  assert.ok(index.channels.every((c: any) => c.cost.basis === 'exact'));
});
