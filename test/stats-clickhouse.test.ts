import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { writeStream } from '../bench/gen.js';
import { groupSql } from '../src/chain/stats-clickhouse.js';
import { BIN, FIXTURES, fixtureFiles, tmpDir } from './helpers/helpers.js';
import { clickhouseAvailable, startClickHouse, type ClickHouseServer } from './servers/clickhouse.js';
import { readDoc } from './helpers/docs.js';

const skip = !clickhouseAvailable() && 'clickhouse-server is not installed (.ci/run installs it)';

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 180_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}

async function statsJson(args: string[]): Promise<any> {
  const r = await cli(['stats', '--json', ...args]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

/**
 * What both paths must agree on: everything but the run's key (a folder, or the stream's
 * uuid). Dollars are float sums taken in another order, so they are compared apart, to the
 * micro-dollar; every other figure exactly.
 */
function comparable(report: any) {
  const dollars: Array<number | null> = [];
  const withoutDollars = JSON.parse(
    JSON.stringify({
      runs: report.runs,
      tables: report.tables,
      total: report.total,
      failed_total: report.failed_total,
      costliest: report.costliest.map(({ run: _run, log: _log, jsonl: _jsonl, ...s }: any) => s),
      failed: report.failed.map(({ run: _run, log: _log, jsonl: _jsonl, ...s }: any) => s),
    }),
    (key, value) => {
      if (key !== 'cost_usd') return value;
      dollars.push(value);
      return value === null ? null : 'priced';
    },
  );
  return { withoutDollars, dollars };
}

function assertSameFigures(clickhouse: any, folders: any, label = '') {
  const a = comparable(clickhouse);
  const b = comparable(folders);
  assert.deepEqual(a.withoutDollars, b.withoutDollars, label);
  a.dollars.forEach((usd, i) => {
    if (usd === null || b.dollars[i] === null) assert.equal(usd, b.dollars[i], label);
    else assert.ok(Math.abs(usd - b.dollars[i]!) < 2e-6, `${label}: $${usd} vs $${b.dollars[i]}`);
  });
}

describe('subtee stats --clickhouse: the same figures as over the run folders', { skip }, () => {
  let ch: ClickHouseServer;
  let runs: string;
  const table = 'fleet.channels';
  let sinkHasCost = false;

  before(async () => {
    ch = await startClickHouse();
    await ch.client.command({ query: 'CREATE DATABASE IF NOT EXISTS fleet' });
    runs = join(tmpDir(), 'runs');
    const sink = (extra: Record<string, unknown>) => {
      const file = join(tmpDir(), 'subtee.json');
      writeFileSync(
        file,
        JSON.stringify({
          sinks: [
            { use: 'stdout', mode: 'none' },
            { use: 'clickhouse', url: ch.url, channelsTable: table, ...extra },
          ],
        }),
      );
      return file;
    };
    // Every recorded fixture (its own uuid each), one folder per input under one --out.
    const fixtures = await cli(['--out', join(runs, 'fixtures'), '-q', '-c', sink({}), ...fixtureFiles()]);
    assert.equal(fixtures.code, 0, fixtures.stderr);
    // Generated runs with several agent types; their first lines share a uuid, so each gets a run id.
    for (const seed of [1, 2, 3]) {
      const input = join(tmpDir(), `gen-${seed}.jsonl`);
      await writeStream({ sizeBytes: 400_000, fanout: 12, shape: 'small', seed }, input);
      const r = await cli([
        '--out',
        join(runs, 'generated', `gen-${seed}`),
        '-q',
        '-c',
        sink({ runId: `gen-${seed}` }),
        input,
      ]);
      assert.equal(r.code, 0, r.stderr);
    }
    // The cost columns, when the sink that wrote the rows did not have them yet.
    const columns = await ch.rows<{ name: string }>(
      "SELECT name FROM system.columns WHERE database = 'fleet' AND table = 'channels'",
    );
    const names = new Set(columns.map((c) => c.name));
    sinkHasCost = names.has('model') && names.has('cost_usd');
    if (!sinkHasCost) {
      // A sink without them stored no models or dollars: the folders then count as written
      // before index.json carried them, and the two paths compare every other figure.
      if (!names.has('model'))
        await ch.client.command({ query: `ALTER TABLE ${table} ADD COLUMN model String` });
      if (!names.has('cost_usd'))
        await ch.client.command({ query: `ALTER TABLE ${table} ADD COLUMN cost_usd Nullable(Float64)` });
      for (const dir of [
        ...fixtureFiles().map((f) => join(runs, 'fixtures', basename(f, '.jsonl'))),
        ...[1, 2, 3].map((n) => join(runs, 'generated', `gen-${n}`)),
      ]) {
        const file = join(dir, 'index.json');
        const index = JSON.parse(readFileSync(file, 'utf8'));
        delete index.cost;
        for (const c of index.channels) {
          delete c.cost;
          delete c.models;
        }
        writeFileSync(file, JSON.stringify(index));
      }
    }
  });

  after(async () => {
    await ch?.stop();
  });

  test('per agent, per model, the total and both lists', async () => {
    const folders = await statsJson([runs, '--top', '50']);
    const clickhouse = await statsJson([
      '--clickhouse',
      ch.url,
      '--clickhouse-channels-table',
      table,
      '--top',
      '50',
    ]);
    assert.equal(folders.skipped, 0);
    assert.equal(folders.runs, fixtureFiles().length + 3, 'every run folder');
    assert.ok(
      folders.failed_total > 0 && folders.tables.agent.length >= 3,
      'failures and several agent types',
    );
    assert.ok(folders.total.elapsed_p95_ms > 0);
    if (sinkHasCost) {
      assert.ok(folders.total.cost_usd > 0, 'dollars compared too');
      assert.ok(
        folders.tables.model.some((g: any) => g.key.startsWith('claude-')),
        'models compared too',
      );
    }
    assert.equal(clickhouse.source, 'clickhouse');
    assertSameFigures(clickhouse, folders);
    assert.ok(
      folders.costliest.every((s: any) => typeof s.log === 'string'),
      'folders name the transcripts',
    );
  });

  test('--by day and --since', async () => {
    for (const args of [
      ['--by', 'day'],
      ['--by', 'day', '--since', '2026-11-30T12:00:00Z'],
      ['--since', '2027-01-01'],
    ]) {
      const folders = await statsJson([runs, ...args]);
      const clickhouse = await statsJson([
        '--clickhouse',
        ch.url,
        '--clickhouse-channels-table',
        table,
        ...args,
      ]);
      assertSameFigures(clickhouse, folders, args.join(' '));
    }
    const later = await statsJson([runs, '--since', '2026-11-30T12:00:00Z']);
    // The generated runs, and the recordings whose first timestamped line is at noon or later.
    const cutoff = Date.parse('2026-11-30T12:00:00Z');
    const recordedLater = fixtureFiles().filter((file) => {
      for (const line of readFileSync(file, 'utf8').split('\n')) {
        const at = /"timestamp":"([^"]+)"/.exec(line);
        if (at && !Number.isNaN(Date.parse(at[1]))) return Date.parse(at[1]) >= cutoff;
      }
      return false;
    }).length;
    assert.equal(later.runs, 3 + recordedLater, 'only the runs started at noon or later');
  });

  test('the documented query is the one subtee runs', async () => {
    const readme = readDoc('docs/stats.md');
    const section = readme.slice(readme.indexOf('## The same figures in SQL'));
    const block = /```sql\n([\s\S]*?)\n```/.exec(section);
    assert.ok(block, 'docs/stats.md shows the SQL');
    assert.equal(
      block[1],
      groupSql('subtee_channels', 'agent', null),
      'docs/stats.md shows the query as subtee runs it',
    );
    const rows = await ch.rows<any>(block[1].replace(/subtee_channels/g, table));
    const clickhouse = await statsJson(['--clickhouse', ch.url, '--clickhouse-channels-table', table]);
    const byKey = new Map(rows.map((r) => [r.key, r]));
    for (const g of clickhouse.tables.agent) {
      const r = byKey.get(g.key);
      assert.ok(r, g.key);
      assert.equal(Number(r.agents), g.agents);
      assert.equal(Number(r.failed), g.failed);
      assert.equal(Number(r.input_tokens) + Number(r.output_tokens), g.tokens);
      assert.equal(Number(r.elapsed_p95_ms), g.elapsed_p95_ms ?? 0);
    }
  });

  test("the totals include the runs' unattributed dollars: folders and ClickHouse both give the runs' " +
    "own total_cost_usd", async () => {
    const costs = 'fleet.costs';
    const config = join(tmpDir(), 'subtee.json');
    const sinks = [
      { use: 'stdout', mode: 'none' },
      { use: 'clickhouse', url: ch.url, channelsTable: costs, eventsTable: 'fleet.cost_events' },
    ];
    writeFileSync(config, JSON.stringify({ sinks }));
    // Recorded runs whose result counts a model no line shows, as Claude Code's does when it calls
    // one of its own beside the conversation: its dollars are the run's, and no agent's. The last
    // recording is left as it is (nothing unattributed).
    const extra: Array<[string, number]> = [
      ['nested-depth-3', 0.0015],
      ['binary-tree-depth-3', 0.0021],
      ['background-fanout-12', 0.0007],
      ['failing-beside-healthy', 0],
    ];
    const root = join(tmpDir(), 'runs');
    let runsTotal = 0;
    for (const [name, usd] of extra) {
      const lines = readFileSync(join(FIXTURES, `${name}.jsonl`), 'utf8').split('\n');
      const at = lines.map((l) => l.includes('"type":"result"')).lastIndexOf(true);
      const result = JSON.parse(lines[at]);
      if (usd > 0) {
        result.modelUsage['claude-haiku-4-5'] = {
          inputTokens: 1200,
          outputTokens: 60,
          cacheReadInputTokens: 0,
          cacheCreationInputTokens: 0,
          webSearchRequests: 0,
          costUSD: usd,
        };
        result.total_cost_usd += usd;
        lines[at] = JSON.stringify(result);
      }
      const input = join(tmpDir(), `${name}.jsonl`);
      writeFileSync(input, lines.join('\n'));
      // The independent count: each run's own dollars, from its last result line.
      runsTotal += JSON.parse(lines[at]).total_cost_usd;
      const r = await cli(['--out', join(root, name), '-q', '-c', config, input]);
      assert.equal(r.code, 0, r.stderr);
    }
    const unattributed = extra.reduce((n, [, usd]) => n + usd, 0);
    const near = (a: number, b: number, what: string) =>
      assert.ok(Math.abs(a - b) < 2e-6, `${what}: $${a}, the runs' results say $${b}`);
    const fromClickHouse = ['--clickhouse', ch.url, '--clickhouse-channels-table', costs];
    for (const by of [[], ['--by', 'day']]) {
      const folders = await statsJson([root, ...by]);
      const clickhouse = await statsJson([...fromClickHouse, ...by]);
      assert.equal(folders.runs, extra.length);
      assertSameFigures(clickhouse, folders, by.join(' ') || 'agent, model');
      for (const [source, report] of [
        ['folders', folders],
        ['clickhouse', clickhouse],
      ]) {
        near(report.total.cost_usd, runsTotal, `${source}: total`);
        near(report.total.unattributed_usd, unattributed, `${source}: total unattributed`);
        for (const [by, rows] of Object.entries<any[]>(report.tables)) {
          const sum = rows.reduce((n, g) => n + (g.cost_usd ?? 0), 0);
          near(sum, runsTotal, `${source}: the ${by} table adds up`);
          if (by === 'day') continue;
          const apart = rows.find((g) => g.key === '(unattributed)');
          assert.ok(apart, `${source}: the ${by} table's (unattributed) row`);
          assert.equal(apart.runs, 3, `${source}: runs with unattributed dollars`);
          near(apart.cost_usd, unattributed, `${source}: the ${by} table's (unattributed) row`);
        }
      }
    }
  });

  test('an unreachable server exits 3 with one line', async () => {
    const r = await cli(['stats', '--clickhouse', 'http://127.0.0.1:9']);
    assert.equal(r.code, 3, r.stderr);
    assert.match(r.stderr, /^subtee: clickhouse: cannot query .*\[ERR_CLICKHOUSE\]\n$/);
  });
});

