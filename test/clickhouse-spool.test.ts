import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { generate } from '../bench/gen.js';
import { findSpoolFiles, REJECTS_FILE } from '../src/chain/sinks/clickhouse-spool.js';
import { tableDdl } from '../src/chain/sinks/clickhouse-rows.js';
import { BIN, closedPort, fixtureFiles, linesOf, tmpDir } from './helpers/helpers.js';
import { clickhouseAvailable, startClickHouse, type ClickHouseServer } from './servers/clickhouse.js';

interface CliRun {
  code: number | null;
  stderr: string;
  out: string;
}

/** The real CLI, its stdin the input given, ended once `hold` (if any) settles. */
function subtee(args: string[], out: string, input?: string, hold?: Promise<unknown>): Promise<CliRun> {
  const child = spawn(process.execPath, [BIN, '--out', out, '--stdout', 'none', '-q', ...args], {
    env: { PATH: process.env.PATH },
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  child.stdin!.on('error', () => {});
  child.stdin!.write(input ?? '');
  void (hold ?? Promise.resolve()).finally(() => child.stdin!.end());
  const timer = setTimeout(() => child.kill('SIGKILL'), 180_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, out });
    }),
  );
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

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const fixture = (name: string) => fixtureFiles().find((f) => basename(f) === `${name}.jsonl`)!;
const lit = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
/** Lines of an input, counted here: one event row each. */
const inputLines = (bytes: Buffer) => linesOf(bytes).length;

/** A run against a server that is not there: every row waits in `out`'s spool. */
async function spooledRun(out: string, runId: string, input: string, tables: object): Promise<string> {
  const url = `http://127.0.0.1:${await closedPort()}`;
  const away = await subtee(
    ['-c', config({ url, runId, ...tables, maxRetryDelayMs: 50, flushTimeoutMs: 300 })],
    out,
    input,
  );
  assert.equal(away.code, 0, away.stderr);
  const spool = join(out, 'clickhouse-spool.jsonl');
  assert.ok(existsSync(spool), away.stderr);
  return spool;
}

