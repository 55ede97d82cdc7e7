import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT } from './helpers/helpers.js';

// Proves bench/stats.ts runs end to end on a few folders; it asserts what the report holds,
// never how fast anything was.
test('bench/stats.js --quick: subtee and the jq baseline agree, and every row is printed', () => {
  const r = spawnSync(process.execPath, [join(ROOT, 'dist', 'bench', 'stats.js'), '--quick'], {
    encoding: 'utf8',
    timeout: 600_000,
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /subtee: 200 runs, \d+ agents, 0 skipped/);
  for (const label of [
    'subtee stats (tables, lists, percentiles)',
    'subtee stats --by day',
    'subtee stats, 20 folders (memory check)',
  ])
    assert.ok(r.stdout.includes(`| ${label} |`), label);
  if (spawnSync('jq', ['--version']).status === 0) assert.ok(r.stdout.includes('subtee and jq agree'));
});
