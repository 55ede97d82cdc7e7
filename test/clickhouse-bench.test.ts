import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT } from './helpers/helpers.js';
import { clickhouseAvailable } from './servers/clickhouse.js';

// Proves bench/fleet.ts still runs end to end on small inputs, every run complete. It asserts
// what the report contains, never how fast anything was.
test(
  'node dist/bench/fleet.js --quick: a row per sink and shape, every ClickHouse run stored whole',
  { skip: !clickhouseAvailable() && 'clickhouse-server is not installed (.ci/run installs it)' },
  async () => {
    const child = spawn(process.execPath, [join(ROOT, 'dist', 'bench', 'fleet.js'), '--quick'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const code = await new Promise((resolve) => child.on('close', resolve));
    assert.equal(code, 0, stderr);
    for (const shape of ['### large lines', '### small lines']) assert.ok(stdout.includes(shape), shape);
    for (const label of ['files only', 'files + otlp', 'files + clickhouse', 'files + otlp + clickhouse']) {
      assert.equal(stdout.split('\n').filter((l) => l.startsWith(`| ${label} |`)).length, 2, label);
    }
    const stored = stdout
      .split('\n')
      .filter((l) => l.includes('clickhouse |'))
      .map((l) => l.split('|').at(-2)!.trim());
    assert.equal(stored.length, 4);
    assert.ok(
      stored.every((s) => /^[\d,]+$/.test(s) && Number(s.replace(/,/g, '')) > 0),
      stored.join(' '),
    );
    assert.equal(stored[0], stored[1], 'the same input stores the same rows, with or without the OTLP sink');
    assert.equal(stored[2], stored[3]);
    assert.match(stdout, /OTLP collector received [\d,]+ requests/);
  },
);
