import assert from 'node:assert/strict';
import { EXIT } from '../src/errors.js';
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, before, describe, test } from 'node:test';
import { generate } from '../bench/gen.js';
import type { RecordBatch } from '../src/model/record.js';
import { type ClickHouseSinkOptions, createClickHouseSink } from '../src/chain/sinks/clickhouse.js';
import {
  claimFile,
  findSpoolFiles,
  REJECTS_FILE,
  SPOOL_FILE,
} from '../src/chain/sinks/clickhouse-spool.js';
import {
  BIN,
  checkOutput,
  closedPort,
  FIXTURES,
  fixtureFiles,
  linesOf,
  tmpDir,
  transcriptsEnded,
} from './helpers/helpers.js';
import { feedThrough, ORPHAN_FIRST, orphanFirstLines } from './helpers/feed.js';
import { routeThrough } from './helpers/otlp-tree.js';
import { clickhouseAvailable, type ClickHouseServer, startClickHouse } from './servers/clickhouse.js';
import { createServer, type IncomingHttpHeaders, request } from 'node:http';
import { Session } from '../src/model/session.js';
import { tableDdl, type Entry } from '../src/chain/sinks/clickhouse-rows.js';

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

/**
 * Polls `check` until it holds. What it waits for comes within milliseconds when the sink works;
 * the bound, generous for a loaded machine, makes a sink that never gets there fail instead of hang.
 */
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
  await assertToolsStored(ch, run, index, label, tables.events);
  const channels = await ch.rows<any>(
    `SELECT channel, parent, depth, agent, status, lines, output_tokens, model, cost_usd, unattributed_usd
     FROM ${tables.channels} FINAL WHERE run = ${lit(run)} ORDER BY channel`,
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
      // The run's dollars no channel shows, on the main conversation's row alone.
      unattributed_usd: c.id === null ? index.cost.unattributed_usd : null,
    }))
    .sort((a: any, b: any) => (a.channel < b.channel ? -1 : 1));
  assert.deepEqual(channels, expected, `${label}: channel rows`);
}

