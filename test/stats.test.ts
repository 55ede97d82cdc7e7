import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { generateRuns, writeRuns } from '../bench/stats-gen.js';
import { COPILOT_TOTALS, copilotTokens } from './helpers/chat-reading.js';
import { BIN, FIXTURES, tmpDir } from './helpers/helpers.js';
import { statsRunOf } from '../src/views/stats.js';
import { INDEX_MAX_BYTES } from '../src/cli/run-folders.js';

function stats(args: string[]) {
  const r = spawnSync(process.execPath, [BIN, 'stats', ...args], {
    encoding: 'utf8',
    timeout: 120_000,
    maxBuffer: 256 * 1024 * 1024,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function statsJson(args: string[]): any {
  const r = stats([...args, '--json']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

// ---- an independent count: straight from the generated documents, not through subtee ----

interface Flat {
  run: string;
  id: string | null;
  agent: string;
  model: string;
  day: string;
  status: string;
  input: number;
  output: number;
  cacheRead: number;
  cacheCreation: number;
  cost: number | null;
  /** Its usage unknown (cost.basis): counted apart from the unpriced. */
  unknown: boolean;
  elapsed: number | null;
  lastSeen: number;
  startMs: number | null;
}

/** Per run folder: its day and the dollars its result counts and no channel shows. */
const UNATTRIBUTED = new Map<string, { day: string; usd: number }>();

function flatten(run: string, index: any): Flat[] {
  // A channel's span: spawn to report (started_at, ended_at), else its first and last line.
  const from = (c: any) => c.started_at ?? c.first_seen;
  const to = (c: any) => c.ended_at ?? c.last_seen;
  const times = index.channels.map(from).filter((t: any) => typeof t === 'string');
  const startMs = times.length ? Math.min(...times.map((t: string) => new Date(t).getTime())) : null;
  const unattributed = index.cost?.unattributed_usd;
  if (typeof unattributed === 'number' && unattributed > 0)
    UNATTRIBUTED.set(run, {
      day: startMs === null ? '(unknown)' : new Date(startMs).toISOString().slice(0, 10),
      usd: unattributed,
    });
  return index.channels.map((c: any) => ({
    run,
    id: c.id,
    agent: c.id === null ? 'main' : c.agent || '(unknown)',
    model: Array.isArray(c.models) && c.models.length ? c.models[0] : '(unknown)',
    day: startMs === null ? '(unknown)' : new Date(startMs).toISOString().slice(0, 10),
    status: c.status,
    input: c.usage.input_tokens ?? 0,
    output: c.usage.output_tokens ?? 0,
    cacheRead: c.usage.cache_read_input_tokens ?? 0,
    cacheCreation: c.usage.cache_creation_input_tokens ?? 0,
    cost: typeof c.cost?.usd === 'number' ? c.cost.usd : null,
    unknown: c.cost?.basis === 'unknown',
    elapsed:
      from(c) && to(c) && to(c) >= from(c) ? new Date(to(c)).getTime() - new Date(from(c)).getTime() : null,
    lastSeen: to(c) ? new Date(to(c)).getTime() : 0,
    startMs,
  }));
}

/** The smallest value v with at least `percent`% of the values at or below it (integer arithmetic). */
function percentile(values: number[], percent: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  for (let i = 0; i < sorted.length; i++) if (100 * (i + 1) >= percent * sorted.length) return sorted[i];
  throw new Error('unreachable');
}

/**
 * A group's figures from its channels, and the unattributed dollars of `runs` (the total's:
 * every run; a day's: its runs; the agent and model tables: the `(unattributed)` row).
 */
function expectedGroup(key: string, rows: Flat[], runs: string[] = []) {
  const priced = rows.filter((r) => r.cost !== null);
  const unknown = rows.filter((r) => r.cost === null && r.unknown).length;
  const extra = runs.reduce((s, run) => s + (UNATTRIBUTED.get(run)?.usd ?? 0), 0);
  const failed = rows.filter((r) => r.status === 'failed').length;
  const elapsed = rows.flatMap((r) => (r.elapsed === null ? [] : [r.elapsed]));
  const input = rows.reduce((s, r) => s + r.input, 0);
  const output = rows.reduce((s, r) => s + r.output, 0);
  return {
    key,
    runs: new Set([...rows.map((r) => r.run), ...runs.filter((run) => UNATTRIBUTED.has(run))]).size,
    agents: rows.length,
    failed,
    failed_pct: rows.length ? Math.round((failed / rows.length) * 10000) / 100 : null,
    input_tokens: input,
    output_tokens: output,
    cache_read_tokens: rows.reduce((s, r) => s + r.cacheRead, 0),
    cache_creation_tokens: rows.reduce((s, r) => s + r.cacheCreation, 0),
    tokens: input + output,
    cost_usd: priced.length || extra > 0 ? priced.reduce((s, r) => s + r.cost!, 0) + extra : null,
    unpriced: rows.length - priced.length - unknown,
    unknown,
    unattributed_usd: Math.round(extra * 1e6) / 1e6,
    elapsed_p50_ms: percentile(elapsed, 50),
    elapsed_p95_ms: percentile(elapsed, 95),
  };
}

const runsOf = (rows: Flat[]) => [...new Set(rows.map((r) => r.run))];

function expectedTable(rows: Flat[], keyOf: (r: Flat) => string, byDay = false) {
  const groups = new Map<string, Flat[]>();
  for (const r of rows) groups.set(keyOf(r), [...(groups.get(keyOf(r)) ?? []), r]);
  const runs = [...new Set(rows.map((r) => r.run))].filter((run) => UNATTRIBUTED.has(run));
  const keyOfRun = (run: string) => (byDay ? UNATTRIBUTED.get(run)!.day : '(unattributed)');
  for (const run of runs) if (!groups.has(keyOfRun(run))) groups.set(keyOfRun(run), []);
  return new Map(
    [...groups].map(([k, g]) => [k, expectedGroup(k, g, runs.filter((run) => keyOfRun(run) === k))]),
  );
}

/** Dollars are sums of floats in another order: equal to the micro-dollar. */
function assertGroup(actual: any, expected: any, label: string) {
  const { cost_usd: cost, ...rest } = actual;
  const { cost_usd: costExpected, ...restExpected } = expected;
  assert.deepEqual(rest, restExpected, label);
  if (costExpected === null) assert.equal(cost, null, `${label}: cost`);
  else assert.ok(Math.abs(cost - costExpected) < 1e-6, `${label}: cost ${cost} vs ${costExpected}`);
}

function assertTable(actual: any[], expected: Map<string, any>, label: string) {
  assert.deepEqual(actual.map((g) => g.key).sort(), [...expected.keys()].sort(), `${label}: groups`);
  for (const g of actual) assertGroup(g, expected.get(g.key), `${label} ${g.key}`);
}

/** A tree of generated runs plus real output folders and broken ones; what the test expects of it. */
function fleet(runs: number, seed: number) {
  const root = tmpDir();
  writeRuns(join(root, 'fleet'), runs, seed);
  const flat: Flat[] = [];
  for (const { rel, index } of generateRuns(runs, seed))
    flat.push(...flatten(join(root, 'fleet', rel), index));
  // Real runs, two inputs into one --out (a folder per input under it).
  const real = join(root, 'ci', 'job-1');
  const inputs = ['nested-depth-3', 'failing-beside-healthy'].map((f) => join(FIXTURES, `${f}.jsonl`));
  const r = spawnSync(process.execPath, [BIN, '--out', real, '--stdout', 'none', '-q', ...inputs], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  for (const name of ['nested-depth-3', 'failing-beside-healthy']) {
    const dir = join(real, name);
    flat.push(...flatten(dir, JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8'))));
  }
  // Broken: a half-written file (a real one cut short), an empty one, JSON that is not an
  // index, and a link planted where index.json should be.
  const broken: string[] = [];
  const half = join(root, 'fleet', 'broken', 'half-written');
  mkdirSync(half, { recursive: true });
  const whole = readFileSync(join(real, 'nested-depth-3', 'index.json'), 'utf8');
  writeFileSync(join(half, 'index.json'), whole.slice(0, Math.floor(whole.length / 2)));
  broken.push(join(half, 'index.json'));
  const empty = join(root, 'fleet', 'broken', 'empty');
  mkdirSync(empty, { recursive: true });
  writeFileSync(join(empty, 'index.json'), '');
  broken.push(join(empty, 'index.json'));
  const other = join(root, 'other-json');
  mkdirSync(other, { recursive: true });
  writeFileSync(join(other, 'index.json'), '{"channels": "not a list"}');
  broken.push(join(other, 'index.json'));
  const linked = join(root, 'fleet', 'broken', 'linked');
  mkdirSync(linked, { recursive: true });
  symlinkSync(join(real, 'nested-depth-3', 'index.json'), join(linked, 'index.json'));
  broken.push(join(linked, 'index.json'));
  return { root, flat, broken, runs: runs + 2 };
}

describe('subtee stats over run folders', () => {
  const f = fleet(300, 7);

  test('every table equals an independent count of the same ' +
    'index.json files; broken ones are named and skipped', () => {
    const r = stats([f.root, '--json', '--top', '5']);
    assert.equal(r.code, 0, r.stderr);
    const report = JSON.parse(r.stdout);
    assert.equal(report.runs, f.runs);
    assert.equal(report.skipped, f.broken.length);
    for (const path of f.broken)
      assert.ok(r.stderr.includes(`skipped ${path}:`), `${path} named on stderr:\n${r.stderr}`);
    assert.equal(r.stderr.trim().split('\n').length, f.broken.length + 1, 'one line each and a count');
    assertTable(
      report.tables.agent,
      expectedTable(f.flat, (x) => x.agent),
      'agent',
    );
    assertTable(
      report.tables.model,
      expectedTable(f.flat, (x) => x.model),
      'model',
    );
    assert.equal(report.tables.day, undefined, 'days only with --by day');
    assertGroup(report.total, expectedGroup('all', f.flat, runsOf(f.flat)), 'total');

    const subagents = f.flat.filter((x) => x.id !== null);
    const costliest = [...subagents].sort(
      (a, b) =>
        (b.cost ?? -1) - (a.cost ?? -1) ||
        b.input + b.output - (a.input + a.output) ||
        (a.id! < b.id! ? -1 : 1),
    );
    assert.deepEqual(
      report.costliest.map((s: any) => [s.channel, s.cost_usd, s.tokens, s.elapsed_ms, s.log]),
      costliest
        .slice(0, 5)
        .map((x) => [x.id, x.cost, x.input + x.output, x.elapsed, join(x.run, 'agents', `${x.id}.log`)]),
    );
    const failed = subagents.filter((x) => x.status === 'failed');
    assert.equal(report.failed_total, failed.length);
    failed.sort((a, b) => b.lastSeen - a.lastSeen || (a.id! < b.id! ? -1 : 1));
    assert.deepEqual(
      report.failed.map((s: any) => [s.channel, s.status, s.jsonl]),
      failed.slice(0, 5).map((x) => [x.id, 'failed', join(x.run, 'agents', `${x.id}.jsonl`)]),
    );
  });

  test('--by day and --since: the runs that started since, per UTC day', () => {
    const since = '2026-11-12';
    const sinceMs = Date.parse(since);
    const kept = f.flat.filter((x) => x.startMs !== null && x.startMs >= sinceMs);
    const report = statsJson([join(f.root, 'fleet'), join(f.root, 'ci'), '--by', 'day', '--since', since]);
    assert.deepEqual(Object.keys(report.tables), ['day']);
    assert.equal(report.runs, new Set(kept.map((x) => x.run)).size);
    assertTable(
      report.tables.day,
      expectedTable(kept, (x) => x.day, true),
      'day',
    );
    assert.deepEqual(
      report.tables.day.map((g: any) => g.key),
      [...new Set(kept.map((x) => x.day))].sort(),
      'days in order',
    );
    const time = statsJson([f.root, '--by', 'day', '--since', '2026-11-12T06:30:00Z']);
    const keptTime = f.flat.filter(
      (x) => x.startMs !== null && x.startMs >= Date.parse('2026-11-12T06:30:00Z'),
    );
    assertGroup(time.total, expectedGroup('all', keptTime, runsOf(keptTime)), 'since a time');
  });

  test('--since a time without an offset is UTC, whatever the local time zone', () => {
    const utc = Date.parse('2026-11-12T06:30:00Z');
    const kept = f.flat.filter((x) => x.startMs !== null && x.startMs >= utc);
    // New York is 5 hours behind in November: read as local time, other runs would be kept.
    const asNewYork = f.flat.filter((x) => x.startMs !== null && x.startMs >= utc + 5 * 3600_000);
    assert.notEqual(new Set(kept.map((x) => x.run)).size, new Set(asNewYork.map((x) => x.run)).size);
    for (const since of ['2026-11-12T06:30:00', '2026-11-12 06:30', '2026-11-12T01:30:00-05:00']) {
      const r = spawnSync(process.execPath, [BIN, 'stats', f.root, '--since', since, '--json'], {
        encoding: 'utf8',
        timeout: 120_000,
        env: { ...process.env, TZ: 'America/New_York' },
      });
      assert.equal(r.status, 0, r.stderr);
      const report = JSON.parse(r.stdout);
      assert.equal(report.runs, new Set(kept.map((x) => x.run)).size, since);
      assertGroup(report.total, expectedGroup('all', kept, runsOf(kept)), since);
    }
  });

  test('--csv: the same groups as --json, one row each, the total last', () => {
    const json = statsJson([f.root, '--by', 'agent']);
    const r = stats([f.root, '--by', 'agent', '--csv']);
    assert.equal(r.code, 0, r.stderr);
    const [head, ...rows] = r.stdout.trimEnd().split('\r\n');
    const columns = head.split(',');
    assert.deepEqual(columns.slice(0, 3), ['by', 'key', 'runs']);
    assert.equal(rows.length, json.tables.agent.length + 1);
    const parsed = rows.map((line) => Object.fromEntries(line.split(',').map((v, i) => [columns[i], v])));
    for (const [i, g] of [...json.tables.agent, json.total].entries()) {
      assert.equal(parsed[i].key, g.key);
      assert.equal(Number(parsed[i].agents), g.agents);
      assert.equal(Number(parsed[i].tokens), g.tokens);
      assert.equal(parsed[i].cost_usd === '' ? null : Number(parsed[i].cost_usd), g.cost_usd);
    }
    assert.equal(parsed.at(-1)!.by, 'all');
  });

  test('the terminal table names each group with its figures', () => {
    const r = stats([join(f.root, 'ci')]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^2 runs from run folders\n/);
    const main = r.stdout.split('\n').find((l) => l.startsWith('main '))!;
    const expected = expectedGroup(
      'main',
      f.flat.filter((x) => x.agent === 'main' && x.run.includes(`${join('ci', 'job-1')}`)),
    );
    assert.deepEqual(main.trim().split(/\s+/).slice(1, 5), ['2', '2', '0.0', String(expected.tokens)]);
    const priced = stats([join(f.root, 'fleet'), '--by', 'model']);
    const opus = priced.stdout.split('\n').find((l) => l.startsWith('claude-opus-5-5 '))!;
    const fleetOpus = f.flat.filter(
      (x) => x.model === 'claude-opus-5-5' && x.run.includes(join(f.root, 'fleet')),
    );
    const g = expectedGroup('claude-opus-5-5', fleetOpus);
    assert.ok(
      g.cost_usd! > 100 && g.cost_usd! < 1000 && g.unpriced > 0,
      'a group with priced and unpriced agents',
    );
    assert.ok(opus.includes(` $${g.cost_usd!.toFixed(2)}+ `), `${opus} shows $${g.cost_usd}`);
    assert.match(priced.stdout, /\(cost\+: some agents in the group have no price/);
    // Every group's cost cell: `–` when no agent in it is priced, else its dollars as shown.
    const byModel = statsJson([join(f.root, 'fleet'), '--by', 'model']).tables.model;
    assert.ok(
      byModel.some((group: any) => group.cost_usd === null),
      'a group with no price at all',
    );
    for (const group of byModel) {
      const row = priced.stdout.split('\n').find((l) => l.startsWith(`${group.key} `))!;
      const cell = row.trim().split(/\s+/)[5];
      if (group.cost_usd === null) assert.equal(cell, '–', row);
      else {
        const shown = /^\$(\d+)\.(\d+)\+?$/.exec(cell)!;
        assert.ok(shown, row);
        const within = 0.5 * 10 ** -shown[2].length;
        assert.ok(Math.abs(Number(`${shown[1]}.${shown[2]}`) - group.cost_usd) <= within + 1e-12, row);
      }
    }
    assert.match(
      r.stdout,
      /failed subagents \(1\):\n *cost .*\n.*failing-beside-healthy\/agents\/toolu_\w+\.log/,
    );
  });

  test('bad usage exits 2, a missing folder 3, each with one line and its code', () => {
    const cases: Array<[string[], number, string]> = [
      [[], 2, 'ERR_USAGE'],
      [[f.root, '--by', 'week'], 2, 'ERR_BAD_OPTION'],
      [[f.root, '--since', 'yesterday'], 2, 'ERR_BAD_OPTION'],
      [[f.root, '--since', '2026-02-30'], 2, 'ERR_BAD_OPTION'],
      [[f.root, '--since', '2026-13-01T00:00:00Z'], 2, 'ERR_BAD_OPTION'],
      [[f.root, '--json', '--csv'], 2, 'ERR_USAGE'],
      [[f.root, '--top', 'many'], 2, 'ERR_BAD_OPTION'],
      [[f.root, '--clickhouse', 'http://127.0.0.1:9'], 2, 'ERR_USAGE'],
      [[f.root, '--bogus'], 2, 'ERR_UNKNOWN_OPTION'],
      [[join(f.root, 'nope')], 3, 'ERR_INPUT'],
    ];
    for (const [args, code, err] of cases) {
      const r = stats(args);
      assert.equal(r.code, code, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.ok(r.stderr.includes(`[${err}]`), `${args.join(' ')}: ${r.stderr}`);
    }
    const help = stats(['--help']);
    assert.equal(help.code, 0);
    for (const flag of [
      '--since',
      '--by',
      '--json',
      '--csv',
      '--top',
      '--clickhouse',
      '--clickhouse-channels-table',
    ])
      assert.ok(help.stdout.includes(flag), flag);
  });

  test('names from the data never reach the terminal as control sequences', () => {
    const root = tmpDir();
    const dir = join(root, 'run');
    mkdirSync(dir);
    const [{ index }] = [...generateRuns(1, 3)];
    index.channels.push({
      ...index.channels[0],
      id: 'toolu_x',
      agent: 'evil\u001b[2J\u001b]0;t\u0007',
      status: 'failed',
    });
    writeFileSync(join(dir, 'index.json'), JSON.stringify(index));
    const r = stats([root]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(!r.stdout.includes('\u001b'), 'no escape byte');
    assert.ok(r.stdout.includes('evil\\x1b[2J'));
    const csv = stats([root, '--csv']);
    assert.equal(csv.code, 0, csv.stderr);
    assert.ok(!csv.stdout.includes('\u001b') && csv.stdout.includes('evil\\x1b[2J'), csv.stdout);
  });

  test('a run folder counts once however named: twice, inside another root, through a link, ./', () => {
    const base = statsJson([f.root, '--top', '1000000']);
    const job = join(f.root, 'ci', 'job-1');
    const link = join(tmpDir(), 'link-to-job');
    symlinkSync(job, link);
    for (const args of [
      [f.root, f.root],
      [f.root, job, `${job}/`, join(job, 'nested-depth-3')],
      [f.root, link],
      [`${f.root}/./ci/..`, join(f.root, '.', 'fleet'), join(job, 'failing-beside-healthy') + '/'],
    ]) {
      const report = statsJson([...args, '--top', '1000000']);
      const name = args.join(' ');
      assert.equal(report.runs, base.runs, `${name}: runs`);
      assert.equal(report.total.agents, base.total.agents, `${name}: agents`);
      assert.equal(report.total.cost_usd, base.total.cost_usd, `${name}: cost`);
      const keys = report.costliest.map((s: any) => `${s.channel}\u0000${s.tokens}\u0000${s.cost_usd}`);
      const baseKeys = base.costliest.map((s: any) => `${s.channel}\u0000${s.tokens}\u0000${s.cost_usd}`);
      assert.deepEqual(keys, baseKeys, `${name}: each subagent listed once`);
      assert.equal(report.failed_total, base.failed_total, `${name}: failures`);
    }
  });

});

test('an agent whose last_seen comes before its first_seen has no elapsed time, never a negative one', () => {
  const channel = (id: string | null, first: string, last: string) => ({
    id,
    status: 'completed',
    usage: {},
    first_seen: first,
    last_seen: last,
  });
  const run = statsRunOf('r', {
    format: 'subtee-index/1',
    channels: [
      channel(null, '2026-11-30T12:00:00.000Z', '2026-11-30T12:00:05.000Z'),
      channel('toolu_a', '2026-11-30T13:00:00.000Z', '2026-11-30T12:00:00.000Z'),
    ],
  });
  assert.deepEqual(
    run?.channels.map((c) => c.elapsedMs),
    [5000, null],
  );
});

test('one recording processed into several folders counts as one run (its run_id), and says so', () => {
  const root = tmpDir();
  const fixtures = ['nested-depth-3', 'failing-beside-healthy', 'binary-tree-depth-3'];
  const expected = new Map<string, any>();
  for (const [copies, fixture] of fixtures.map((f, i) => [i + 1, f] as const)) {
    for (let k = 0; k < copies; k++) {
      const out = join(root, `${fixture}-${k}`);
      const input = join(FIXTURES, `${fixture}.jsonl`);
      const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '-q', input]);
      assert.equal(r.status, 0, String(r.stderr));
      const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      assert.match(index.run_id, /^[0-9a-f-]{36}$/, 'the first uuid of the stream');
      if (k === 0) expected.set(fixture, index);
      else assert.equal(index.run_id, expected.get(fixture).run_id, 'the same recording, the same run_id');
    }
  }
  const r = stats([root, '--json', '--top', '1000']);
  assert.equal(r.code, 0, r.stderr);
  const report = JSON.parse(r.stdout);
  assert.equal(report.runs, fixtures.length);
  const agents = [...expected.values()].reduce((n, index) => n + index.channels.length, 0);
  assert.equal(report.total.agents, agents);
  const listed = report.costliest.map((s: any) => s.channel);
  assert.equal(new Set(listed).size, listed.length, 'each subagent listed once');
  // 0 + 1 + 2 copies left out, each named with the folder it repeats.
  const notes = r.stderr.trim().split('\n').filter((l) => l.includes('the same run (run_id) as'));
  assert.equal(notes.length, 3, r.stderr);
  for (const note of notes) assert.match(note, /not counted .*-[12]: the same run \(run_id\) as .*-0$/);
});

test("a Copilot subagent's stated total counts as its tokens in stats, as in the summary", () => {
  const root = tmpDir();
  const expected = new Map<string, number>();
  let all = 0;
  for (const [k, name] of COPILOT_TOTALS.entries()) {
    const out = join(root, `run-${k}`);
    const input = join(FIXTURES, `${name}.jsonl`);
    const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', input], {
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    const summary = [...r.stderr.matchAll(/ {2}tokens (\d+) {2}/g)].reduce((n, m) => n + Number(m[1]), 0);
    const tokens = copilotTokens(readFileSync(input, 'utf8'));
    for (const [id, n] of tokens) if (id !== null) expected.set(`${out} ${id}`, n);
    const stated = [...tokens.values()].reduce((a, b) => a + b, 0);
    assert.ok(stated > 0, name);
    assert.equal(summary, stated, `${name}: the summary's tree`);
    all += stated;
  }
  const report = statsJson([root, '--top', '1000']);
  assert.equal(report.runs, COPILOT_TOTALS.length);
  assert.equal(report.total.tokens, all);
  for (const by of ['agent', 'model'])
    assert.equal(report.tables[by].reduce((n: number, g: any) => n + g.tokens, 0), all, by);
  assert.deepEqual(
    new Map(report.costliest.map((s: any) => [`${s.run} ${s.channel}`, s.tokens])),
    expected,
    'each subagent',
  );
});

test('stats --json writes the C1 and bidi controls and U+2028 of an agent name as \\u escapes: ' +
  'the same JSON, nothing a terminal or a viewer acts on', () => {
  const input = join(tmpDir(), 'in.jsonl');
  const recording = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'), 'utf8');
  // In the file as JSON escapes, so subtee reads the characters themselves.
  const hostile = '"subagent_type":"lev\\u202eel\\u009b2\\u2028"';
  writeFileSync(input, recording.replaceAll('"subagent_type":"general-purpose"', hostile));
  const out = join(tmpDir(), 'out');
  const run = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '-q', input], {
    encoding: 'utf8',
  });
  assert.equal(run.status, 0, run.stderr);
  assert.ok(readFileSync(join(out, 'index.json'), 'utf8').includes('lev\u202eel\u009b2\u2028'));
  const r = stats([out, '--json', '--by', 'agent']);
  assert.equal(r.code, 0, r.stderr);
  assert.doesNotMatch(r.stdout, /[\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
  assert.ok(r.stdout.includes('lev\\u202eel\\u009b2\\u2028'), r.stdout);
  assert.ok(JSON.stringify(JSON.parse(r.stdout)).includes('lev\u202eel\u009b2\u2028'));
});

/** The folder of a run of nested-depth-3.jsonl whose subagents' type is `type` (JSON string text). */
function runWithAgentType(type: string): string {
  const input = join(tmpDir(), 'in.jsonl');
  const recording = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'), 'utf8');
  const typed = recording.replaceAll('"subagent_type":"general-purpose"', `"subagent_type":"${type}"`);
  writeFileSync(input, typed);
  const out = join(tmpDir(), 'out');
  const run = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '-q', input], {
    encoding: 'utf8',
  });
  assert.equal(run.status, 0, run.stderr);
  return out;
}

test('an agent type that is a workflow command is escaped in the first column of stats, which starts ' +
  'its line, and shown as is where a cell comes before it', () => {
  const out = runWithAgentType('::add-mask::x');
  const r = stats([out, '--by', 'agent']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /\n\\x3a:add-mask::x +\d/);
  assert.doesNotMatch(r.stdout, /(^|\n)\s*::/);
  // In the lists of subagents the agent is the fourth cell.
  assert.match(r.stdout, /\n *\S+ +\d+ +\S+ +::add-mask::x  /);
});

test('an agent type holding a `##[` workflow command is escaped in every cell of stats, as text, CSV ' +
  'and JSON, which a job log would run anywhere in a line', () => {
  const out = runWithAgentType('a ##[add-mask]x');
  const text = stats([out, '--by', 'agent']);
  assert.equal(text.code, 0, text.stderr);
  // The first column, and the fourth cell of the lists of subagents.
  assert.match(text.stdout, /\na #\\x23\[add-mask\]x +\d/);
  assert.match(text.stdout, /\n *\S+ +\d+ +\S+ +a #\\x23\[add-mask\]x  /);
  const csv = stats([out, '--csv', '--by', 'agent']);
  assert.equal(csv.code, 0, csv.stderr);
  assert.match(csv.stdout, /\nagent,a #\\x23\[add-mask\]x,/);
  const json = stats([out, '--json', '--by', 'agent']);
  assert.equal(json.code, 0, json.stderr);
  assert.ok(json.stdout.includes('"a #\\u0023[add-mask]x"'), json.stdout);
  assert.ok(JSON.stringify(JSON.parse(json.stdout)).includes('"a ##[add-mask]x"'));
  for (const r of [text, csv, json]) assert.doesNotMatch(r.stdout, /##\[/);
});

test('a CSV field of several lines starts no line with a workflow command', () => {
  const out = runWithAgentType('a\\n::add-mask::x');
  const csv = stats([out, '--csv', '--by', 'agent']);
  assert.equal(csv.code, 0, csv.stderr);
  assert.match(csv.stdout, /\nagent,"a\n\\x3a:add-mask::x",/);
  assert.doesNotMatch(csv.stdout, /(^|\n)\s*::/);
});

/** A run folder holding this index.json; its channels get a format and a time each. */
function writeIndex(root: string, name: string, channels: unknown[], cost: object = {}): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'index.json'), JSON.stringify({ format: 'subtee-index/1', cost, channels }));
  return dir;
}

test('stats refuses a figure past 2^53 − 1 as implausible, counts it as none and names it: two near ' +
  '1e308 never sum to Infinity', () => {
  const root = tmpDir();
  const MAX = Number.MAX_SAFE_INTEGER;
  const channel = (id: string | null, usage: object, usd: number) => ({
    id, agent: 'worker', status: 'completed', models: ['m'], usage, cost: { usd, basis: 'exact' },
    first_seen: '2026-11-30T12:00:00.000Z', last_seen: '2026-11-30T12:00:01.000Z',
  });
  // Each run: main with huge figures, a subagent with plain ones, the largest taken (2^53 − 1).
  for (const name of ['a', 'b'])
    writeIndex(root, name, [
      channel(null, { input_tokens: 1.5e308, output_tokens: 7 }, 1e308),
      channel('toolu_1', { input_tokens: MAX, output_tokens: 3 }, 0.25),
    ], { unattributed_usd: 1.7e308 });
  const r = stats([root, '--json']);
  assert.equal(r.code, 0, r.stderr);
  const report = JSON.parse(r.stdout);
  for (const g of [report.total, ...Object.values<any>(report.tables).flat()])
    for (const [k, v] of Object.entries(g))
      assert.ok(v === null ? !k.endsWith('_tokens') && k !== 'tokens' : true, `${g.key}.${k} is null`);
  // The independent count: the plausible figures alone, two runs of them.
  assert.equal(report.runs, 2);
  assert.equal(report.refused, 6, 'per run: an input count, a cost, the unattributed dollars');
  assert.equal(report.total.input_tokens, 2 * MAX);
  assert.equal(report.total.output_tokens, 2 * (7 + 3));
  assert.equal(report.total.tokens, 2 * (7 + MAX + 3));
  assert.equal(report.total.cost_usd, 0.5);
  assert.equal(report.total.unpriced, 2, 'main, its dollars refused, is unpriced');
  assert.equal(report.total.unattributed_usd, 0);
  const named = r.stderr.split('\n').filter((l) => l.includes('implausible'));
  assert.equal(named.length, 2, r.stderr);
  for (const name of ['a', 'b'])
    assert.ok(
      named.some((l) => l.includes(join(root, name, 'index.json')) &&
        l.includes('3 implausible figures counted as none (channels[0].usage.input_tokens is 1.5e+308;')),
      r.stderr,
    );
  const text = stats([root]);
  assert.equal(text.code, 0, text.stderr);
  assert.ok(!text.stdout.includes('∞') && !/NaN|Infinity/.test(text.stdout), text.stdout);
  const head = text.stdout.split('\n')[0];
  assert.equal(head, '2 runs from run folders, 6 implausible figures counted as none');
});

test('stats refuses a fraction of a token as implausible, so token sums stay whole; ' +
  'dollars may be fractions', () => {
  const root = tmpDir();
  writeIndex(root, 'a', [
    {
      id: null, agent: 'main', status: 'completed', models: ['m'],
      usage: { input_tokens: 1.5, output_tokens: 7 }, cost: { usd: 0.25, basis: 'exact' },
    },
  ]);
  const r = stats([root, '--json']);
  assert.equal(r.code, 0, r.stderr);
  const report = JSON.parse(r.stdout);
  assert.equal(report.refused, 1);
  assert.deepEqual(
    [report.total.input_tokens, report.total.output_tokens, report.total.cost_usd],
    [0, 7, 0.25],
  );
  const implausible = /1 implausible figure counted as none \(channels\[0\]\.usage\.input_tokens is 1\.5;/;
  assert.match(r.stderr, implausible);
});

test('a run folder whose index.json lists no channel is skipped and named, so every count of runs ' +
  'agrees: the header, the total row and --json', () => {
  const root = tmpDir();
  const out = join(root, 'real');
  const run = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '-q',
    join(FIXTURES, 'nested-depth-3.jsonl')]);
  assert.equal(run.status, 0, String(run.stderr));
  writeIndex(root, 'none', []);
  writeIndex(root, 'junk', [1, 'x', null], { unattributed_usd: 2 });
  const r = stats([root, '--json']);
  assert.equal(r.code, 0, r.stderr);
  const report = JSON.parse(r.stdout);
  assert.deepEqual([report.runs, report.total.runs, report.skipped], [1, 1, 2]);
  for (const name of ['none', 'junk'])
    assert.ok(
      r.stderr.includes(`skipped ${join(root, name, 'index.json')}: index.json lists no channel`),
      r.stderr,
    );
  const text = stats([root, '--by', 'agent']);
  const all = text.stdout.split('\n').find((l) => l.startsWith('all '))!.trim().split(/\s+/);
  assert.match(text.stdout.split('\n')[0], /^1 run from run folders, 2 skipped /);
  assert.equal(all[1], '1', `the total row's runs: ${all.join(' ')}`);
});

test('one run reads in the singular: 1 run from run folders, 2 runs in the plural', () => {
  const root = tmpDir();
  // Two recordings: folders of one run (one run_id) are counted once.
  const ran = (name: string, fixture: string) =>
    spawnSync(process.execPath, [BIN, '--out', join(root, name), '--stdout', 'none', '-q',
      join(FIXTURES, fixture)]);
  assert.equal(ran('one', 'foreground-fanout-3.jsonl').status, 0);
  assert.match(stats([root]).stdout, /^1 run from run folders\n/);
  assert.equal(ran('two', 'nested-depth-3.jsonl').status, 0);
  assert.match(stats([root]).stdout, /^2 runs from run folders\n/);
});

test('an index.json longer than a string Node holds is skipped by its size, named, never read', () => {
  const root = tmpDir();
  mkdirSync(join(root, 'huge'));
  const path = join(root, 'huge', 'index.json');
  // Sparse: no byte of it is stored.
  writeFileSync(path, '');
  truncateSync(path, INDEX_MAX_BYTES + 1);
  const r = stats([root, '--json']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).skipped, 1);
  const why = `${INDEX_MAX_BYTES + 1} bytes, more than the ${INDEX_MAX_BYTES} read`;
  assert.ok(r.stderr.includes(`skipped ${path}: ${why}`), r.stderr);
});
