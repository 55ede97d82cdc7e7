// `subtee stats --top N` at scale: the best N of 100,000 subagents kept in a heap, for any N, in
// bounded time.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BIN, tmpDir } from './helpers/helpers.js';

test('stats --top N keeps the best N in a heap: 100,000 subagents, --top 1,000,000, bounded time', () => {
  const root = tmpDir();
  const dir = join(root, 'big');
  mkdirSync(dir, { recursive: true });
  const n = 100_000;
  let seed = 12345;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const channels = [{ id: null, agent: null, status: 'completed', usage: {}, cost: null }];
  for (let i = 0; i < n; i++) {
    const t = Date.UTC(2026, 10, 1) + Math.floor(rand() * 1e9);
    channels.push({
      id: `toolu_${i}`,
      agent: ['Explore', 'Plan', 'general'][i % 3],
      status: rand() < 0.1 ? 'failed' : 'completed',
      usage: { input_tokens: Math.floor(rand() * 1000), output_tokens: Math.floor(rand() * 1000) },
      cost: { usd: rand() < 0.05 ? null : Math.round(rand() * 1e6) / 1e6 },
      first_seen: new Date(t).toISOString(),
      last_seen: new Date(t + Math.floor(rand() * 1e6)).toISOString(),
      log: `agents/toolu_${i}.log`,
      jsonl: `agents/toolu_${i}.jsonl`,
    } as any);
  }
  writeFileSync(join(dir, 'index.json'), JSON.stringify({ format: 'subtee-index/1', channels }));
  for (const top of [0, 1, 7, 1000, 1_000_000]) {
    const r = spawnSync(process.execPath, [BIN, 'stats', root, '--json', '--top', String(top)], {
      encoding: 'utf8',
      timeout: 60_000,
      killSignal: 'SIGKILL',
      maxBuffer: 512 * 1024 * 1024,
    });
    assert.equal(r.status, 0, `--top ${top}: ${r.error ?? r.stderr}`);
    const report = JSON.parse(r.stdout);
    const subs = channels.slice(1) as any[];
    const costly = [...subs].sort(
      (a, b) =>
        (b.cost.usd ?? -1) - (a.cost.usd ?? -1) ||
        b.usage.input_tokens + b.usage.output_tokens - (a.usage.input_tokens + a.usage.output_tokens) ||
        (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    );
    assert.deepEqual(
      report.costliest.map((s: any) => s.channel),
      costly.slice(0, top).map((c) => c.id),
      `--top ${top}: the costliest, in order`,
    );
    const failed = subs
      .filter((c) => c.status === 'failed')
      .sort((a, b) => Date.parse(b.last_seen) - Date.parse(a.last_seen) || (a.id < b.id ? -1 : 1));
    assert.deepEqual(
      report.failed.map((s: any) => s.channel),
      failed.slice(0, top).map((c) => c.id),
      `--top ${top}: the latest failures, in order`,
    );
  }
});