/**
 * A loopback HTTP server that answers every query as `answer` says: a server that is not the
 * sink's ClickHouse (or a table that is not its table). Each request's query and headers are kept.
 */
async function answering(answer: (query: string, req: IncomingMessage) => string) {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const query = `${new URL(req.url ?? '/', 'http://x').searchParams.get('query') ?? ''}${body}`;
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=UTF-8' });
      res.end(answer(query, req));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { port, close: () => new Promise<void>((done) => server.close(() => done())) };
}

const GROUP_ROW = {
  key: 'Explore',
  runs: '1',
  agents: '2',
  failed: '1',
  input_tokens: '10',
  output_tokens: '5',
  cache_read_tokens: '0',
  cache_creation_tokens: '0',
  usd: 0.5,
  priced: '2',
  unknown: '0',
  unattributed: 0,
  elapsed_n: '2',
  elapsed_p50_ms: 100,
  elapsed_p95_ms: 200,
};
const SUBAGENT_ROW = {
  run: 'r1',
  channel: 'toolu_1',
  agent: 'Explore',
  model: 'claude-opus-4-7',
  status: 'failed',
  tokens: '15',
  cost_usd: 0.25,
  elapsed_ms: '100',
};

test('stats --clickhouse on a server answering garbage: ERR_CLICKHOUSE, exit 3, nothing shown', async () => {
  const line = (o: unknown) => `${JSON.stringify(o)}\n`;
  const garbage: Array<[string, 'group' | 'list', string]> = [
    ['null', 'group', 'null\n'],
    ['a number', 'group', '7\n'],
    ['an array row', 'group', '[1,2,3]\n'],
    ['a key that is an object', 'group', line({ ...GROUP_ROW, key: {} })],
    ['a count that is text', 'group', line({ ...GROUP_ROW, runs: 'many' })],
    ['a count that is an object', 'group', line({ ...GROUP_ROW, agents: { n: 1 } })],
    ['a negative sum', 'group', line({ ...GROUP_ROW, usd: -5 })],
    ['a sum no double holds', 'group', '{"key":"Explore","runs":"1","usd":1e999}\n'],
    ['a missing count', 'group', line({ key: 'Explore' })],
    ['an elapsed time that is a list', 'group', line({ ...GROUP_ROW, elapsed_p50_ms: [1] })],
    ['a subagent without a run', 'list', line({ ...SUBAGENT_ROW, run: null })],
    ['a channel that is a number', 'list', line({ ...SUBAGENT_ROW, channel: 12 })],
    ['dollars that are text', 'list', line({ ...SUBAGENT_ROW, cost_usd: 'NaN' })],
    ['tokens that are negative', 'list', line({ ...SUBAGENT_ROW, tokens: -3 })],
  ];
  const answer = (query: string, bad: string | null, where: 'group' | 'list') => {
    if (/count\(\) AS n\b/.test(query)) return line({ n: '1' });
    const list = /\bLIMIT\b/.test(query);
    if (bad !== null && (where === 'list') === list) return bad;
    return line(list ? SUBAGENT_ROW : GROUP_ROW);
  };
  // A server answering as the sink's table does: read as it is (the fake speaks the protocol).
  const good = await answering((q) => answer(q, null, 'group'));
  try {
    const r = await cli(['stats', '--json', '--clickhouse', `http://127.0.0.1:${good.port}`]);
    assert.equal(r.code, 0, r.stderr);
    const report = JSON.parse(r.stdout);
    assert.deepEqual([report.total.agents, report.costliest[0].tokens, report.failed_total], [2, 15, 1]);
  } finally {
    await good.close();
  }
  // No rows at all (an empty table): zeros, not an error.
  const empty = await answering(() => '');
  try {
    const r = await cli(['stats', '--json', '--clickhouse', `http://127.0.0.1:${empty.port}`]);
    assert.equal(r.code, 0, r.stderr);
    const report = JSON.parse(r.stdout);
    const got = [report.runs, report.total.agents, report.failed_total, report.costliest];
    assert.deepEqual(got, [0, 0, 0, []]);
  } finally {
    await empty.close();
  }
  for (const [name, where, bad] of garbage) {
    const server = await answering((q) => answer(q, bad, where));
    try {
      for (const format of [[], ['--csv'], ['--json']]) {
        const r = await cli(['stats', ...format, '--clickhouse', `http://127.0.0.1:${server.port}`]);
        assert.equal(r.code, 3, `${name}: ${r.stderr}`);
        assert.match(r.stderr, /^subtee: clickhouse: .* did not answer as .*\[ERR_CLICKHOUSE\]\n$/, name);
        assert.equal(r.stdout, '', `${name}: no table`);
      }
    } finally {
      await server.close();
    }
  }
});

