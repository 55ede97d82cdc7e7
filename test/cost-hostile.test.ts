// Hostile numbers (negative, huge, past every bound) in a result's stated dollars and in the
// usage the OTLP spans and ClickHouse rows are built from: no figure may be negative, NaN or
// infinite, and each refusal names its line. (Every producer through every view the CLI
// writes: cost-hostile-views.test.ts.)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { TraceBuilder } from '../src/chain/sinks/otlp-spans.js';
import { RowBuilder } from '../src/chain/sinks/clickhouse-rows.js';
import { BIN, FIXTURES, tmpDir } from './helpers/helpers.js';
import { routeThrough } from './helpers/otlp-tree.js';
import { assertSane, assertSaneText, HOSTILE, poisoned } from './helpers/hostile-figures.js';

describe('hostile figures in stated totals, OTLP spans and ClickHouse rows', () => {
  test('a stated total of -5 or 1e308 is refused naming its line; unattributed is never negative', () => {
    for (const total of [-5, 1e308, 2e6]) {
      const lines = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'), 'utf8').split('\n').filter(Boolean);
      const at = lines.findIndex((l) => l.includes('"type":"result"'));
      const result = JSON.parse(lines[at]);
      result.total_cost_usd = total;
      lines[at] = JSON.stringify(result);
      const input = join(tmpDir(), 'total.jsonl');
      writeFileSync(input, `${lines.join('\n')}\n`);
      const out = join(tmpDir(), 'out');
      const args = [BIN, '--out', out, '--stdout', 'none', input];
      const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
      const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      const refused = index.warnings.find((w: any) => w.code === 'COST_FIGURE_REFUSED');
      assert.match(refused.message, new RegExp(`^input line ${at + 1}: total_cost_usd `), String(total));
      // The per-model dollars stand in for the refused total.
      assert.ok(Math.abs(index.cost.usd - result.modelUsage['claude-opus-5-5'].costUSD) < 1e-12);
      assert.equal(index.cost.unattributed_usd, 0);
      assertSaneText(r.stderr, String(total));
    }
  });

  test('a lying small total leaves nothing unattributed, ' +
    'with COST_DISAGREES, never a negative figure', () => {
    const lines = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'), 'utf8').split('\n').filter(Boolean);
    const at = lines.findIndex((l) => l.includes('"type":"result"'));
    const result = JSON.parse(lines[at]);
    result.total_cost_usd = 0.0001;
    lines[at] = JSON.stringify(result);
    const input = join(tmpDir(), 'lying.jsonl');
    writeFileSync(input, `${lines.join('\n')}\n`);
    const out = join(tmpDir(), 'out');
    const args = [BIN, '--out', out, '--stdout', 'none', input];
    const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.equal(index.cost.unattributed_usd, 0);
    assert.match(r.stderr, /COST_DISAGREES: the result states \$0\.0001 for the run/);
  });

  test('OTLP spans and ClickHouse rows of hostile ' +
    'streams carry no negative or non-finite figure', async () => {
    for (const value of HOSTILE) {
      const input = readFileSync(poisoned(join(FIXTURES, 'nested-depth-3.jsonl'), value));
      const spans: unknown[] = [];
      const rows: unknown[] = [];
      let builder: TraceBuilder | null = null;
      let rowBuilder: RowBuilder | null = null;
      const { run } = await routeThrough(input, (batch, session) => {
        builder ??= new TraceBuilder({ costs: session.cost });
        rowBuilder ??= new RowBuilder({ costs: session.cost });
        for (const rec of batch) {
          spans.push(...builder.add(rec));
          rows.push(...rowBuilder.rows(rec).map((e) => e.r));
        }
      });
      spans.push(...builder!.finish(run.tree.channels(), run));
      for (const ch of run.tree.channels())
        rows.push(rowBuilder!.channelRow(ch, { final: true, stalled: false, interrupted: false }));
      const attributes = spans.map((s: any) => s.attributes);
      for (const a of attributes)
        for (const [k, v] of Object.entries(a))
          if (typeof v === 'number') assert.ok(Number.isFinite(v) && v >= 0, `${value} span ${k} = ${v}`);
      for (const row of rows as any[]) {
        if (row.cost_usd !== undefined && row.cost_usd !== null)
          assertSane({ cost_usd: row.cost_usd }, `${value} row`);
        for (const k of ['input_tokens', 'output_tokens', 'cache_read_tokens', 'cache_creation_tokens'])
          if (typeof row[k] === 'number') assert.ok(Number.isFinite(row[k]), `${value} row ${k} = ${row[k]}`);
      }
      // The channels table holds each channel's totals: never negative.
      for (const ch of run.tree.channels()) {
        const row: any = rowBuilder!.channelRow(ch, { final: true, stalled: false, interrupted: false });
        for (const k of ['input_tokens', 'output_tokens', 'cache_read_tokens', 'cache_creation_tokens'])
          assert.ok(row[k] >= 0, `${value} channel row ${k} = ${row[k]}`);
      }
    }
  });
});