/** The events table's tool_uses and tool_results of a run, summed per channel, are index.json's counts. */
async function assertToolsStored(
  ch: ClickHouseServer,
  run: string,
  index: any,
  label: string,
  table: string,
) {
  const rows = await ch.rows<{ channel: string; uses: string; results: string }>(
    `SELECT channel, sum(tool_uses) AS uses, sum(tool_results) AS results FROM ${table} FINAL
     WHERE run = ${lit(run)} GROUP BY channel`,
  );
  const got = Object.fromEntries(rows.map((r) => [r.channel, [Number(r.uses), Number(r.results)]]));
  const expected = Object.fromEntries(
    index.channels.map((c: any) => [c.id ?? '', [c.counts.tool_use, c.counts.tool_result]]),
  );
  assert.deepEqual(got, expected, `${label}: tool calls and results per channel`);
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

    test("every fixture through `subtee --clickhouse URL`: one row per line, index.json's channel rows, " +
      'the same tokens and tool counts', async () => {
      for (const file of fixtureFiles()) {
        const r = await subtee(['--clickhouse', ch.url, file]);
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stderr, '', 'no warning');
        await assertRunStored(ch, runIdOf(file), indexOf(r.out), basename(file));
        assert.deepEqual(findSpoolFiles(r.out), [], 'nothing spooled');
      }
    });

    test('tables an older version made gain the model and cost_usd columns (channels) and ' +
      'tool_uses and tool_results (events); their old rows read the defaults', async () => {
      const oldEvents = tableDdl('events', 'old_events')
        .replace('  tool_uses UInt32, tool_results UInt32,\n', '');
      assert.doesNotMatch(oldEvents, /tool_uses/);
      await ch.client.command({ query: oldEvents });
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
      const [older] = await ch.rows<any>(
        "SELECT model, cost_usd, unattributed_usd FROM old_channels WHERE run = 'older-run'",
      );
      assert.deepEqual(older, { model: '', cost_usd: null, unattributed_usd: null });
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

    test("mapped producers (Codex, Copilot, Gemini): a line's derived rows survive FINAL and OPTIMIZE " +
      "FINAL; their tool counts are index.json's", async () => {
      for (const name of ['codex-spawn', 'copilot-spawn', 'gemini-spawn']) {
        const file = join(FIXTURES, 'other-agents', `${name}.jsonl`);
        const run = `mapped-${name}`;
        const r = await subtee(['-c', config({ url: ch.url, runId: run }), file]);
        assert.equal(r.code, 0, r.stderr);
        const index = indexOf(r.out);
        // The recordings name no priced model; nothing else to warn about.
        const codes = index.warnings
          .map((w: any) => w.code)
          .filter((c: string) => c !== 'UNKNOWN_MODEL_PRICE');
        assert.deepEqual(codes, [], r.stderr);
        // Rows as inserted (no merge yet, one clean run): what the sink wrote.
        const rowsOf = async (final: string) =>
          ch.rows<Record<'channel' | 'line' | 'part' | 'type' | 'kind' | 'tool_use_id', string>>(
            `SELECT channel, line, part, type, kind, tool_use_id FROM subtee_events ${final}
             WHERE run = ${lit(run)} ORDER BY line, part`,
          );
        const written = await rowsOf('');
        assert.ok(written.length > index.input.lines, `${name}: some lines stand for more than one row`);
        assert.deepEqual(await rowsOf('FINAL'), written, `${name}: FINAL keeps every row`);
        await ch.client.command({ query: 'OPTIMIZE TABLE subtee_events FINAL' });
        assert.deepEqual(await rowsOf(''), written, `${name}: a merge keeps every row`);
        // Independently: index.json's lines per channel (the spawn's tool call on the parent,
        // the subagent's prompt on its own) are the rows per channel.
        const perChannel = new Map<string, number>();
        for (const row of written) perChannel.set(row.channel, (perChannel.get(row.channel) ?? 0) + 1);
        assert.deepEqual(
          Object.fromEntries(perChannel),
          Object.fromEntries(index.channels.map((c: any) => [c.id ?? '', c.lines])),
          `${name}: rows per channel against index.json`,
        );
        await assertToolsStored(ch, run, index, name, 'subtee_events');
      }
    });

    test('an events table an older version keyed on (run, line): every ' +
      'row written, and a warning says FINAL keeps one per line', async () => {
      await ch.client.command({
        query: tableDdl('events', 'oldkey_events')
          .replace(' part UInt32,', '')
          .replace('ORDER BY (run, line, part)', 'ORDER BY (run, line)'),
      });
      const file = join(FIXTURES, 'other-agents', 'gemini-spawn.jsonl');
      const run = 'old-key-run';
      const r = await subtee(['-c', config({ url: ch.url, runId: run, eventsTable: 'oldkey_events' }), file]);
      assert.equal(r.code, 0, r.stderr);
      const index = indexOf(r.out);
      const codes = index.warnings.map((w: any) => w.code).filter((c: string) => c !== 'UNKNOWN_MODEL_PRICE');
      assert.deepEqual(codes, ['CLICKHOUSE_OLD_KEY'], r.stderr);
      assert.match(r.stderr, /CLICKHOUSE_OLD_KEY: oldkey_events is keyed on \(run, line\).*RENAME TABLE oldkey_events/);
      const lines = index.channels.reduce((n: number, c: any) => n + c.lines, 0);
      const [raw] = await ch.rows<{ n: string }>(
        `SELECT count() AS n FROM oldkey_events WHERE run = ${lit(run)}`,
      );
      assert.equal(Number(raw.n), lines, 'every row written, part column added');
      // A Claude Code run has one row per line: nothing to warn about on the same table.
      const oldKeyConfig = config({ url: ch.url, eventsTable: 'oldkey_events' });
      const claude = await subtee(['-c', oldKeyConfig, fixture('nested-depth-3')]);
      assert.equal(claude.code, 0, claude.stderr);
      assert.deepEqual(indexOf(claude.out).warnings, []);
    });

    test('a table named subtee_events of another shape is left as it is: one CLICKHOUSE_TABLE line ' +
      'names it and its columns, every row waits in the spool once, none is filed as refused', async () => {
      await ch.client.command({ query: 'CREATE DATABASE IF NOT EXISTS shape' });
      await ch.client.command({
        query:
          'CREATE TABLE shape.subtee_events (run String, line UInt64, x UInt8) ' +
          'ENGINE = MergeTree ORDER BY run',
      });
      const file = fixture('nested-depth-3');
      const started = Date.now();
      const r = await subtee(['--clickhouse', `${ch.url}/shape`, file]);
      const tookMs = Date.now() - started;
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(
        [...r.stderr.matchAll(/warning (\w+):/g)].map((m) => m[1]),
        ['CLICKHOUSE_TABLE', 'CLICKHOUSE_SPOOLED'],
        r.stderr,
      );
      const where = escaped(`${ch.url}/shape`);
      const spool = join(r.out, SPOOL_FILE);
      assert.match(
        r.stderr,
        new RegExp(
          `warning CLICKHOUSE_TABLE: subtee_events at ${where} is not a table subtee writes \\(no column ` +
            `session, ts, ts_ms and \\d+ more\\): it is left as it is; rows are kept in ${escaped(spool)}, ` +
            'not tried again in this run \\(RENAME TABLE subtee_events away or set eventsTable',
        ),
      );
      const columns = await ch.rows<{ name: string }>('DESCRIBE TABLE shape.subtee_events');
      assert.deepEqual(columns.map((c) => c.name), ['run', 'line', 'x'], 'not altered');
      const [{ n }] = await ch.rows<{ n: string }>('SELECT count() AS n FROM shape.subtee_events');
      assert.equal(Number(n), 0);
      assert.equal(existsSync(join(r.out, REJECTS_FILE)), false, 'no row filed as refused');
      assert.deepEqual(findSpoolFiles(r.out), [spool]);
      const entries = linesOf(readFileSync(spool)).map((l) => JSON.parse(l) as Entry);
      const lines = entries.filter((e) => e.t === 'events').map((e) => (e.r as { line: number }).line);
      assert.deepEqual(
        lines.sort((a, b) => a - b),
        linesOf(readFileSync(file)).map((_, i) => i + 1),
        'every line once',
      );
      assert.match(
        r.stderr,
        new RegExp(
          `warning CLICKHOUSE_SPOOLED: ${entries.length} rows not sent to ClickHouse at ${where} ` +
            `\\(subtee_events is not subtee's table\\): kept in ${escaped(spool)}; `,
        ),
      );
      assert.ok(tookMs < 10_000, `ended in ${tookMs} ms, not after flushTimeoutMs`);
    });

    test('a second signal ends the wait for a server that does not answer (SIGSTOP) at once; ' +
      'the rows wait in the spool, each once', async () => {
      const file = fixture('nested-depth-3');
      const bytes = readFileSync(file);
      const out = join(tmpDir(), 'out');
      // The files sink first: its transcripts' last lines, written when the input stops, say the
      // end has come (index.json waits for the clickhouse sink after it).
      const cfg = join(tmpDir(), 'subtee.json');
      const sink = { url: ch.url, runId: 'two-signals', flushTimeoutMs: 30_000, timeoutMs: 30_000 };
      writeFileSync(
        cfg,
        JSON.stringify({
          sinks: [{ use: 'files', out }, { use: 'stdout', mode: 'none' }, { use: 'clickhouse', ...sink }],
        }),
      );
      ch.pause();
      try {
        let endInput!: () => void;
        const child = spawn(process.execPath, [BIN, '-q', '-c', cfg], {
          env: { PATH: process.env.PATH },
          stdio: ['pipe', 'ignore', 'pipe'],
        });
        let stderr = '';
        child.stderr!.on('data', (d) => (stderr += d));
        const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
        child.stdin!.on('error', () => {});
        child.stdin!.write(bytes);
        void new Promise<void>((r) => (endInput = r)).then(() => child.stdin!.end());
        try {
          const main = join(out, 'main.jsonl');
          await until('the lines filed', () => existsSync(main) && readFileSync(main).length > 0);
          // The first stops the input: the transcripts end, then ClickHouse's end waits
          // (flushTimeoutMs) for the server. The second ends the wait; index.json is written.
          child.kill('SIGTERM');
          await until('the transcripts ended', () => transcriptsEnded(out));
          const second = Date.now();
          child.kill('SIGTERM');
          const code = await exited;
          const tookMs = Date.now() - second;
          assert.equal(code, 143, stderr);
          assert.ok(tookMs < 5000, `exited ${tookMs} ms after the second signal`);
          assert.equal(indexOf(out).interrupted, true, 'the first signal stopped the input');
        } finally {
          endInput();
          child.kill('SIGKILL');
        }
        const entries = linesOf(readFileSync(join(out, SPOOL_FILE))).map((l) => JSON.parse(l) as Entry);
        const lines = entries.filter((e) => e.t === 'events').map((e) => (e.r as { line: number }).line);
        assert.deepEqual(
          lines.sort((a, b) => a - b),
          linesOf(bytes).map((_, i) => i + 1),
          'every line once',
        );
      } finally {
        ch.resume();
      }
    });

    test('the same run sent again (a replay, a resend) counts once', async () => {
      const file = fixture('binary-tree-depth-3');
      const first = await subtee(['--clickhouse', ch.url, file]);
      const second = await subtee(['--clickhouse', ch.url, file]);
      assert.equal(second.code, 0, second.stderr);
      await assertRunStored(ch, runIdOf(file), indexOf(first.out), 'sent twice');
    });

    test('a run fed at once and a line at a time inserts the same rows: a status row carries the ' +
      'figures its line froze, an opened channel\'s none, the ledger\'s final ones only the final row',
    async () => {
      const file = fixture('nested-depth-3');
      const lines = linesOf(readFileSync(file));
      /** Every row one run inserted, unmerged (no FINAL), the run column left out, in order. */
      const run = async (runId: string, lineByLine: boolean) => {
        await feedThrough(lines, lineByLine, (session) => [
          createClickHouseSink({ url: ch.url, runId, session }),
        ]);
        const rows = async (table: string, order: string) =>
          (await ch.rows<any>(`SELECT * FROM ${table} WHERE run = ${lit(runId)} ORDER BY ${order}`)).map(
            ({ run: _run, ...row }) => row,
          );
        return {
          events: await rows('subtee_events', 'line, part'),
          channels: await rows('subtee_channels', 'ver, channel, status'),
        };
      };
      const atOnce = await run('fed-at-once', false);
      const lineByLine = await run('fed-line-by-line', true);
      assert.equal(atOnce.events.length, lines.length);
      assert.deepEqual(lineByLine.events, atOnce.events);
      assert.deepEqual(lineByLine.channels, atOnce.channels);

      // Independently: each subagent ends before the result line, so its status row shows the
      // stream's output tokens as of that line at table prices; the final rows, the result's.
      const statuses = atOnce.channels.filter((r) => r.channel !== '' && r.status !== 'running');
      const ended = statuses.filter((r) => Number(r.ver) <= lines.length);
      assert.equal(ended.length, 3, 'one status row per subagent, before the final rows');
      for (const row of ended) {
        const latest = new Map<string, number>();
        for (const l of lines.slice(0, Number(row.ver))) {
          const v = JSON.parse(l);
          if (v.type === 'assistant' && v.parent_tool_use_id === row.channel)
            latest.set(v.message.id, v.message.usage.output_tokens);
        }
        const output = [...latest.values()].reduce((a, b) => a + b, 0);
        assert.deepEqual([Number(row.output_tokens), row.cost_basis], [output, 'stream'], row.channel);
        assert.equal(row.unattributed_usd, null, 'told on main\'s final row only');
      }
      const opened = atOnce.channels.filter((r) => r.status === 'running' && r.channel !== '');
      assert.ok(opened.length >= 3);
      for (const row of opened)
        assert.deepEqual([row.cost_usd, row.cost_basis, row.model], [null, '', ''], row.channel);
      const finals = atOnce.channels.filter((r) => Number(r.ver) === lines.length + 1);
      assert.equal(finals.length, 4, 'a final row per channel');
      for (const row of finals) assert.equal(row.cost_basis, 'estimated', row.channel);
    });

    test("a line's row names its channel as it was placed when the line arrived, fed at once or a line " +
      'at a time: a line before its spawn stays unplaced', async () => {
      const lines = orphanFirstLines();
      const run = async (runId: string, lineByLine: boolean) => {
        await feedThrough(lines, lineByLine, (session) => [
          createClickHouseSink({ url: ch.url, runId, session }),
        ]);
        return (await ch.rows<any>(`SELECT line, channel, parent, depth, agent FROM subtee_events ` +
          `WHERE run = ${lit(runId)} ORDER BY line, part`));
      };
      const atOnce = await run('placed-at-once', false);
      assert.deepEqual(await run('placed-line-by-line', true), atOnce);
      const { id, agent } = ORPHAN_FIRST;
      const placed = atOnce.filter((r) => r.channel === id);
      const seen = placed.map((r) => [Number(r.line), Number(r.depth), r.agent]);
      assert.deepEqual(seen, [[2, -1, ''], [4, 1, agent]]);
    });

    test('server killed with SIGKILL mid-run and ' +
      'restarted: nothing lost, nothing counted twice', async () => {
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

    test('server away for the whole run: every row waits in OUT; ' +
      'the next run sends it with --clickhouse-resend, once', async () => {
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

    test('--clickhouse-resend from the command line; a run that read no line (a resend alone, an ' +
      'empty input) adds no run of its own', async () => {
      const runsStored = async () => {
        const [made] = await ch.rows<{ n: number }>(
          'SELECT count() AS n FROM system.tables ' +
            "WHERE database = currentDatabase() AND name = 'subtee_channels'",
        );
        if (Number(made.n) === 0) return [];
        return (await ch.rows<{ run: string }>('SELECT DISTINCT run FROM subtee_channels')).map((r) => r.run);
      };
      const before = new Set(await runsStored());
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
      const nothing = { out: join(runs, 'run-3'), feed: async () => {} };
      const empty = await subtee(['--clickhouse', ch.url], nothing);
      assert.equal(empty.code, EXIT.IO, empty.stderr);
      const added = (await runsStored()).filter((run) => !before.has(run));
      assert.deepEqual(added, ['resent-by-flag']);
    });

    test('a server that stops answering (SIGSTOP) holds the input ' +
      'back once the queue is full; resumed, every row arrives', async () => {
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

test('index.json lists the warnings a ClickHouse sink added by --clickhouse raises as it ends, as ' +
  'stderr does', async () => {
  const port = await closedPort();
  const r = await subtee(['--clickhouse', `http://127.0.0.1:${port}`, fixture('nested-depth-3')]);
  assert.equal(r.code, 0, r.stderr);
  const index = indexOf(r.out);
  const listed = index.warnings.map((w: { code: string; message: string }) => `${w.code}: ${w.message}`);
  // The rows left unsent, told as the sink ends, after the files sink has ended the transcripts.
  assert.deepEqual(
    listed.map((w: string) => w.slice(0, w.indexOf(':'))),
    ['CLICKHOUSE_UNAVAILABLE', 'CLICKHOUSE_SPOOLED'],
  );
  const onStderr = r.stderr.split('\n').filter((l) => l.startsWith('subtee: warning '));
  assert.deepEqual(onStderr, listed.map((w: string) => `subtee: warning ${w}`));
});

test('a URL that is not one, one the client refuses, or an unsafe table name, fails fast with one ' +
  'line and writes nothing: a corrected run into the same folder goes ahead', async () => {
  const secret = 'pw-in-the-query';
  for (const [args, message] of [
    [
      ['--clickhouse', 'not a url'],
      /subtee: --clickhouse must be an http or https URL, not "not a url" \[ERR_BAD_OPTION\]/,
    ],
    [
      ['-c', config({ url: 'ftp://u:secret@h' })],
      /sinks\[1\]\.url: must be an http or https URL \[ERR_CONFIG\]/,
    ],
    [
      ['--clickhouse', 'http://127.0.0.1:1/db?foo=1'],
      new RegExp(
        '^subtee: clickhouse: not a usable URL: http://127\\.0\\.0\\.1:1/db\\?\\*\\*\\* ' +
          '\\(Unknown URL parameters: foo\\) \\[ERR_BAD_OPTION\\]',
      ),
    ],
    [
      ['--clickhouse', `http://127.0.0.1:1/?password=${secret}`],
      /Unknown URL parameters: password\) \[ERR_BAD_OPTION\]/,
    ],
    [
      ['-c', config({ url: 'http://127.0.0.1:1/?database=a' })],
      /Unknown URL parameters: database\) \[ERR_BAD_OPTION\]/,
    ],
    [
      ['-c', config({ url: 'http://127.0.0.1:1', eventsTable: 'x; DROP TABLE y' })],
      /sinks\[1\]\.eventsTable: must be a name such as subtee_events or db\.subtee_events \[ERR_CONFIG\]/,
    ],
    [['--clickhouse-resend', '/tmp'], /--clickhouse-resend DIR needs --clickhouse URL.* \[ERR_USAGE\]/],
  ] as const) {
    const out = join(tmpDir(), 'out');
    const r = await subtee([...args], {
      out,
      feed: async (stdin) => void stdin.write(readFileSync(fixture('nested-depth-3'))),
    });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, message);
    assert.equal(r.stderr.trim().split('\n').length, 1);
    assert.ok(!r.stderr.includes(secret), r.stderr);
    assert.equal(existsSync(out), false, `${args.join(' ')}: no folder left behind`);
  }
  // The folder a refused run would have written is still free for the run as meant.
  const out = join(tmpDir(), 'out');
  const refused = await subtee(['--clickhouse', 'http://127.0.0.1:1/db?foo=1'], { out });
  assert.equal(refused.code, 2, refused.stderr);
  const meant = await subtee(['--clickhouse', `http://127.0.0.1:${await closedPort()}/db`], {
    out,
    feed: async (stdin) => void stdin.write(readFileSync(fixture('nested-depth-3'))),
  });
  assert.equal(meant.code, 0, meant.stderr);
  assert.equal(indexOf(out).input.lines, linesOf(readFileSync(fixture('nested-depth-3'))).length);
});

// The ClickHouse sink's delivery, in process, against a real ClickHouse server seen through a
// loopback HTTP relay that records each request and can hold it, or refuse it as a server that
// went away would: batches, the queue that holds the input back, the spool while the server is
// away, the probe that finds it again, resends of earlier runs' spools, rows refused as data,
// and what is reported at the end. Row counts asserted are counted here from the input bytes.

type Verdict = 'forward' | 'refuse' | 'hold';

/** One request the relay saw: its SQL, the rows of an insert, and the server's status once answered. */
interface Exchange {
  path: string;
  sql: string;
  rows: string[];
  verdict: Verdict;
  status: number;
  /** The request's connection closed (answered, or cut off by either side). */
  closed: boolean;
}

/**
 * A relay in front of the real server. `refuse` closes the connection without an answer (a
 * server that is gone); `hold` keeps the request until `release()`.
 */
async function startRelay(target: string) {
  const exchanges: Exchange[] = [];
  let decide: (ex: Exchange) => Verdict = () => 'forward';
  const held: Array<() => void> = [];
  const forward = (
    method: string,
    path: string,
    headers: IncomingHttpHeaders,
    body: Buffer,
    ex: Exchange,
    res: import('node:http').ServerResponse,
  ) => {
    const up = request(`${target}${path}`, { method, headers }, (answer) => {
      ex.status = answer.statusCode ?? 0;
      res.writeHead(ex.status, answer.headers);
      answer.pipe(res);
    });
    up.on('error', () => res.destroy());
    up.end(body);
  };
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const body = Buffer.concat(parts);
      const url = new URL(req.url ?? '/', 'http://relay');
      const inUrl = url.searchParams.get('query');
      const text = body.toString('utf8');
      const ex: Exchange = {
        path: url.pathname,
        sql: inUrl ?? text,
        rows: inUrl !== null ? text.split('\n').filter((l) => l !== '') : [],
        verdict: 'forward',
        status: 0,
        closed: false,
      };
      res.on('close', () => (ex.closed = true));
      ex.verdict = decide(ex);
      exchanges.push(ex);
      const go = () => forward(req.method ?? 'GET', req.url ?? '/', req.headers, body, ex, res);
      if (ex.verdict === 'refuse') req.socket.destroy();
      else if (ex.verdict === 'hold') held.push(go);
      else go();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    exchanges,
    behave(how: Verdict | ((ex: Exchange) => Verdict)) {
      decide = typeof how === 'function' ? how : () => how;
    },
    release() {
      for (const go of held.splice(0)) go();
    },
    held: () => held.length,
    /** Forgets the held requests, never forwarded: their senders were cut off. */
    drop() {
      held.length = 0;
    },
    /** Inserts into `table` (answered or not), in order. */
    inserts: (table: string) => exchanges.filter((e) => e.sql.startsWith(`INSERT INTO \`${table}\` `)),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

type Relay = Awaited<ReturnType<typeof startRelay>>;

/**
 * Counted here from the bytes: the numbers of the non-blank lines, and the channels (main and
 * each parent).
 */
function countedFrom(bytes: Buffer) {
  const lines = linesOf(bytes)
    .map((l, i) => [l, i + 1] as const)
    .filter(([l]) => l.trim() !== '');
  const channels = new Set<string>(['']);
  for (const [l] of lines) {
    const parent = JSON.parse(l).parent_tool_use_id;
    if (typeof parent === 'string') channels.add(parent);
  }
  return { lineNumbers: lines.map(([, n]) => n), channels: [...channels].sort() };
}

/** A fixture routed by the real parser and router: its records one per batch, and the finished run. */
async function recordsOf(name: string) {
  return recordsFrom(readFileSync(fixture(name)));
}

/** A generated run of about 300 KiB, its lines that are JSON (the generator mixes in others). */
function generatedJson(seed: number): Buffer {
  const json = (l: string) => {
    try {
      JSON.parse(l);
      return true;
    } catch {
      return false;
    }
  };
  const lines = [...generate({ sizeBytes: 300 * 1024, fanout: 5, shape: 'small', seed })].filter(json);
  return Buffer.from(lines.join('\n') + '\n');
}

/** Input bytes routed by the real parser and router, as recordsOf does a fixture. */
async function recordsFrom(bytes: Buffer) {
  const batches: RecordBatch[] = [];
  const { run } = await routeThrough(bytes, (b) => {
    for (const rec of b) batches.push([rec]);
  });
  return { bytes, batches, run, ...countedFrom(bytes) };
}

/** Input the test pushes record by record; `end()` ends it. */
function feeder() {
  const input = new Readable({ objectMode: true, read() {} });
  return { input, push: (b: RecordBatch) => input.push(b), end: () => input.push(null) };
}

/** A sink in a pipeline; `passed` counts batches it let through. */
function runSink(input: Readable, options: Omit<ClickHouseSinkOptions, 'session'>, run: Session) {
  const sink = createClickHouseSink({ session: run, ...options });
  const state = { passed: 0 };
  const done = pipeline(
    input,
    sink,
    new Writable({ objectMode: true, write: (_b, _e, cb) => (state.passed++, cb()) }),
  );
  return { state, done };
}

/**
 * Options for a run on tables of its own (`PREFIX_events`, `PREFIX_channels`) with no flush
 * ever due: only a full batch, an answered insert or the end sends rows.
 */
function noFlushDue(
  url: string,
  runId: string,
  prefix: string,
  batchRows: number,
  more: Partial<ClickHouseSinkOptions> = {},
): Omit<ClickHouseSinkOptions, 'session'> {
  const tables = { eventsTable: `${prefix}_events`, channelsTable: `${prefix}_channels` };
  return { url, runId, ...tables, batchRows, flushIntervalMs: 600_000, spoolDir: tmpDir(), ...more };
}

const lineNumbersOf = (rows: string[]) => rows.map((r) => JSON.parse(r).line as number);

const lineOf = (e: Entry) => (e.r as { line?: number }).line as number;

/** The input lines the events rows among `entries` stand for, in order. */
const eventLines = (entries: Entry[]) =>
  entries
    .filter((e) => e.t === 'events')
    .map(lineOf)
    .sort((a, b) => a - b);

const entriesIn = (file: string) => linesOf(readFileSync(file)).map((l) => JSON.parse(l) as Entry);

const codesOf = (run: Session, from: number) => run.warnings.slice(from).map((w) => w.code);

const messageOf = (run: Session, from: number, code: string) =>
  run.warnings.slice(from).find((w) => w.code === code)?.message ?? '';

const settle = async () => {
  for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
};

/** Timers pending in this process: one a finished sink left would keep its process alive. */
const pendingTimers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

const escaped = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Runs `body` while the input is open; if it fails, cuts the input off so the sink ends and no
 * far flush timer keeps the test process alive.
 */
async function cutOnFailure(input: Readable, done: Promise<void>, body: () => Promise<void>) {
  try {
    await body();
  } catch (err) {
    input.destroy();
    await done.catch(() => {});
    throw err;
  }
}

/** Tree changes the router attached to a record (quarantined lines carry none). */
const changesIn = (rec: RecordBatch[number]) => ('events' in rec ? (rec.events?.length ?? 0) : 0);

/**
 * Rows the sink queues for records taken: one events row per input line (counted from the bytes)
 * and one channels row per tree change.
 */
const rowsFor = (batches: RecordBatch[], lineNumbers: number[]) =>
  lineNumbers.length + batches.flat().reduce((sum, rec) => sum + changesIn(rec), 0);

describe(
  'ClickHouse sink delivery against a real server',
  { skip: !clickhouseAvailable() && 'clickhouse-server is not installed' },
  () => {
    let ch: ClickHouseServer;
    let relay: Relay;
    // A run cut short (a signal, a bail after the first failure) skips `after`: the server must
    // not outlive it.
    const stopAtExit = () => {
      void ch?.kill();
      if (ch) rmSync(ch.dir, { recursive: true, force: true });
    };
    before(async () => {
      process.once('exit', stopAtExit);
      ch = await startClickHouse();
      relay = await startRelay(ch.url);
    });
    after(async () => {
      await relay?.close();
      await ch?.stop();
      process.off('exit', stopAtExit);
    });
    const fresh = () => {
      relay.release();
      relay.exchanges.length = 0;
      relay.behave('forward');
    };
    const stored = async (table: string, run: string, final = false) =>
      (
        await ch.rows<{ line: number }>(
          `SELECT line FROM ${table} ${final ? 'FINAL' : ''} WHERE run = '${run}' ORDER BY line`,
        )
      ).map((r) => Number(r.line));
    /** Lines stored for a run, read from the server itself (not through the relay). */
    const storedLines = async (table: string, run: string) =>
      (await ch.rows<{ line: number }>(`SELECT line FROM ${table} WHERE run = '${run}'`)).map((r) =>
        Number(r.line),
      );
    const storedChannels = async (table: string, run: string) =>
      (
        await ch.rows<{ channel: string }>(
          `SELECT channel FROM ${table} FINAL WHERE run = '${run}' ORDER BY channel`,
        )
      ).map((r) => r.channel);

    test('rows go in batches of batchRows as soon as a batch ' +
      'is full, the tables are made once, every line once', async () => {
      fresh();
      const { batches, run, lineNumbers, channels } = await recordsOf('binary-tree-depth-3');
      const feed = feeder();
      const { done } = runSink(feed.input, noFlushDue(relay.url, 'batched', 'b', 7), run);
      for (const b of batches) feed.push(b);
      // The input stays open and no flush is due: only a full batch can have gone.
      await until('a full batch inserted while the input is open', () =>
        relay.inserts('b_events').some((e) => e.status === 200),
      );
      feed.end();
      await done;
      const inserts = [...relay.inserts('b_events'), ...relay.inserts('b_channels')];
      assert.ok(
        inserts.every((e) => e.rows.length >= 1 && e.rows.length <= 7),
        'no insert over batchRows, none empty',
      );
      assert.deepEqual(
        lineNumbersOf(relay.inserts('b_events').flatMap((e) => e.rows)),
        lineNumbers,
        'each line sent once, in order',
      );
      assert.equal(
        relay.exchanges.filter((e) => e.sql.startsWith('CREATE TABLE')).length,
        2,
        'each table made once',
      );
      assert.equal(relay.exchanges.filter((e) => e.sql.startsWith('DESCRIBE TABLE')).length, 2);
      assert.deepEqual(await stored('b_events', 'batched'), lineNumbers);
      assert.deepEqual(await storedChannels('b_channels', 'batched'), channels);
      assert.deepEqual(codesOf(run, 0), []);
    });

    test('a partial batch is inserted after flushIntervalMs while the run goes on', async () => {
      fresh();
      const { batches, run, lineNumbers } = await recordsOf('nested-depth-3');
      const feed = feeder();
      const { done } = runSink(
        feed.input,
        {
          url: relay.url,
          runId: 'flushed',
          eventsTable: 'f_events',
          channelsTable: 'f_channels',
          batchRows: 100_000,
          flushIntervalMs: 5,
          spoolDir: tmpDir(),
        },
        run,
      );
      for (const b of batches) feed.push(b);
      // Far from a full batch, with the input open: only the flush timer sends.
      await until('rows inserted by the flush timer', () =>
        relay.inserts('f_events').some((e) => e.status === 200),
      );
      feed.end();
      await done;
      assert.deepEqual(await stored('f_events', 'flushed'), lineNumbers);
    });

    test('a full queue holds the input back while an insert ' +
      'is unanswered; answered, every row arrives', async () => {
      fresh();
      relay.behave((ex) => (ex.sql.startsWith('INSERT') ? 'hold' : 'forward'));
      const { batches, run, lineNumbers, channels } = await recordsOf('binary-tree-depth-3');
      const { state, done } = runSink(
        Readable.from(batches, { objectMode: true }),
        {
          url: relay.url,
          runId: 'held',
          eventsTable: 'h_events',
          channelsTable: 'h_channels',
          batchRows: 10,
          maxQueueRows: 20,
          flushIntervalMs: 1,
          spoolDir: tmpDir(),
        },
        run,
      );
      await until('an insert held', () => relay.held() > 0);
      await settle();
      const heldAt = state.passed;
      await settle();
      assert.ok(heldAt < batches.length, `input held back (${heldAt} of ${batches.length})`);
      assert.equal(state.passed, heldAt, 'and it stays held');
      relay.behave('forward');
      relay.release();
      await done;
      assert.equal(state.passed, batches.length);
      assert.deepEqual(await stored('h_events', 'held'), lineNumbers, 'every line once');
      assert.deepEqual(await storedChannels('h_channels', 'held'), channels);
      assert.deepEqual(codesOf(run, 0), []);
    });

    test('server away: rows wait in the spool, reported once; ' +
      'back mid-run, the spool goes first, then rows flow', async () => {
      fresh();
      relay.behave('refuse');
      const { batches, run, lineNumbers, channels } = await recordsOf('binary-tree-depth-3');
      const spoolDir = tmpDir();
      const spool = join(spoolDir, SPOOL_FILE);
      const feed = feeder();
      const { state, done } = runSink(
        feed.input,
        {
          url: relay.url,
          runId: 'away-back',
          eventsTable: 'a_events',
          channelsTable: 'a_channels',
          batchRows: 5,
          maxQueueRows: 5,
          flushIntervalMs: 1,
          maxRetryDelayMs: 20,
          flushTimeoutMs: 60_000,
          spoolDir,
        },
        run,
      );
      const half = Math.floor(batches.length / 2);
      for (const b of batches.slice(0, half)) feed.push(b);
      await until('the first half let through', () => state.passed === half);
      await until(
        'the first half spooled',
        () => existsSync(spool) && entriesIn(spool).filter((e) => e.t === 'events').length === half,
      );
      assert.deepEqual(codesOf(run, 0), ['CLICKHOUSE_UNAVAILABLE']);
      assert.match(
        messageOf(run, 0, 'CLICKHOUSE_UNAVAILABLE'),
        new RegExp(
          `^ClickHouse at ${escaped(relay.url)} is not taking rows \\(.+\\); they are kept in ${escaped(spool)} and sent when it answers$`,
        ),
      );
      await until(
        'the server probed again',
        () => relay.exchanges.filter((e) => e.path === '/ping').length >= 2,
      );
      relay.behave('forward');
      await until(
        'the spool sent and removed',
        () =>
          findSpoolFiles(spoolDir).length === 0 && relay.inserts('a_events').some((e) => e.status === 200),
      );
      const sentFromSpool = relay.inserts('a_events').filter((e) => e.status === 200).length;
      for (const b of batches.slice(half)) feed.push(b);
      const secondHalf = new Set(lineNumbers.slice(half));
      await until('the second half inserted directly while the input is open', () =>
        relay
          .inserts('a_events')
          .some((e) => e.status === 200 && lineNumbersOf(e.rows).some((n) => secondHalf.has(n))),
      );
      assert.equal(existsSync(spool), false, 'not through the spool');
      feed.end();
      await done;
      assert.deepEqual(codesOf(run, 0), ['CLICKHOUSE_UNAVAILABLE'], 'nothing left over');
      assert.deepEqual(findSpoolFiles(spoolDir), []);
      assert.ok(
        relay.inserts('a_events').filter((e) => e.status === 200).length > sentFromSpool,
        'the second half went directly',
      );
      // Nothing refused reached the server, so nothing is there twice even before a merge.
      assert.deepEqual(await stored('a_events', 'away-back'), lineNumbers);
      assert.deepEqual(await storedChannels('a_channels', 'away-back'), channels);
    });

    test('server away for the whole run: every row stays in the spool, ' +
      'counted in CLICKHOUSE_SPOOLED with where to resend it', async () => {
      fresh();
      relay.behave('refuse');
      const { batches, run, lineNumbers, channels } = await recordsOf('nested-depth-3');
      const spoolDir = tmpDir();
      const spool = join(spoolDir, SPOOL_FILE);
      const feed = feeder();
      const { done } = runSink(
        feed.input,
        {
          url: relay.url,
          runId: 'away-all',
          batchRows: 3,
          flushIntervalMs: 1,
          maxRetryDelayMs: 20,
          flushTimeoutMs: 5000,
          spoolDir,
        },
        run,
      );
      for (const b of batches) feed.push(b);
      // Probes that find no server leave the spool as it is.
      await until(
        'the server probed twice',
        () => relay.exchanges.filter((e) => e.path === '/ping').length >= 2,
      );
      feed.end();
      await done;
      const entries = entriesIn(spool);
      assert.deepEqual(eventLines(entries), lineNumbers, 'every line in the spool once');
      assert.ok(
        entries.every((e) => e.r.run === 'away-all'),
        'under the run id',
      );
      const finalChannels = new Set(entries.filter((e) => e.t === 'channels').map((e) => e.r.channel));
      assert.deepEqual([...finalChannels].sort(), channels);
      assert.deepEqual(codesOf(run, 0), ['CLICKHOUSE_UNAVAILABLE', 'CLICKHOUSE_SPOOLED']);
      assert.match(
        messageOf(run, 0, 'CLICKHOUSE_SPOOLED'),
        new RegExp(
          `^${entries.length} rows not sent to ClickHouse at ${escaped(relay.url)} \\((ECONNRESET|socket hang up)[^)]*\\): kept in ${escaped(spool)}; send them with --clickhouse-resend ${escaped(spoolDir)}$`,
        ),
      );
    });

    test("a resend: earlier spools (a subfolder's, one abandoned mid-send) go first; a row refused as " +
      "data is set aside", async () => {
      fresh();
      const earlier = tmpDir();
      // Two earlier runs' spools, made by runs against a server that was away.
      const made: Array<{ runId: string; lineNumbers: number[] }> = [];
      for (const [i, name] of (['nested-depth-3', 'foreground-fanout-3'] as const).entries()) {
        relay.behave('refuse');
        const { batches, run, lineNumbers } = await recordsOf(name);
        const dir = i === 0 ? earlier : join(earlier, 'run-2');
        mkdirSync(dir, { recursive: true });
        const runId = `earlier-${i}`;
        await runSink(
          Readable.from(batches, { objectMode: true }),
          {
            url: relay.url,
            runId,
            eventsTable: 'r_events',
            channelsTable: 'r_channels',
            flushTimeoutMs: 0,
            spoolDir: dir,
          },
          run,
        ).done;
        made.push({ runId, lineNumbers });
      }
      // The second one was being sent by a process that is gone.
      const first = join(earlier, SPOOL_FILE);
      const abandoned = join(earlier, 'run-2', 'clickhouse-spool.sending-999999999-x-1.jsonl');
      writeFileSync(abandoned, readFileSync(join(earlier, 'run-2', SPOOL_FILE)));
      writeFileSync(join(earlier, 'run-2', SPOOL_FILE), '');
      // One row of the first, its depth (an Int16) a word: ClickHouse refuses it as data.
      const rows = linesOf(readFileSync(first));
      const bad = JSON.parse(rows.find((l) => JSON.parse(l).t === 'events')!);
      bad.r.line = 424_242;
      bad.r.depth = 'deep';
      writeFileSync(first, [...rows.slice(0, 3), JSON.stringify(bad), ...rows.slice(3)].join('\n') + '\n');

      relay.behave('forward');
      relay.exchanges.length = 0;
      const { batches, run, lineNumbers } = await recordsOf('failing-beside-healthy');
      const spoolDir = tmpDir();
      await runSink(
        Readable.from(batches, { objectMode: true }),
        {
          url: relay.url,
          runId: 'resender',
          eventsTable: 'r_events',
          channelsTable: 'r_channels',
          resend: earlier,
          batchRows: 4,
          flushIntervalMs: 1,
          spoolDir,
        },
        run,
      ).done;
      const rejects = join(earlier, REJECTS_FILE);
      assert.deepEqual(codesOf(run, 0), ['CLICKHOUSE_REJECTED']);
      assert.match(
        messageOf(run, 0, 'CLICKHOUSE_REJECTED'),
        new RegExp(
          `^1 spooled rows refused by ClickHouse at ${escaped(relay.url)} \\(Code: \\d+, [^)]+\\): set aside in ${escaped(rejects)}$`,
        ),
      );
      assert.deepEqual(entriesIn(rejects), [bad]);
      assert.deepEqual(findSpoolFiles(earlier), [], 'the earlier spools were sent and removed');
      assert.deepEqual(findSpoolFiles(spoolDir), [], "the run's own rows went directly");
      for (const { runId, lineNumbers: expected } of made)
        assert.deepEqual(await stored('r_events', runId, true), expected, runId);
      assert.deepEqual(await stored('r_events', 'resender'), lineNumbers);
      // The backlog went before the run's own rows.
      const order = relay
        .inserts('r_events')
        .filter((e) => e.status === 200)
        .map((e) => JSON.parse(e.rows[0]).run as string);
      const own = order.indexOf('resender');
      assert.ok(own > 0 && order.slice(own).every((r) => r === 'resender'), order.join(' '));
    });

    /** A spool of `name` made by a run whose server was away; its run id and counted lines. */
    async function earlierSpool(dir: string, name: string, runId: string, tables: object) {
      relay.behave('refuse');
      const { batches, run, lineNumbers } = await recordsOf(name);
      mkdirSync(dir, { recursive: true });
      await runSink(
        Readable.from(batches, { objectMode: true }),
        { url: relay.url, runId, ...tables, flushTimeoutMs: 0, spoolDir: dir },
        run,
      ).done;
      return { file: join(dir, SPOOL_FILE), lineNumbers };
    }

    test("a resend cut off when the server goes away midway: the file waits, the run's rows are " +
      "spooled, both go once it is back", async () => {
      fresh();
      const tables = { eventsTable: 'c_events', channelsTable: 'c_channels' };
      const earlier = tmpDir();
      const { lineNumbers: earlierLines } = await earlierSpool(
        earlier,
        'binary-tree-depth-3',
        'cut-earlier',
        tables,
      );
      let forwarded = 0;
      let back = false;
      // Three inserts go through, then the server is gone until `back`.
      relay.behave((ex) =>
        back
          ? 'forward'
          : ex.sql.startsWith('INSERT') && ++forwarded > 3
            ? 'refuse'
            : forwarded > 3
              ? 'refuse'
              : 'forward',
      );
      relay.exchanges.length = 0;
      const { batches, run, lineNumbers } = await recordsOf('nested-depth-3');
      const spoolDir = tmpDir();
      const feed = feeder();
      const { done } = runSink(
        feed.input,
        {
          url: relay.url,
          runId: 'cut-resender',
          ...tables,
          resend: earlier,
          batchRows: 5,
          flushIntervalMs: 1,
          maxRetryDelayMs: 20,
          flushTimeoutMs: 60_000,
          spoolDir,
        },
        run,
      );
      await until('the resend cut off', () => relay.exchanges.some((e) => e.verdict === 'refuse'));
      for (const b of batches) feed.push(b);
      await until("the run's rows spooled meanwhile", () => existsSync(join(spoolDir, SPOOL_FILE)));
      assert.equal(findSpoolFiles(earlier).length, 1, 'the earlier spool is kept');
      await until('a probe refused', () =>
        relay.exchanges.some((e) => e.path === '/ping' && e.verdict === 'refuse'),
      );
      back = true;
      feed.end();
      await until('both spools sent', () => [earlier, spoolDir].every((d) => findSpoolFiles(d).length === 0));
      await done;
      assert.deepEqual(codesOf(run, 0), ['CLICKHOUSE_UNAVAILABLE']);
      assert.deepEqual(findSpoolFiles(earlier), []);
      assert.deepEqual(findSpoolFiles(spoolDir), []);
      assert.deepEqual(await stored('c_events', 'cut-earlier', true), earlierLines);
      assert.deepEqual(await stored('c_events', 'cut-resender', true), lineNumbers);
    });

    for (const cutAt of [1, 3]) {
      const name =
        `a resend cut off by the server killed during its insert ${cutAt}: CLICKHOUSE_UNAVAILABLE, ` +
        'the rows spooled, all sent once it is back';
      test(name, async () => {
        fresh();
        const tables = { eventsTable: 'k_events', channelsTable: 'k_channels' };
        const earlier = tmpDir();
        const earlierRun = `killed-earlier-${cutAt}`;
        const { lineNumbers: earlierLines } = await earlierSpool(
          earlier,
          'binary-tree-depth-3',
          earlierRun,
          tables,
        );
        // The resend's inserts go through until the one held: the server dies while it is unanswered.
        let inserts = 0;
        relay.behave((ex) => (ex.sql.startsWith('INSERT') && ++inserts === cutAt ? 'hold' : 'forward'));
        relay.exchanges.length = 0;
        const { batches, run, lineNumbers } = await recordsOf('nested-depth-3');
        const spoolDir = tmpDir();
        const runId = `killed-resender-${cutAt}`;
        const feed = feeder();
        const { done } = runSink(
          feed.input,
          {
            url: relay.url,
            runId,
            ...tables,
            resend: earlier,
            batchRows: 5,
            flushIntervalMs: 1,
            maxRetryDelayMs: 20,
            flushTimeoutMs: 60_000,
            spoolDir,
          },
          run,
        );
        await until('an insert of the resend held', () => relay.held() > 0);
        await ch.kill();
        relay.behave('forward');
        relay.release();
        await until('the warning', () => codesOf(run, 0).includes('CLICKHOUSE_UNAVAILABLE'));
        const spool = join(spoolDir, SPOOL_FILE);
        assert.match(
          messageOf(run, 0, 'CLICKHOUSE_UNAVAILABLE'),
          new RegExp(
            `^ClickHouse at ${escaped(relay.url)} is not taking rows \\(.+\\); they are kept in ${escaped(spool)} and sent when it answers$`,
          ),
        );
        for (const b of batches) feed.push(b);
        await until("the run's rows spooled", () => existsSync(spool) && entriesIn(spool).length > 0);
        assert.equal(findSpoolFiles(earlier).length, 1, 'the earlier spool waits');
        await ch.start();
        feed.end();
        const sent = () => [earlier, spoolDir].every((d) => findSpoolFiles(d).length === 0);
        await until('both spools sent', sent);
        await done;
        assert.deepEqual(codesOf(run, 0), ['CLICKHOUSE_UNAVAILABLE'], 'warned once, nothing left over');
        assert.deepEqual(await stored('k_events', earlierRun, true), earlierLines);
        assert.deepEqual(await stored('k_events', runId, true), lineNumbers);
      });
    }

    test('the server back just as the run ends: the last try sends the spool', async () => {
      fresh();
      relay.behave('refuse');
      const { batches, run, lineNumbers, channels } = await recordsOf('foreground-fanout-3');
      const spoolDir = tmpDir();
      const feed = feeder();
      // Probes 250 ms, then 500 ms apart, then a second: after two refused, only the last try at
      // the end can find the server.
      const { done } = runSink(
        feed.input,
        {
          url: relay.url,
          runId: 'back-at-end',
          eventsTable: 'e_events',
          channelsTable: 'e_channels',
          batchRows: 4,
          flushIntervalMs: 1,
          maxRetryDelayMs: 600_000,
          flushTimeoutMs: 60_000,
          spoolDir,
        },
        run,
      );
      for (const b of batches) feed.push(b);
      // Two probes refused: the next is a second away, pending when the run ends.
      await until('two probes refused', () => relay.exchanges.filter((e) => e.path === '/ping').length >= 2);
      const timersBefore = pendingTimers();
      relay.behave('forward');
      feed.end();
      await until('the spool sent at the end', () => findSpoolFiles(spoolDir).length === 0);
      await done;
      assert.ok(pendingTimers() <= timersBefore, 'the pending probe cancelled, no timer left behind');
      assert.deepEqual(codesOf(run, 0), ['CLICKHOUSE_UNAVAILABLE']);
      assert.deepEqual(findSpoolFiles(spoolDir), []);
      assert.deepEqual(await stored('e_events', 'back-at-end'), lineNumbers);
      assert.deepEqual(await storedChannels('e_channels', 'back-at-end'), channels);
    });

    test('away at the end with an earlier spool claimed: CLICKHOUSE_SPOOLED ' +
      'counts its rows once and a later resend takes it', async () => {
      fresh();
      const tables = { eventsTable: 'l_events', channelsTable: 'l_channels' };
      const earlier = tmpDir();
      const { file, lineNumbers: earlierLines } = await earlierSpool(
        earlier,
        'failing-beside-healthy',
        'left-earlier',
        tables,
      );
      const earlierRows = linesOf(readFileSync(file)).length;
      relay.behave('refuse');
      const { batches, run } = await recordsOf('nested-depth-3');
      const spoolDir = tmpDir();
      await runSink(
        Readable.from(batches, { objectMode: true }),
        {
          url: relay.url,
          runId: 'left-run',
          ...tables,
          resend: earlier,
          maxRetryDelayMs: 20,
          flushTimeoutMs: 100,
          spoolDir,
        },
        run,
      ).done;
      const [claimed] = findSpoolFiles(earlier);
      assert.match(basename(claimed), /^clickhouse-spool\.sending-\d+-/);
      const ownRows = linesOf(readFileSync(join(spoolDir, SPOOL_FILE))).length;
      assert.deepEqual(codesOf(run, 0), ['CLICKHOUSE_UNAVAILABLE', 'CLICKHOUSE_SPOOLED']);
      assert.match(
        messageOf(run, 0, 'CLICKHOUSE_SPOOLED'),
        new RegExp(
          `^${earlierRows + ownRows} rows not sent to ClickHouse at ${escaped(relay.url)} \\(.+\\): kept in ${escaped(claimed)}, ${escaped(join(spoolDir, SPOOL_FILE))}; `,
        ),
      );
      // The claim was let go: another sink of this process sends it.
      relay.behave('forward');
      const next = await recordsOf('forwarding-off');
      await runSink(
        Readable.from(next.batches, { objectMode: true }),
        { url: relay.url, runId: 'left-next', ...tables, resend: earlier, spoolDir: tmpDir() },
        next.run,
      ).done;
      assert.deepEqual(findSpoolFiles(earlier), []);
      assert.deepEqual(await stored('l_events', 'left-earlier', true), earlierLines);
    });

    test("the run ends while a resend is unanswered: the claimed file and the run's spool are reported, " +
      "their rows counted once", async () => {
      fresh();
      const tables = { eventsTable: 'k_events', channelsTable: 'k_channels' };
      const earlier = tmpDir();
      const { file } = await earlierSpool(earlier, 'nested-depth-3', 'kept-earlier', tables);
      const earlierRows = linesOf(readFileSync(file)).length;
      relay.behave((ex) => (ex.sql.startsWith('INSERT') ? 'hold' : 'forward'));
      const { batches, run, lineNumbers } = await recordsOf('forwarding-off');
      const spoolDir = tmpDir();
      const feed = feeder();
      const { done } = runSink(
        feed.input,
        {
          url: relay.url,
          runId: 'kept-run',
          ...tables,
          resend: earlier,
          flushIntervalMs: 1,
          flushTimeoutMs: 50,
          spoolDir,
        },
        run,
      );
      await until('the resend held', () => relay.held() > 0);
      // While the spool is being sent, the run's own rows wait behind it.
      for (const b of batches) feed.push(b);
      feed.end();
      await done;
      const [claimed] = findSpoolFiles(earlier);
      const own = join(spoolDir, SPOOL_FILE);
      assert.deepEqual(
        entriesIn(own)
          .filter((e) => e.t === 'events')
          .map(lineOf),
        lineNumbers,
      );
      const ownRows = linesOf(readFileSync(own)).length;
      assert.deepEqual(codesOf(run, 0), ['CLICKHOUSE_SPOOLED']);
      assert.equal(
        messageOf(run, 0, 'CLICKHOUSE_SPOOLED'),
        `${earlierRows + ownRows} rows not sent to ClickHouse at ${relay.url}: kept in ${claimed}, ${own}; send them with --clickhouse-resend ${spoolDir}`,
      );
      assert.equal(linesOf(readFileSync(claimed)).length, earlierRows, 'the claimed file whole');
      assert.notEqual(claimFile(claimed), null, 'let go: a later resend takes it');
      relay.behave('forward');
      relay.release();
    });

    test('the end with a large resent spool half sent: the unread rows are kept as their bytes, ' +
      'not parsed again, the end within flushTimeoutMs and a small bound; a later resend sends ' +
      'each row once', async () => {
      fresh();
      const tables = { eventsTable: 'g_events', channelsTable: 'g_channels' };
      const earlier = tmpDir();
      const { file } = await earlierSpool(earlier, 'nested-depth-3', 'big-earlier', tables);
      const model = entriesIn(file).find((e) => e.t === 'events')!;
      // A spool of many rows, each written as JSON another writer might (a space before it):
      // parsed the same, written again by JSON.stringify without it.
      const rowCount = 200_000;
      const content = 'x'.repeat(200);
      const line = (n: number) =>
        ' ' + JSON.stringify({ ...model, r: { ...model.r, line: n, content } }) + '\n';
      const parts: string[] = [];
      for (let n = 1; n <= rowCount; n++) parts.push(line(n));
      const original = Buffer.from(parts.join(''));
      writeFileSync(file, original);
      const batchRows = 1000;
      // The first insert goes in, the second is never answered.
      let inserts = 0;
      relay.behave((ex) => (ex.sql.startsWith('INSERT') && ++inserts > 1 ? 'hold' : 'forward'));
      const run = new Session();
      const feed = feeder();
      const flushTimeoutMs = 300;
      const options = { url: relay.url, runId: 'big-resender', ...tables, batchRows, flushTimeoutMs };
      const spoolDir = tmpDir();
      const { done } = runSink(feed.input, { ...options, resend: earlier, spoolDir }, run);
      await cutOnFailure(feed.input, done, () => until('the second insert held', () => relay.held() > 0));
      const ending = Date.now();
      feed.end();
      await done;
      const tookMs = Date.now() - ending;
      relay.drop();
      assert.ok(tookMs < flushTimeoutMs + 1500, `the end took ${tookMs} ms`);
      const [left, ...others] = findSpoolFiles(earlier);
      assert.deepEqual(others, []);
      const kept = readFileSync(left);
      // The held batch is handed back first, then the rows never read, byte for byte.
      const unread = original.subarray(Buffer.byteLength(parts.slice(0, 2 * batchRows).join('')));
      assert.ok(kept.subarray(kept.length - unread.length).equals(unread), 'the unread rows as they were');
      assert.deepEqual(
        eventLines(entriesIn(left)),
        Array.from({ length: rowCount - batchRows }, (_, i) => batchRows + i + 1),
      );
      assert.equal(existsSync(join(spoolDir, SPOOL_FILE)), false, 'a resend alone spools no row of its own');
      const spooled = new RegExp(`^${rowCount - batchRows} rows not sent `);
      assert.match(messageOf(run, 0, 'CLICKHOUSE_SPOOLED'), spooled);
      relay.behave('forward');
      const later = new Session();
      await runSink(
        Readable.from([], { objectMode: true }),
        {
          ...options,
          runId: 'big-later',
          resend: earlier,
          batchRows: 10_000,
          flushTimeoutMs: 120_000,
          spoolDir: tmpDir(),
        },
        later,
      ).done;
      assert.deepEqual(findSpoolFiles(earlier), []);
      const lines = await storedLines(tables.eventsTable, 'big-earlier');
      assert.equal(lines.length, rowCount, 'no row stored twice');
      assert.deepEqual(
        lines.sort((a, b) => a - b),
        Array.from({ length: rowCount }, (_, i) => i + 1),
      );
    });

    test('at the end the channel rows are final (they outrank ' +
      'every earlier one) and no timer of the sink is left', async () => {
      fresh();
      const { batches, run, lineNumbers, channels } = await recordsOf('binary-tree-depth-3');
      const timersBefore = pendingTimers();
      // A partial batch waits for a flush far in the future: only the end sends it.
      await runSink(
        Readable.from(batches, { objectMode: true }),
        noFlushDue(relay.url, 'finals', 'v', 1000),
        run,
      ).done;
      // A timer left behind would keep a finished run's process alive.
      assert.ok(pendingTimers() <= timersBefore, `timers: ${timersBefore} before, ${pendingTimers()} after`);
      const finals = await ch.rows<{ channel: string; ver: string; stalled: number; interrupted: number }>(
        "SELECT channel, ver, stalled, interrupted FROM v_channels FINAL WHERE run = 'finals' " +
          'ORDER BY channel',
      );
      assert.deepEqual(
        finals.map((r) => [r.channel, Number(r.ver), Number(r.stalled), Number(r.interrupted)]),
        channels.map((c) => [c, lineNumbers.length + 1, 0, 0]),
        'one final row per channel, versioned past every line',
      );
      assert.deepEqual(await stored('v_events', 'finals'), lineNumbers);
    });

    test('the run ends while a direct insert is unanswered: its ' +
      'rows and the queued ones wait in the spool, each once', async () => {
      fresh();
      relay.behave((ex) => (ex.sql.startsWith('INSERT') ? 'hold' : 'forward'));
      const { batches, run, lineNumbers, channels } = await recordsOf('nested-depth-3');
      const spoolDir = tmpDir();
      const spool = join(spoolDir, SPOOL_FILE);
      await runSink(
        Readable.from(batches, { objectMode: true }),
        {
          url: relay.url,
          runId: 'cut-at-end',
          eventsTable: 'u_events',
          channelsTable: 'u_channels',
          batchRows: 4,
          flushIntervalMs: 1,
          flushTimeoutMs: 200,
          spoolDir,
        },
        run,
      ).done;
      const check = () => {
        const entries = entriesIn(spool);
        assert.deepEqual(eventLines(entries), lineNumbers, 'every line once');
        const isFinal = (e: Entry) => (e.r as { ver?: number }).ver === lineNumbers.length + 1;
        const finals = entries.filter((e) => e.t === 'channels' && isFinal(e));
        assert.deepEqual(finals.map((e) => e.r.channel).sort(), channels);
        assert.deepEqual(codesOf(run, 0), ['CLICKHOUSE_SPOOLED']);
        assert.equal(
          messageOf(run, 0, 'CLICKHOUSE_SPOOLED'),
          `${entries.length} rows not sent to ClickHouse at ${relay.url}: kept in ${spool}; send them with --clickhouse-resend ${spoolDir}`,
        );
      };
      check();
      assert.equal(relay.held(), 1, 'one insert was under way');
      // Closing the client cuts the held insert off: its failure, after the end, adds nothing.
      await until('the held insert cut off', () =>
        relay.exchanges.filter((e) => e.verdict === 'hold').every((e) => e.closed),
      );
      await settle();
      check();
    });

    test('a run whose channel rows the server will not take: the ' +
      'spool it claimed is reported alone, the rows counted', async () => {
      fresh();
      // Only the channels table's inserts are cut off; pings and the tables' DDL are answered.
      relay.behave((ex) => (ex.sql.startsWith('INSERT INTO `z_channels` ') ? 'refuse' : 'forward'));
      // One input line, on main: its event row and main's channel row.
      const first = readFileSync(fixture('nested-depth-3'));
      const oneLine = first.subarray(0, first.indexOf(10) + 1);
      const { batches, run, lineNumbers, channels } = await recordsFrom(oneLine);
      const spoolDir = tmpDir();
      const timersBefore = pendingTimers();
      await runSink(
        Readable.from(batches, { objectMode: true }),
        {
          url: relay.url,
          runId: 'one-row',
          eventsTable: 'z_events',
          channelsTable: 'z_channels',
          maxRetryDelayMs: 600_000,
          flushTimeoutMs: 1000,
          spoolDir,
        },
        run,
      ).done;
      // Failures during the end schedule no probe that would outlive it.
      assert.ok(pendingTimers() <= timersBefore, `timers: ${timersBefore} before, ${pendingTimers()} after`);
      const [claimed, ...others] = findSpoolFiles(spoolDir);
      assert.deepEqual(others, []);
      assert.match(basename(claimed), /^clickhouse-spool\.sending-\d+-/, 'claimed by a resend that failed');
      assert.deepEqual(
        entriesIn(claimed).map((e) => [e.t, e.r.channel]),
        [...lineNumbers.map(() => ['events', '']), ...channels.map((c) => ['channels', c])],
      );
      assert.ok(relay.inserts('z_channels').length >= 2, 'sent directly, then again from the spool');
      assert.deepEqual(codesOf(run, 0), ['CLICKHOUSE_UNAVAILABLE', 'CLICKHOUSE_SPOOLED']);
      assert.match(
        messageOf(run, 0, 'CLICKHOUSE_SPOOLED'),
        new RegExp(
          `^${lineNumbers.length + channels.length} rows not sent to ClickHouse at ${escaped(relay.url)} \\(.+\\): kept in ${escaped(claimed)}; send them with --clickhouse-resend ${escaped(spoolDir)}$`,
        ),
      );
    });

    test('a table that refuses every row (a partition key no row fits) is told once as the ' +
      "table's problem: its rows wait in the spool, none is filed as refused, a few inserts " +
      'rather than one per row', async () => {
      fresh();
      const tables = { eventsTable: 'every_events', channelsTable: 'every_channels' };
      await ch.client.command({
        query: tableDdl('events', tables.eventsTable).replace(
          'ENGINE = ReplacingMergeTree PARTITION BY toYYYYMM(ts)',
          'ENGINE = MergeTree PARTITION BY toDate(content)',
        ),
      });
      const bytes = generatedJson(3);
      const { batches, run, lineNumbers } = await recordsFrom(bytes);
      const spoolDir = tmpDir();
      await runSink(
        Readable.from(batches, { objectMode: true }),
        {
          url: relay.url,
          runId: 'every-row',
          ...tables,
          flushIntervalMs: 1,
          maxRetryDelayMs: 600_000,
          spoolDir,
        },
        run,
      ).done;
      assert.deepEqual(codesOf(run, 0), ['CLICKHOUSE_TABLE', 'CLICKHOUSE_SPOOLED']);
      assert.match(
        messageOf(run, 0, 'CLICKHOUSE_TABLE'),
        new RegExp(
          `^every_events at ${escaped(relay.url)} refuses every row subtee sends it \\(Code: \\d+, ` +
            `Cannot parse [a-z ]+\\); rows are kept in ${escaped(join(spoolDir, SPOOL_FILE))}, ` +
            'not tried again',
        ),
      );
      assert.equal(existsSync(join(spoolDir, REJECTS_FILE)), false, 'no row filed as refused');
      const spooled = findSpoolFiles(spoolDir).flatMap(entriesIn);
      assert.deepEqual(eventLines(spooled), lineNumbers, 'every line once, in the spool');
      assert.match(messageOf(run, 0, 'CLICKHOUSE_SPOOLED'), new RegExp(`^${spooled.length} rows not sent `));
      const inserts = relay.inserts(tables.eventsTable).length;
      assert.ok(inserts < 60, `${inserts} inserts for ${lineNumbers.length} rows`);
    });

    test('the end waits at most flushTimeoutMs for a server that stopped answering, its last ' +
      'try at the server included', async () => {
      fresh();
      relay.behave('refuse');
      const { batches, run, lineNumbers } = await recordsOf('nested-depth-3');
      const spoolDir = tmpDir();
      const feed = feeder();
      const flushTimeoutMs = 1000;
      const { done } = runSink(
        feed.input,
        {
          url: relay.url,
          runId: 'hung-end',
          eventsTable: 'h_events',
          channelsTable: 'h_channels',
          flushIntervalMs: 1,
          maxRetryDelayMs: 600_000,
          timeoutMs: 30_000,
          flushTimeoutMs,
          spoolDir,
        },
        run,
      );
      for (const b of batches) feed.push(b);
      await cutOnFailure(feed.input, done, () =>
        until('the server found away', () => codesOf(run, 0).includes('CLICKHOUSE_UNAVAILABLE')),
      );
      // From now on the server takes connections and never answers.
      relay.behave('hold');
      const ending = Date.now();
      feed.end();
      await done;
      const tookMs = Date.now() - ending;
      assert.ok(tookMs < flushTimeoutMs + 2000, `the end took ${tookMs} ms`);
      assert.ok(relay.held() > 0, 'the last try was made');
      await until('the unanswered requests cut off', () =>
        relay.exchanges.filter((e) => e.verdict === 'hold').every((e) => e.closed),
      );
      assert.deepEqual(codesOf(run, 0), ['CLICKHOUSE_UNAVAILABLE', 'CLICKHOUSE_SPOOLED']);
      const spooled = findSpoolFiles(spoolDir).flatMap(entriesIn);
      assert.deepEqual(eventLines(spooled), lineNumbers);
    });

    test("the sink's signal aborted while the end waits for an unanswered insert: the end stops " +
      'at once, the rows in the spool once', async () => {
      fresh();
      relay.behave((ex) => (ex.sql.startsWith('INSERT') ? 'hold' : 'forward'));
      const { batches, run, lineNumbers } = await recordsOf('nested-depth-3');
      const spoolDir = tmpDir();
      const feed = feeder();
      const stop = new AbortController();
      const { done } = runSink(
        feed.input,
        {
          url: relay.url,
          runId: 'stopped-at-once',
          eventsTable: 's_events',
          channelsTable: 's_channels',
          flushTimeoutMs: 30_000,
          timeoutMs: 30_000,
          spoolDir,
          signal: stop.signal,
        },
        run,
      );
      for (const b of batches) feed.push(b);
      feed.end();
      await cutOnFailure(feed.input, done, () => until('the last insert held', () => relay.held() > 0));
      const stopping = Date.now();
      stop.abort();
      await done;
      const tookMs = Date.now() - stopping;
      assert.ok(tookMs < 2000, `stopped ${tookMs} ms after the signal`);
      assert.deepEqual(codesOf(run, 0), ['CLICKHOUSE_SPOOLED']);
      const spooled = findSpoolFiles(spoolDir).flatMap(entriesIn);
      assert.deepEqual(eventLines(spooled), lineNumbers);
    });

    test('the run ends while a spool with many refused rows is being split: the wait stops at ' +
      'flushTimeoutMs, nothing is filed after it, CLICKHOUSE_REJECTED counts the rows ' +
      'filed, each row is in one place', async () => {
      fresh();
      const tables = { eventsTable: 'm_events', channelsTable: 'm_channels' };
      const earlier = tmpDir();
      relay.behave('refuse');
      const bytes = generatedJson(9);
      const made = await recordsFrom(bytes);
      await runSink(
        Readable.from(made.batches, { objectMode: true }),
        { url: relay.url, runId: 'many-bad', ...tables, flushTimeoutMs: 0, spoolDir: earlier },
        made.run,
      ).done;
      // Every third events row a word where a number goes: refused as data, one by one.
      const file = join(earlier, SPOOL_FILE);
      const badLines = new Set<number>();
      const rows = entriesIn(file).map((e, i) => {
        if (e.t !== 'events' || i % 3 !== 0) return e;
        badLines.add(lineOf(e));
        return { ...e, r: { ...e.r, depth: 'deep' } } as unknown as Entry;
      });
      writeFileSync(file, rows.map((e) => JSON.stringify(e) + '\n').join(''));

      relay.behave('forward');
      const run = new Session();
      const feed = feeder();
      const flushTimeoutMs = 300;
      const { done } = runSink(
        feed.input,
        { url: relay.url, runId: 'splitter', ...tables, resend: earlier, flushTimeoutMs, spoolDir: tmpDir() },
        run,
      );
      const rejects = join(earlier, REJECTS_FILE);
      await cutOnFailure(feed.input, done, () =>
        until('rows set aside', () => existsSync(rejects) && entriesIn(rejects).length > 0),
      );
      const ending = Date.now();
      feed.end();
      await done;
      const tookMs = Date.now() - ending;
      assert.ok(tookMs < flushTimeoutMs + 2000, `the end took ${tookMs} ms`);
      const filed = entriesIn(rejects).map(lineOf);
      assert.match(
        messageOf(run, 0, 'CLICKHOUSE_REJECTED'),
        new RegExp(`^${filed.length} spooled rows refused`),
      );
      assert.ok(filed.every((l) => badLines.has(l)), 'only rows at fault filed');
      const [left, ...others] = findSpoolFiles(earlier);
      assert.deepEqual(others, []);
      const kept = entriesIn(left).filter((e) => e.t === 'events').map(lineOf);
      assert.deepEqual(
        filed.filter((l) => kept.includes(l)),
        [],
        'a row filed as refused is no longer in the spool',
      );
      const stored = new Set(await storedLines(tables.eventsTable, 'many-bad'));
      const everyLine = rows.filter((e) => e.t === 'events').map(lineOf);
      const placed = new Set([...filed, ...kept, ...stored]);
      assert.deepEqual(
        everyLine.filter((l) => !placed.has(l)),
        [],
        'every row is stored, filed or kept',
      );
      assert.deepEqual(
        [...badLines].filter((l) => stored.has(l)),
        [],
        'no row at fault stored',
      );
      // Every request was answered or cut off (one cut off may still land: its rows are also in the
      // spool, and the keys make that harmless); nothing more is filed.
      await until('every request closed', () => relay.exchanges.every((e) => e.closed));
      await storedLines(tables.eventsTable, 'many-bad');
      assert.equal(entriesIn(rejects).length, filed.length);
    });

    test('spooled rows refused in two folders: both rejects files are named, the rows counted', async () => {
      fresh();
      const tables = { eventsTable: 'w_events', channelsTable: 'w_channels' };
      const earlier = tmpDir();
      const bad: Entry[] = [];
      for (const [i, name] of (['nested-depth-3', 'foreground-fanout-3'] as const).entries()) {
        const { file } = await earlierSpool(join(earlier, `run-${i}`), name, `two-${i}`, tables);
        // One events row a word where a number goes: ClickHouse refuses it as data.
        const rows = linesOf(readFileSync(file));
        const row = JSON.parse(rows.find((l) => JSON.parse(l).t === 'events')!);
        row.r.line = 525_252;
        row.r.depth = 'deep';
        bad.push(row);
        writeFileSync(file, [JSON.stringify(row), ...rows].join('\n') + '\n');
      }
      relay.behave('forward');
      const { batches, run } = await recordsOf('forwarding-off');
      await runSink(
        Readable.from(batches, { objectMode: true }),
        { url: relay.url, runId: 'two-resender', ...tables, resend: earlier, spoolDir: tmpDir() },
        run,
      ).done;
      const rejects = [0, 1].map((i) => join(earlier, `run-${i}`, REJECTS_FILE));
      assert.deepEqual(
        rejects.map(entriesIn),
        bad.map((row) => [row]),
      );
      assert.deepEqual(codesOf(run, 0), ['CLICKHOUSE_REJECTED']);
      assert.match(
        messageOf(run, 0, 'CLICKHOUSE_REJECTED'),
        new RegExp(
          `^${bad.length} spooled rows refused by ClickHouse at ${escaped(relay.url)} \\(Code: \\d+, [^)]+\\): set aside in ${rejects.map(escaped).join(', ')}$`,
        ),
      );
      assert.deepEqual(findSpoolFiles(earlier), []);
    });

    test('without a run id, every row of the run carries one random id, its channel rows too', async () => {
      fresh();
      const { batches, run, lineNumbers, channels } = await recordsOf('nested-depth-3');
      const tables = { eventsTable: 'i_events', channelsTable: 'i_channels' };
      await runSink(
        Readable.from(batches, { objectMode: true }),
        { url: relay.url, ...tables, spoolDir: tmpDir() },
        run,
      ).done;
      const runsIn = async (table: string) =>
        (await ch.rows<{ run: string }>(`SELECT DISTINCT run FROM ${table}`)).map((r) => r.run);
      const [id, ...others] = await runsIn('i_events');
      assert.deepEqual(others, []);
      assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      assert.deepEqual(await runsIn('i_channels'), [id]);
      assert.deepEqual(await stored('i_events', id), lineNumbers);
      assert.deepEqual(await storedChannels('i_channels', id), channels);
    });

    test('rows taken in one batch, fewer than batchRows, are inserted after flushIntervalMs', async () => {
      fresh();
      const { batches, run, lineNumbers } = await recordsOf('nested-depth-3');
      const feed = feeder();
      const { done } = runSink(
        feed.input,
        {
          url: relay.url,
          runId: 'one-batch',
          eventsTable: 'o_events',
          channelsTable: 'o_channels',
          batchRows: 100_000,
          flushIntervalMs: 5,
          spoolDir: tmpDir(),
        },
        run,
      );
      // Every record at once: the queue is never empty when the flush is armed.
      feed.push(batches.flat());
      await until('rows inserted by the flush timer while the input is open', () =>
        relay.inserts('o_events').some((e) => e.status === 200),
      );
      feed.end();
      await done;
      assert.deepEqual(await stored('o_events', 'one-batch'), lineNumbers);
    });

    test('an insert answered with full batches queued behind it: the next goes at once', async () => {
      fresh();
      relay.behave((ex) => (ex.sql.startsWith('INSERT') ? 'hold' : 'forward'));
      const { batches, run, lineNumbers } = await recordsOf('binary-tree-depth-3');
      const feed = feeder();
      const { state, done } = runSink(feed.input, noFlushDue(relay.url, 'queued-behind', 'q', 4), run);
      for (const b of batches) feed.push(b);
      await until(
        'the first insert held, every batch taken',
        () => relay.held() > 0 && state.passed === batches.length,
      );
      relay.behave('forward');
      relay.release();
      // The input is open and no flush is due: only the answer to the first insert sends the next.
      await until(
        'three full batches inserted',
        () => relay.inserts('q_events').filter((e) => e.status === 200).length >= 3,
      );
      feed.end();
      await done;
      assert.deepEqual(await stored('q_events', 'queued-behind'), lineNumbers);
    });

    test('a chain torn down mid-run: the rows the sink took still go to the server', async () => {
      fresh();
      const { batches, run, lineNumbers } = await recordsOf('nested-depth-3');
      const feed = feeder();
      const { state, done } = runSink(feed.input, noFlushDue(relay.url, 'torn-down', 'd', 100_000), run);
      for (const b of batches) feed.push(b);
      await until('every batch taken', () => state.passed === batches.length);
      assert.equal(relay.inserts('d_events').length, 0, 'nothing sent yet');
      feed.input.destroy(new Error('cut off'));
      await assert.rejects(done, /cut off/);
      await until('the rows inserted', () => relay.inserts('d_events').some((e) => e.status === 200));
      assert.deepEqual(await stored('d_events', 'torn-down'), lineNumbers);
      // Fewer rows than batchRows and no flush due: they waited, and went in one insert.
      assert.equal(relay.inserts('d_events').length, 1);
    });

    test('a spool that cannot be written ends the run with ERR_WRITE', async () => {
      fresh();
      relay.behave('refuse');
      const { batches, run } = await recordsOf('nested-depth-3');
      const notADir = join(tmpDir(), 'file');
      writeFileSync(notADir, '');
      const { done } = runSink(
        Readable.from(batches, { objectMode: true }),
        {
          url: relay.url,
          runId: 'unwritable',
          batchRows: 2,
          flushIntervalMs: 1,
          flushTimeoutMs: 100,
          spoolDir: join(notADir, 'spool'),
        },
        run,
      );
      await assert.rejects(done, (err: { code?: string }) => err.code === 'ERR_WRITE');
    });

    test('a queue of exactly batchRows rows is sent at once while the input is open', async () => {
      fresh();
      const { batches, run, lineNumbers } = await recordsOf('nested-depth-3');
      const rows = rowsFor(batches, lineNumbers);
      const feed = feeder();
      const { done } = runSink(feed.input, noFlushDue(relay.url, 'exact-batch', 'x', rows), run);
      // Every record at once: the queue holds exactly batchRows rows, and no flush is due.
      await cutOnFailure(feed.input, done, async () => {
        feed.push(batches.flat());
        await until('the full batch inserted while the input is open', () =>
          relay.inserts('x_events').some((e) => e.status === 200),
        );
        assert.deepEqual(lineNumbersOf(relay.inserts('x_events')[0].rows), lineNumbers, 'the whole batch');
      });
      feed.end();
      await done;
      assert.deepEqual(await stored('x_events', 'exact-batch'), lineNumbers);
    });

    test('an insert answered with exactly batchRows rows queued behind it: they go at once', async () => {
      fresh();
      relay.behave((ex) => (ex.sql.startsWith('INSERT') ? 'hold' : 'forward'));
      const { batches, run, lineNumbers } = await recordsOf('nested-depth-3');
      const rows = rowsFor(batches, lineNumbers);
      assert.equal(rows % 2, 0, 'rows for two equal batches');
      const feed = feeder();
      const { state, done } = runSink(feed.input, noFlushDue(relay.url, 'exact-behind', 'n', rows / 2), run);
      // Two full batches at once: the first is sent and held, the second, exactly full, waits behind it.
      await cutOnFailure(feed.input, done, async () => {
        feed.push(batches.flat());
        await until('the first batch held, the records taken', () => relay.held() > 0 && state.passed === 1);
        relay.behave('forward');
        relay.release();
        // The input is open and no flush is due: only the answer to the first insert sends the second.
        await until(
          'the second batch inserted while the input is open',
          () => relay.inserts('n_events').filter((e) => e.status === 200).length >= 2,
        );
      });
      feed.end();
      await done;
      assert.deepEqual(await stored('n_events', 'exact-behind'), lineNumbers);
    });

    test('an insert answered with a partial batch queued behind ' +
      'it: the rest waits, then goes in one batch at the end', async () => {
      fresh();
      relay.behave((ex) => (ex.sql.startsWith('INSERT') ? 'hold' : 'forward'));
      const { batches, run, lineNumbers, channels } = await recordsOf('nested-depth-3');
      const records = batches.flat();
      // The rest: the records from the last one that changed the tree on, so it has rows of both tables.
      const lastChange = records.map((rec) => changesIn(rec) > 0).lastIndexOf(true);
      assert.ok(lastChange > 0);
      const rest = rowsFor(
        records.slice(lastChange).map((rec) => [rec]),
        lineNumbers.slice(lastChange),
      );
      const batchRows = rowsFor(batches, lineNumbers) - rest;
      assert.ok(rest + channels.length < batchRows, 'the rest and the final rows fit in one batch');
      const feed = feeder();
      const { state, done } = runSink(
        feed.input,
        noFlushDue(relay.url, 'partial-behind', 'p', batchRows),
        run,
      );
      await cutOnFailure(feed.input, done, async () => {
        feed.push(records);
        await until('the first batch held, the records taken', () => relay.held() > 0 && state.passed === 1);
        relay.behave('forward');
        relay.release();
        await until('the first batch answered', () =>
          relay.inserts('p_channels').some((e) => e.status === 200 && e.closed),
        );
        await settle();
      });
      feed.end();
      await done;
      // Nothing sent the rest while the input was open (no flush was due): it went with the final rows.
      assert.equal(relay.inserts('p_events').length, 2, 'events: the first batch, then the rest');
      assert.equal(
        relay.inserts('p_channels').length,
        2,
        'channels: the first batch, then the rest and finals',
      );
      assert.deepEqual(lineNumbersOf(relay.inserts('p_events')[1].rows), lineNumbers.slice(lastChange));
      assert.deepEqual(await stored('p_events', 'partial-behind'), lineNumbers);
      assert.deepEqual(await storedChannels('p_channels', 'partial-behind'), channels);
    });

    test('a queue of exactly maxQueueRows rows holds ' +
      'the input back while an insert is unanswered', async () => {
      fresh();
      relay.behave((ex) => (ex.sql.startsWith('INSERT') ? 'hold' : 'forward'));
      const { batches, run, lineNumbers } = await recordsOf('nested-depth-3');
      const rows = rowsFor(batches, lineNumbers);
      const feed = feeder();
      const { state, done } = runSink(
        feed.input,
        noFlushDue(relay.url, 'exact-queue', 'm', rows / 2, { maxQueueRows: rows / 2 }),
        run,
      );
      // One batch sent and held; the other half, exactly maxQueueRows rows, waits in the queue.
      await cutOnFailure(feed.input, done, async () => {
        feed.push(batches.flat());
        await until('an insert held', () => relay.held() > 0);
        await settle();
        assert.equal(state.passed, 0, 'the input held back');
        relay.behave('forward');
        relay.release();
        await until('the input let through', () => state.passed === 1);
      });
      feed.end();
      await done;
      assert.deepEqual(await stored('m_events', 'exact-queue'), lineNumbers);
    });

    test('a channels table made before the newer columns: they are added, and rows land', async () => {
      fresh();
      // The channels table as an older subtee made it: no model, no cost_usd.
      await ch.client.command({
        query: `CREATE TABLE old_channels (
  run String, session String, channel String, parent String, depth Int16, agent String, description String,
  status String, background Int8, orphan UInt8, summary String, lines UInt64,
  text_blocks UInt32, thinking_blocks UInt32, tool_uses UInt32, tool_results UInt32,
  input_tokens UInt64, output_tokens UInt64, cache_read_tokens UInt64, cache_creation_tokens UInt64,
  first_seen DateTime('UTC'), last_seen DateTime('UTC'), first_seen_ms UInt64, last_seen_ms UInt64,
  stalled UInt8, interrupted UInt8, ver UInt64
) ENGINE = ReplacingMergeTree(ver) ORDER BY (run, channel)`,
      });
      const { batches, run, lineNumbers, channels } = await recordsOf('nested-depth-3');
      await runSink(
        Readable.from(batches, { objectMode: true }),
        {
          url: relay.url,
          runId: 'older-table',
          eventsTable: 'old_events',
          channelsTable: 'old_channels',
          spoolDir: tmpDir(),
        },
        run,
      ).done;
      const columns = (await ch.rows<{ name: string }>('DESCRIBE TABLE old_channels')).map((c) => c.name);
      assert.ok(columns.includes('model') && columns.includes('cost_usd'), `columns: ${columns.join(', ')}`);
      assert.deepEqual(await storedChannels('old_channels', 'older-table'), channels);
      assert.deepEqual(await stored('old_events', 'older-table'), lineNumbers);
      assert.deepEqual(codesOf(run, 0), []);
    });
  },
);
