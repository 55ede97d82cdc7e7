import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, before, describe, test } from 'node:test';
import { generate } from '../bench/gen.js';
import type { RecordBatch } from '../src/model/record.js';
import { createClickHouseSink } from '../src/chain/sinks/clickhouse.js';
import { findSpoolFiles } from '../src/chain/sinks/clickhouse-spool.js';
import { BIN, checkOutput, closedPort, fixtureFiles, linesOf, tmpDir } from './helpers/helpers.js';
import { routeThrough } from './helpers/otlp-tree.js';
import { clickhouseAvailable, startClickHouse, type ClickHouseServer } from './servers/clickhouse.js';

interface CliRun {
  code: number | null;
  stderr: string;
  out: string;
}

/** The real subtee CLI; stdin is a pipe the caller feeds when `feed` is given. */
function subtee(
  args: string[],
  o: { out?: string; feed?: (stdin: NodeJS.WritableStream) => Promise<void> } = {},
): Promise<CliRun> {
  const out = o.out ?? join(tmpDir(), 'out');
  const child = spawn(process.execPath, [BIN, '--out', out, '--stdout', 'none', '-q', ...args], {
    env: { PATH: process.env.PATH },
    stdio: [o.feed ? 'pipe' : 'ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
  const closed = new Promise<CliRun>((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, out });
    }),
  );
  // subtee may stop reading early (a refused option, a stall): a write into the closed pipe is no error here.
  child.stdin?.on('error', () => {});
  if (o.feed)
    o.feed(child.stdin!).then(
      () => child.stdin!.end(),
      (err) => child.stdin!.destroy(err),
    );
  return closed;
}

function config(sink: Record<string, unknown>): string {
  const file = join(tmpDir(), 'subtee.json');
  writeFileSync(
    file,
    JSON.stringify({
      sinks: [
        { use: 'stdout', mode: 'none' },
        { use: 'clickhouse', ...sink },
      ],
    }),
  );
  return file;
}

const lit = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
const indexOf = (out: string) => JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
const runIdOf = (file: string) => JSON.parse(linesOf(readFileSync(file))[0]).uuid as string;
const fixture = (name: string) => fixtureFiles().find((f) => basename(f) === `${name}.jsonl`)!;

async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** What ClickHouse holds for one run must be exactly the run's index.json, each line once. */
async function assertRunStored(
  ch: ClickHouseServer,
  run: string,
  index: any,
  label: string,
  tables = { events: 'subtee_events', channels: 'subtee_channels' },
) {
  const [ev] = await ch.rows<{ n: string; lines: string; inp: string; outp: string }>(
    `SELECT count() AS n, uniqExact(line) AS lines, sum(input_tokens) AS inp, sum(output_tokens) AS outp FROM ${tables.events} FINAL WHERE run = ${lit(run)}`,
  );
  assert.equal(Number(ev.n), index.input.lines, `${label}: one event row per input line`);
  assert.equal(Number(ev.lines), index.input.lines, `${label}: distinct lines`);
  const sum = (k: string) => index.channels.reduce((n: number, c: any) => n + (c.usage[k] ?? 0), 0);
  assert.equal(Number(ev.inp), sum('input_tokens'), `${label}: input tokens`);
  // Event rows carry each line's own usage; index.json's output tokens are true or estimated
  // (the channel rows carry those) unless the stream's own are all there is.
  if (index.cost.output_tokens === 'stream')
    assert.equal(Number(ev.outp), sum('output_tokens'), `${label}: output tokens`);
  const channels = await ch.rows<any>(
    `SELECT channel, parent, depth, agent, status, lines, output_tokens, model, cost_usd FROM ${tables.channels} FINAL WHERE run = ${lit(run)} ORDER BY channel`,
  );
  const expected = index.channels
    .map((c: any) => ({
      channel: c.id ?? '',
      parent: c.parent ?? '',
      depth: c.depth ?? -1,
      agent: c.id === null ? 'main' : (c.agent ?? ''),
      status: c.status,
      lines: String(c.lines),
      output_tokens: String(c.usage.output_tokens ?? 0),
      model: c.models[0] ?? '',
      cost_usd: c.cost.usd,
    }))
    .sort((a: any, b: any) => (a.channel < b.channel ? -1 : 1));
  assert.deepEqual(channels, expected, `${label}: channel rows`);
}

