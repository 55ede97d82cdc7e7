// What one input line may expand to, measured on a spawned process: a Codex spawn naming
// thousands of threads with a long prompt ends with its index.json, its peak memory bounded.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BIN, tmpDir } from './helpers/helpers.js';
import { codexFanOut } from './helpers/codex-fan-out.js';

test(
  'a Codex spawn of thousands of threads with a long prompt ends with its index.json, its memory bounded',
  { skip: !existsSync('/usr/bin/time') && 'GNU time is not installed' },
  async () => {
    const MiB = 1024 * 1024;
    for (const [threads, chars, html] of [
      [200, MiB, false],
      [3000, MiB, true],
      [1000, 256 * 1024, false],
    ] as const) {
      const name = `${threads} threads, a prompt of ${chars} characters${html ? ', --html' : ''}`;
      const out = join(tmpDir(), 'out');
      const input = codexFanOut(threads, chars).map((v) => JSON.stringify(v)).join('\n') + '\n';
      const args = [process.execPath, BIN, '--out', out, '-q', '--stdout', 'none'];
      if (html) args.push('--html');
      const r = spawnSync('/usr/bin/time', ['-f', '%M', ...args], {
        input,
        encoding: 'utf8',
        timeout: 120_000,
        killSignal: 'SIGKILL',
      });
      assert.equal(r.status, 0, `${name}: ${r.stderr.slice(-400)}`);
      const rssKb = Number(r.stderr.trim().split('\n').pop());
      assert.ok(rssKb < 250 * 1024, `${name}: peak RSS ${Math.round(rssKb / 1024)} MB`);
      const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      assert.equal(index.channels.length, threads + 1, name);
      assert.equal(index.input.bytes, Buffer.byteLength(input), name);
    }
  },
);
