// Hostile numbers (negative, huge, past every bound) in the stream's usage, the result's
// dollars and a price file, for every producer, through every view: index.json, the .log
// files, stderr, the report page, pino, stats (text, CSV, JSON), OTLP spans and ClickHouse
// rows. No figure anywhere may be negative, NaN or infinite, and each refusal names its line.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { TraceBuilder } from '../src/chain/sinks/otlp-spans.js';
import { RowBuilder } from '../src/chain/sinks/clickhouse-rows.js';
import { BIN, FIXTURES, tmpDir } from './helpers/helpers.js';
import { routeThrough } from './helpers/otlp-tree.js';

/** Figures no count or amount can be: each family member replaces every number of a usage or cost field. */
const HOSTILE = [-5, -1e308, 1e308, 123456789012, -0.5] as const;

/** A field that holds a count of tokens or an amount of dollars, in any producer's naming. */
const FIGURE = /tokens|Tokens|cost|Cost|usd|USD/;

/** Every number under a figure-named key replaced by `value` (the line's other numbers kept). */
function poison(v: unknown, value: number, inFigure = false): unknown {
  if (typeof v === 'number') return inFigure ? value : v;
  if (Array.isArray(v)) return v.map((x) => poison(x, value, inFigure));
  if (v !== null && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v).map(([k, x]) => [k, poison(x, value, inFigure || FIGURE.test(k))]),
    );
  return v;
}

function poisoned(file: string, value: number): string {
  const out = join(tmpDir(), 'hostile.jsonl');
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.stringify(poison(JSON.parse(l), value)));
  writeFileSync(out, `${lines.join('\n')}\n`);
  return out;
}

/** Every number in a JSON value, with the path to it. */
function numbers(v: unknown, path = '$', out: Array<[string, number]> = []): Array<[string, number]> {
  if (typeof v === 'number') out.push([path, v]);
  else if (Array.isArray(v)) v.forEach((x, i) => numbers(x, `${path}[${i}]`, out));
  else if (v !== null && typeof v === 'object')
    for (const [k, x] of Object.entries(v)) numbers(x, `${path}.${k}`, out);
  return out;
}

/** No negative, non-finite or absurd figure in a JSON value (dollars at most a million). */
function assertSane(value: unknown, label: string): void {
  for (const [path, n] of numbers(value)) {
    assert.ok(Number.isFinite(n) && n >= 0, `${label}: ${path} = ${n}`);
    if (/usd|cost/i.test(path)) assert.ok(n <= 1e6, `${label}: ${path} = ${n} dollars`);
  }
}

/** Text shown to a person: no NaN, no Infinity, no negative dollars. */
function assertSaneText(text: string, label: string): void {
  assert.doesNotMatch(text, /NaN|Infinity|\$-|-\$|\$\d+e[+-]/, label);
}

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? files(join(dir, d.name)) : [join(dir, d.name)],
  );
}

const PRODUCERS: Array<[string, string]> = [
  ['claude', join(FIXTURES, 'nested-depth-3.jsonl')],
  ['claude, partial messages', join(FIXTURES, 'partial-messages.jsonl')],
  ['codex', join(FIXTURES, 'other-agents', 'codex-spawn.jsonl')],
  ['copilot', join(FIXTURES, 'other-agents', 'copilot-spawn.jsonl')],
  ['gemini', join(FIXTURES, 'other-agents', 'gemini-spawn.jsonl')],
  ['opencode', join(FIXTURES, 'other-agents', 'opencode-spawn.jsonl')],
];

describe('hostile figures through every view, every producer', () => {
  for (const [producer, file] of PRODUCERS) {
    test(`${producer}: index.json, logs, stderr, report, pino and stats stay finite and not negative`, () => {
      for (const value of HOSTILE) {
        const label = `${producer} ${value}`;
        const input = poisoned(file, value);
        const out = join(tmpDir(), 'out');
        const pino = join(tmpDir(), 'events.pino.log');
        const r = spawnSync(
          process.execPath,
          [BIN, '--out', out, '--stdout', 'none', '--html', '--pino', pino, input],
          { encoding: 'utf8' },
        );
        assert.equal(r.status, 0, `${label}: ${r.stderr}`);
        const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
        assertSane(index, `${label} index.json`);
        // A refused figure is named with its line, and only when one was refused.
        const refused = index.warnings.find((w: any) => w.code === 'COST_FIGURE_REFUSED');
        if (value < 0 || value > 1e7) assert.match(refused?.message ?? '', /^input line \d+: /, label);
        assertSaneText(r.stderr, `${label} stderr`);
        for (const f of files(out).filter((p) => p.endsWith('.log')))
          assertSaneText(readFileSync(f, 'utf8'), `${label} ${f}`);
        // The page's data: every usage and cost figure (its script's own text names Infinity).
        const page = readFileSync(join(out, 'report.html'), 'utf8');
        const data = /<script type="application\/json" id="subtee-data">([^<]*)<\/script>/.exec(page)!;
        for (const [path, n] of numbers(JSON.parse(data[1])))
          if (/usage|cost|usd|tokens/i.test(path))
            assert.ok(Number.isFinite(n) && n >= 0, `${label} page ${path} = ${n}`);
        for (const l of readFileSync(pino, 'utf8').split('\n').filter(Boolean)) {
          const event = JSON.parse(l);
          if ('cost_usd' in event) assertSane({ cost_usd: event.cost_usd }, `${label} pino`);
        }
        const stats = (flag: string) =>
          spawnSync(process.execPath, [BIN, 'stats', out, flag], { encoding: 'utf8' });
        const json = stats('--json');
        assert.equal(json.status, 0, json.stderr);
        assertSane(JSON.parse(json.stdout).total, `${label} stats --json`);
        assertSaneText(stats('--csv').stdout, `${label} stats --csv`);
        assert.doesNotMatch(stats('--csv').stdout, /,-\d/, `${label} stats --csv`);
        const text = spawnSync(process.execPath, [BIN, 'stats', out], { encoding: 'utf8' }).stdout;
        assertSaneText(text, `${label} stats`);
      }
    });
  }

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

  test('a lying small total leaves nothing unattributed, with COST_DISAGREES, never a negative figure', () => {
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

  test('OTLP spans and ClickHouse rows of hostile streams carry no negative or non-finite figure', async () => {
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