test('no part of a ClickHouse URL\'s user is printed: not from a server\'s error, nor an echo', async () => {
  const users = [
    ['sk-live-4f8a9c2e7b1d', 'hunter2-secret'],
    ['user%40corp.example', 'p%3Aw%2Fd-secret'],
    ['tok_0123456789abcdef', ''],
  ];
  for (const [user, password] of users) {
    const plainUser = decodeURIComponent(user);
    const plainPassword = decodeURIComponent(password);
    const basic = Buffer.from(`${plainUser}:${plainPassword}`).toString('base64');
    const secrets = [user, plainUser, basic, ...(password ? [password, plainPassword] : [])];
    // A server that echoes what it was sent: the Authorization header, the user, the key.
    const echo = await answering((_q, req) => {
      const said = `Code: 516. Unknown user ${plainUser} (auth ${req.headers.authorization ?? ''} ` +
        `${req.headers['x-clickhouse-user'] ?? ''} ${req.headers['x-clickhouse-key'] ?? ''})`;
      return `${JSON.stringify(Object.fromEntries(Object.keys(GROUP_ROW).map((k) => [k, said])))}\n`;
    });
    try {
      const url = `http://${user}${password ? `:${password}` : ''}@127.0.0.1:${echo.port}`;
      const r = await cli(['stats', '--clickhouse', url]);
      assert.equal(r.code, 3, r.stderr);
      assert.match(r.stderr, /\*\*\*/, 'the URL shown masked');
      for (const secret of secrets) assert.ok(!r.stderr.includes(secret), `${secret} printed: ${r.stderr}`);
    } finally {
      await echo.close();
    }
  }
});