describe(
  'ClickHouse spool resends against a real server',
  { skip: !clickhouseAvailable() && 'clickhouse-server is not installed' },
  () => {
    let ch: ClickHouseServer;
    before(async () => {
      ch = await startClickHouse();
    });
    after(async () => {
      await ch?.stop();
    });

    test("a spooled row of a wrong type is set aside (counted, warned); the rest of the spool and the " +
      "run's own rows go in", async () => {
      const tables = { eventsTable: 'bad_row_events', channelsTable: 'bad_row_channels' };
      const runs = tmpDir();
      const input = readFileSync(fixture('failing-beside-healthy'));
      const spool = await spooledRun(join(runs, 'run-1'), 'spooled-run', input.toString(), tables);
      const entries = linesOf(readFileSync(spool));
      // One more event row for a line of its own, its depth (an Int16) a word.
      const bad = JSON.parse(entries.find((l) => JSON.parse(l).t === 'events')!);
      bad.r.line = 987_654;
      bad.r.depth = 'deep';
      const half = Math.floor(entries.length / 2);
      writeFileSync(
        spool,
        [...entries.slice(0, half), JSON.stringify(bad), ...entries.slice(half)].join('\n') + '\n',
      );

      const ownInput = readFileSync(fixture('foreground-fanout-3'));
      const cfg = config({ url: ch.url, runId: 'resending-run', ...tables, resend: runs });
      const next = await subtee(['-c', cfg], join(runs, 'run-2'), ownInput.toString());
      assert.equal(next.code, 0, next.stderr);
      const rejects = join(runs, 'run-1', REJECTS_FILE);
      assert.match(
        next.stderr,
        new RegExp(
          `warning CLICKHOUSE_REJECTED: 1 spooled rows refused by ClickHouse at http://127\\.0\\.0\\.1:\\d+ \\(Code: \\d+, [^:)]+\\): set aside in ${rejects}\\n`,
        ),
      );
      assert.doesNotMatch(next.stderr, /deep/, 'the warning does not quote the row');
      assert.doesNotMatch(
        next.stderr,
        /CLICKHOUSE_UNAVAILABLE|CLICKHOUSE_SPOOLED/,
        'the server was up all along',
      );
      assert.deepEqual(
        linesOf(readFileSync(rejects)).map((l) => JSON.parse(l)),
        [bad],
      );
      assert.deepEqual(
        findSpoolFiles(runs),
        [],
        "the spool was sent, and the run's own rows were not spooled",
      );
      const index = JSON.parse(readFileSync(join(runs, 'run-2', 'index.json'), 'utf8'));
      assert.deepEqual(
        index.warnings.map((w: { code: string }) => w.code),
        ['CLICKHOUSE_REJECTED'],
      );

      for (const [run, bytes] of [
        ['spooled-run', input],
        ['resending-run', ownInput],
      ] as const) {
        const [ev] = await ch.rows<{ n: string; lines: string; bad: string }>(
          `SELECT count() AS n, uniqExact(line) AS lines, countIf(line = 987654) AS bad FROM ${tables.eventsTable} FINAL WHERE run = ${lit(run)}`,
        );
        assert.deepEqual(
          [Number(ev.n), Number(ev.lines), Number(ev.bad)],
          [inputLines(bytes), inputLines(bytes), 0],
          run,
        );
      }
    });

    test('two resends of one spool at once: each row is sent by one of them only', async () => {
      // Plain MergeTree tables (created before subtee would make its own): a row sent twice stays twice.
      const tables = { eventsTable: 'twice_events', channelsTable: 'twice_channels' };
      for (const [kind, name] of [
        ['events', tables.eventsTable],
        ['channels', tables.channelsTable],
      ] as const) {
        const ddl = tableDdl(kind, name).replace(
          /ENGINE = ReplacingMergeTree(\(ver\))?/,
          'ENGINE = MergeTree',
        );
        await ch.client.command({ query: ddl });
      }
      const runs = tmpDir();
      const input =
        [...generate({ sizeBytes: 200 * 1024, fanout: 5, shape: 'small', seed: 5 })].join('\n') + '\n';
      const spool = await spooledRun(join(runs, 'run-1'), 'spooled-twice', input, tables);
      const spooledEvents = linesOf(readFileSync(spool)).filter((l) => JSON.parse(l).t === 'events').length;

      const slow = { ...tables, resend: runs, batchRows: 1, flushTimeoutMs: 170_000 };
      const stored = async () => {
        const [row] = await ch.rows<{ n: string }>(
          `SELECT count() AS n FROM ${tables.eventsTable} WHERE run = 'spooled-twice'`,
        );
        return Number(row.n);
      };
      const first = subtee(
        ['-c', config({ url: ch.url, runId: 'first-sender', ...slow })],
        join(runs, 'run-2'),
      );
      // The second starts while the first is sending the spool it claimed.
      await until('the first sender to be sending', async () => (await stored()) > 0);
      const second = subtee(
        ['-c', config({ url: ch.url, runId: 'second-sender', ...slow })],
        join(runs, 'run-3'),
      );
      const [a, b] = await Promise.all([first, second]);
      assert.equal(a.code, 0, a.stderr);
      assert.equal(b.code, 0, b.stderr);
      assert.deepEqual(findSpoolFiles(runs), []);
      const [ev] = await ch.rows<{ n: string; lines: string }>(
        `SELECT count() AS n, uniqExact(line) AS lines FROM ${tables.eventsTable} WHERE run = 'spooled-twice'`,
      );
      assert.deepEqual([Number(ev.n), Number(ev.lines)], [spooledEvents, spooledEvents]);
    });

    test('a resend cut off midway by the server dying goes ' +
      'on where it stopped once the server is back', async () => {
      const tables = { eventsTable: 'midway_events', channelsTable: 'midway_channels' };
      const runs = tmpDir();
      const input =
        [...generate({ sizeBytes: 200 * 1024, fanout: 5, shape: 'small', seed: 7 })].join('\n') + '\n';
      const spool = await spooledRun(join(runs, 'run-1'), 'cut-midway', input, tables);
      const spooledEvents = linesOf(readFileSync(spool)).filter((l) => JSON.parse(l).t === 'events').length;
      const stored = async () => {
        try {
          const [row] = await ch.rows<{ n: string }>(
            `SELECT count() AS n FROM ${tables.eventsTable} FINAL WHERE run = 'cut-midway'`,
          );
          return Number(row.n);
        } catch {
          return -1;
        }
      };
      let serverBack!: () => void;
      const back = new Promise<void>((resolve) => (serverBack = resolve));
      const cfg = config({
        url: ch.url,
        runId: 'resender',
        ...tables,
        resend: runs,
        batchRows: 1,
        maxRetryDelayMs: 100,
        flushTimeoutMs: 120_000,
      });
      // The resending run's input stays open until the server is back.
      const resend = subtee(['-c', cfg], join(runs, 'run-2'), '', back);
      try {
        await until('the resend to be under way', async () => (await stored()) > 0);
        await ch.kill();
        await ch.start();
      } finally {
        serverBack();
      }
      const r = await resend;
      assert.equal(r.code, 0, r.stderr);
      assert.doesNotMatch(r.stderr, /CLICKHOUSE_SPOOLED/);
      assert.deepEqual(findSpoolFiles(runs), []);
      assert.equal(await stored(), spooledEvents);
    });
  },
);