/** The three example queries of the README. */
export const EXAMPLE_QUERIES = {
  'Which subagent types fail most': `SELECT agent, count() AS subagents, countIf(status = 'failed') AS failed,
       round(failed / subagents, 2) AS failure_rate
FROM subtee_channels FINAL
WHERE channel != ''
GROUP BY agent
ORDER BY failed DESC, subagents DESC`,
  'Tokens per agent type per day': `SELECT toDate(ts) AS day, agent, sum(input_tokens) AS input, sum(output_tokens) AS output,
       sum(cache_read_tokens) AS cache_read
FROM subtee_events FINAL
GROUP BY day, agent
ORDER BY day, agent`,
  'Which runs stalled, and on what': `SELECT run, channel, agent, description, last_tool, last_seen
FROM (SELECT run, channel, agent, description, last_seen
      FROM subtee_channels FINAL WHERE stalled = 1 AND status = 'running')
ANY LEFT JOIN (SELECT run, channel, argMax(tool, line) AS last_tool
               FROM subtee_events FINAL WHERE kind = 'tool_use' GROUP BY run, channel)
USING (run, channel)
ORDER BY run, channel`,
};

describe(
  'ClickHouse sink against a real ClickHouse server',
  { skip: !clickhouseAvailable() && 'clickhouse-server is not installed (.ci/run installs it)' },
  () => {
    let ch: ClickHouseServer;
    before(async () => {
      ch = await startClickHouse();
    });
    after(async () => {
      await ch?.stop();
    });

    test("every fixture through `subtee --clickhouse URL`: one row per line, index.json's channel rows, the same tokens", async () => {
      for (const file of fixtureFiles()) {
        const r = await subtee(['--clickhouse', ch.url, file]);
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stderr, '', 'no warning');
        await assertRunStored(ch, runIdOf(file), indexOf(r.out), basename(file));
        assert.deepEqual(findSpoolFiles(r.out), [], 'nothing spooled');
      }
    });

    test('tables an older version made gain the model and cost_usd columns; their old rows read the defaults', async () => {
      const oldChannels = `CREATE TABLE old_channels (
  run String, session String, channel String, parent String, depth Int16, agent String, description String,
  status String, background Int8, orphan UInt8, summary String, lines UInt64,
  text_blocks UInt32, thinking_blocks UInt32, tool_uses UInt32, tool_results UInt32,
  input_tokens UInt64, output_tokens UInt64, cache_read_tokens UInt64, cache_creation_tokens UInt64,
  first_seen DateTime('UTC'), last_seen DateTime('UTC'), first_seen_ms UInt64, last_seen_ms UInt64,
  stalled UInt8, interrupted UInt8, ver UInt64
) ENGINE = ReplacingMergeTree(ver) ORDER BY (run, channel)`;
      await ch.client.command({ query: oldChannels });
      await ch.client.command({
        query: "INSERT INTO old_channels (run, channel, ver) VALUES ('older-run', '', 1)",
      });
      const file = fixture('nested-depth-3');
      const r = await subtee([
        '-c',
        config({ url: ch.url, eventsTable: 'old_events', channelsTable: 'old_channels' }),
        file,
      ]);
      assert.equal(r.code, 0, r.stderr);
      await assertRunStored(ch, runIdOf(file), indexOf(r.out), 'old table', {
        events: 'old_events',
        channels: 'old_channels',
      });
      const [older] = await ch.rows<any>("SELECT model, cost_usd FROM old_channels WHERE run = 'older-run'");
      assert.deepEqual(older, { model: '', cost_usd: null });
      // A second run finds the columns there and adds nothing.
      const again = await subtee([
        '-c',
        config({ url: ch.url, eventsTable: 'old_events', channelsTable: 'old_channels' }),
        fixture('foreground-fanout-3'),
      ]);
      assert.equal(again.code, 0, again.stderr);
      await assertRunStored(
        ch,
        runIdOf(fixture('foreground-fanout-3')),
        indexOf(again.out),
        'old table, second run',
        { events: 'old_events', channels: 'old_channels' },
      );
    });

    test('the same run sent again (a replay, a resend) counts once', async () => {
      const file = fixture('binary-tree-depth-3');
      const first = await subtee(['--clickhouse', ch.url, file]);
      const second = await subtee(['--clickhouse', ch.url, file]);
      assert.equal(second.code, 0, second.stderr);
      await assertRunStored(ch, runIdOf(file), indexOf(first.out), 'sent twice');
    });

    test('server killed with SIGKILL mid-run and restarted: nothing lost, nothing counted twice', async () => {
      const lines = [...generate({ sizeBytes: 3 * 1024 * 1024, fanout: 40, shape: 'small', seed: 11 })];
      const thirds = [0, 1, 2].map((i) =>
        Buffer.from(
          lines
            .slice(Math.floor((i * lines.length) / 3), Math.floor(((i + 1) * lines.length) / 3))
            .join('\n') + '\n',
        ),
      );
      const out = join(tmpDir(), 'out');
      const cfg = config({
        url: ch.url,
        runId: 'killed-server',
        batchRows: 500,
        flushIntervalMs: 20,
        maxRetryDelayMs: 100,
        flushTimeoutMs: 60_000,
      });
      const count = async () => {
        try {
          return Number(
            (
              await ch.rows<{ n: string }>(
                `SELECT count() AS n FROM subtee_events WHERE run = 'killed-server'`,
              )
            )[0].n,
          );
        } catch {
          return 0; // the sink has not created the table yet
        }
      };
      const r = await subtee(['-c', cfg], {
        out,
        feed: async (stdin) => {
          stdin.write(thirds[0]);
          await until('the first rows in ClickHouse', async () => (await count()) > 0);
          await ch.kill();
          stdin.write(thirds[1]);
          await until(
            'rows spooled while the server is gone',
            () => existsSync(join(out, 'clickhouse-spool.jsonl')) || findSpoolFiles(out).length > 0,
          );
          await ch.start();
          stdin.write(thirds[2]);
        },
      });
      assert.equal(r.code, 0, r.stderr);
      assert.match(
        r.stderr,
        /warning CLICKHOUSE_UNAVAILABLE: ClickHouse at http:\/\/127\.0\.0\.1:\d+ is not taking rows/,
      );
      assert.doesNotMatch(r.stderr, /CLICKHOUSE_SPOOLED/);
      assert.deepEqual(findSpoolFiles(out), [], 'the spool was sent and removed');
      const { index } = checkOutput(Buffer.concat(thirds), out, 'killed server');
      assert.ok(index.input.lines > 5000);
      await assertRunStored(ch, 'killed-server', index, 'killed server');
    });

    test('server away for the whole run: every row waits in OUT; the next run sends it with --clickhouse-resend, once', async () => {
      // Tables of this test alone: the runs below must not be found in rows other tests stored.
      const tables = { eventsTable: 'resend_events', channelsTable: 'resend_channels' };
      const stored = { events: tables.eventsTable, channels: tables.channelsTable };
      const runs = tmpDir();
      // With pino on too: its destination is closed before the last warning comes.
      const cfg = config({
        url: `http://127.0.0.1:${await closedPort()}`,
        ...tables,
        maxRetryDelayMs: 50,
        flushTimeoutMs: 300,
      });
      const pinoLog = join(tmpDir(), 'events.log');
      const away = await subtee(['-c', cfg, `--pino=${pinoLog}`, fixture('failing-beside-healthy')], {
        out: join(runs, 'run-1'),
      });
      assert.equal(away.code, 0, away.stderr);
      const spool = join(runs, 'run-1', 'clickhouse-spool.jsonl');
      const spooled = linesOf(readFileSync(spool)).length;
      const index1 = indexOf(away.out);
      assert.ok(spooled >= index1.input.lines + index1.channels.length);
      assert.match(away.stderr, /warning CLICKHOUSE_UNAVAILABLE: .*ECONNREFUSED/);
      assert.match(
        away.stderr,
        new RegExp(
          `warning CLICKHOUSE_SPOOLED: ${spooled} rows not sent to ClickHouse at http://127\\.0\\.0\\.1:\\d+ \\(.*ECONNREFUSED.*\\): kept in ${spool}; send them with --clickhouse-resend ${join(runs, 'run-1')}`,
        ),
      );
      checkOutput(
        readFileSync(fixture('failing-beside-healthy')),
        away.out,
        'files while the server is away',
      );
      const copy = join(tmpDir(), 'spool-copy.jsonl');
      copyFileSync(spool, copy);

      // The next run of the fleet sends its own rows and what run-1 left behind.
      const next = await subtee(
        ['-c', config({ url: ch.url, ...tables, resend: runs }), fixture('foreground-fanout-3')],
        { out: join(runs, 'run-2') },
      );
      assert.equal(next.code, 0, next.stderr);
      assert.equal(next.stderr, '');
      assert.deepEqual(findSpoolFiles(runs), [], "run-1's spool was sent and removed");
      await assertRunStored(ch, runIdOf(fixture('failing-beside-healthy')), index1, 'resent', stored);
      await assertRunStored(
        ch,
        runIdOf(fixture('foreground-fanout-3')),
        indexOf(next.out),
        'next run',
        stored,
      );

      // A resend that was cut short after the insert (the file still there) counts once too.
      const again = tmpDir();
      copyFileSync(copy, join(again, 'clickhouse-spool.jsonl'));
      const third = await subtee([
        '-c',
        config({ url: ch.url, ...tables, resend: again }),
        fixture('nested-depth-3-task-tool'),
      ]);
      assert.equal(third.code, 0, third.stderr);
      await assertRunStored(ch, runIdOf(fixture('failing-beside-healthy')), index1, 'resent twice', stored);
      await assertRunStored(
        ch,
        runIdOf(fixture('nested-depth-3-task-tool')),
        indexOf(third.out),
        'third run',
        stored,
      );
      const [{ runs: n }] = await ch.rows<{ runs: string }>(
        `SELECT uniqExact(run) AS runs FROM ${stored.events}`,
      );
      assert.equal(Number(n), 3, 'three runs, each under its own id');
    });

    test('--clickhouse-resend from the command line', async () => {
      const runs = tmpDir();
      const cfg = config({
        url: `http://127.0.0.1:${await closedPort()}`,
        runId: 'resent-by-flag',
        maxRetryDelayMs: 50,
        flushTimeoutMs: 300,
      });
      const away = await subtee(['-c', cfg, fixture('forwarding-off')], { out: join(runs, 'run-1') });
      assert.equal(away.code, 0, away.stderr);
      assert.equal(findSpoolFiles(runs).length, 1);
      const next = await subtee(['--clickhouse', ch.url, '--clickhouse-resend', runs], {
        out: join(runs, 'run-2'),
        feed: async () => {},
      });
      assert.equal(next.code, 0, next.stderr);
      assert.deepEqual(findSpoolFiles(runs), []);
      await assertRunStored(ch, 'resent-by-flag', indexOf(away.out), 'resent from the command line');
    });

    test('a server that stops answering (SIGSTOP) holds the input back once the queue is full; resumed, every row arrives', async () => {
      const batches: RecordBatch[] = [];
      const { run, index } = await routeThrough(readFileSync(fixture('binary-tree-depth-3')), (b) => {
        for (const rec of b) batches.push([rec]);
      });
      const sink = createClickHouseSink({
        url: ch.url,
        runId: 'paused-server',
        session: run,
        batchRows: 10,
        maxQueueRows: 20,
        flushIntervalMs: 1,
        timeoutMs: 120_000,
        spoolDir: tmpDir(),
      });
      let passed = 0;
      ch.pause();
      try {
        const done = pipeline(
          Readable.from(batches, { objectMode: true }),
          sink,
          new Writable({ objectMode: true, write: (_b, _e, cb) => (passed++, cb()) }),
        );
        await until('the queue to fill', () => passed > 0);
        const settled = async () => {
          for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
        };
        await settled();
        const held = passed;
        await settled();
        assert.ok(held < batches.length, `input held back (${held} of ${batches.length})`);
        assert.equal(passed, held, 'and it stays held');
        ch.resume();
        await done;
        assert.equal(passed, batches.length);
      } finally {
        ch.resume();
      }
      await assertRunStored(ch, 'paused-server', index, 'paused server');
    });

    test("the README's example queries, on a fleet of test runs", async (t) => {
      const fleet = await startClickHouse();
      try {
        const indexes: any[] = [];
        for (const name of ['background-fanout-12', 'binary-tree-depth-3', 'failing-beside-healthy']) {
          const r = await subtee(['--clickhouse', fleet.url, fixture(name)]);
          assert.equal(r.code, 0, r.stderr);
          indexes.push(indexOf(r.out));
        }
        // A run that stalls: half of a nested run, then silence.
        const half = Buffer.from(
          linesOf(readFileSync(fixture('nested-depth-3')))
            .slice(0, 14)
            .join('\n') + '\n',
        );
        // Silence counts from the start of the chain: 4 s, so that a loaded machine loading the
        // sink's client is not taken for the stall.
        const stalled = await subtee(
          [
            '--clickhouse',
            fleet.url,
            '--idle-timeout-ms',
            '4000',
            '--model-timeout-ms',
            '4000',
            '--stall-grace-ms',
            '0',
          ],
          {
            feed: async (stdin) => {
              stdin.write(half);
              await new Promise(() => {}); // the input stays open: the agent hangs
            },
          },
        );
        assert.equal(stalled.code, 124, stalled.stderr);
        indexes.push(indexOf(stalled.out));

        const results: Record<string, any[]> = {};
        for (const [title, sql] of Object.entries(EXAMPLE_QUERIES)) {
          results[title] = await fleet.rows(sql);
          const pretty = await (
            await fetch(`${fleet.url}/?query=${encodeURIComponent(`${sql} FORMAT PrettyCompactNoEscapes`)}`)
          ).text();
          t.diagnostic(`${title}\n${sql}\n${pretty}`);
        }
        const subagents = indexes.flatMap((i) => i.channels.filter((c: any) => c.id !== null));
        const byType = results['Which subagent types fail most'];
        assert.deepEqual(
          byType.map((r) => [r.agent, Number(r.subagents), Number(r.failed)]),
          [['general-purpose', subagents.length, subagents.filter((c) => c.status === 'failed').length]],
        );
        const stored = new Map<string, number>();
        for (const row of results['Tokens per agent type per day'])
          stored.set(row.agent, (stored.get(row.agent) ?? 0) + Number(row.input));
        const expected = new Map<string, number>();
        for (const c of indexes.flatMap((i) => i.channels))
          expected.set(
            c.id === null ? 'main' : c.agent,
            (expected.get(c.id === null ? 'main' : c.agent) ?? 0) + (c.usage.input_tokens ?? 0),
          );
        assert.deepEqual(stored, expected, 'input tokens per agent type');
        const stuck = results['Which runs stalled, and on what'];
        const running = indexes[3].channels.filter((c: any) => c.status === 'running');
        assert.deepEqual(stuck.map((r) => r.channel).sort(), running.map((c: any) => c.id ?? '').sort());
        assert.ok(stuck.every((r) => r.run === runIdOf(fixture('nested-depth-3'))));
        assert.ok(
          stuck.some((r) => r.last_tool === 'Agent'),
          'waiting on the subagent it spawned',
        );
      } finally {
        await fleet.stop();
      }
    });
  },
);

test('a URL that is not one, or an unsafe table name, fails fast with one line', async () => {
  for (const [args, message] of [
    [
      ['--clickhouse', 'not a url'],
      /subtee: --clickhouse must be an http or https URL, not "not a url" \[ERR_BAD_OPTION\]/,
    ],
    [
      ['-c', config({ url: 'ftp://u:secret@h' })],
      /sinks\[\d\]\.url: must be an http or https URL \[ERR_CONFIG\]/,
    ],
    [
      ['-c', config({ url: 'http://127.0.0.1:1', eventsTable: 'x; DROP TABLE y' })],
      /subtee: clickhouse: eventsTable must be a name such as subtee_events or db\.subtee_events, not "x; DROP TABLE y" \[ERR_BAD_OPTION\]/,
    ],
    [['--clickhouse-resend', '/tmp'], /--clickhouse-resend DIR needs --clickhouse URL.* \[ERR_USAGE\]/],
  ] as const) {
    const r = await subtee([...args], {
      feed: async (stdin) => void stdin.write(readFileSync(fixture('nested-depth-3'))),
    });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, message);
    assert.equal(r.stderr.trim().split('\n').length, 1);
  }
});