describe('ClickHouse user names are masked in what the real server says', { skip }, () => {
  let ch: ClickHouseServer;
  before(async () => {
    ch = await startClickHouse();
  });
  after(async () => {
    await ch?.stop();
  });

  test('a user the server does not know: stats and the sink print it as ***', async () => {
    const port = new URL(ch.url).port;
    // Both at once: the sink's part waits out its delivery deadline.
    const users = [
      ['sk-live-4f8a9c2e7b1d', 'hunter2-secret'],
      ['tok_0123456789abcdef', ''],
    ];
    await Promise.all(users.map(async ([user, password]) => {
      const url = `http://${user}${password ? `:${password}` : ''}@127.0.0.1:${port}`;
      const stats = await cli(['stats', '--clickhouse', url]);
      assert.equal(stats.code, 3, stats.stderr);
      const out = join(tmpDir(), 'o');
      const input = join(tmpDir(), 'in.jsonl');
      writeFileSync(input, readFileSync(fixtureFiles()[0]));
      const sink = await cli(['--out', out, '--stdout', 'none', '--clickhouse', url, input]);
      for (const [name, text] of [
        ['stats', stats.stderr],
        ['sink', sink.stderr],
        ['index.json', readFileSync(join(out, 'index.json'), 'utf8')],
      ]) {
        if (name !== 'index.json') assert.match(text, /\*\*\*/, `${name} shows the URL masked: ${text}`);
        for (const secret of [user, password].filter((s) => s.length > 0))
          assert.ok(!text.includes(secret), `${name} printed ${secret}: ${text}`);
      }
    }));
  });
});
