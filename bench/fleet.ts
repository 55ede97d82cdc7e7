/**
 * Throughput of subtee with the fleet sinks on (OTLP traces, ClickHouse), beside the files
 * sink alone, on the same generated input in the same run, interleaved:
 *
 *   npm run build && node dist/bench/fleet.js [--size-mb 100] [--runs 3] [--quick]
 *
 * The OTLP collector is a loopback HTTP server in this process that reads each request and
 * answers 200 (no decoding, so it costs the machine as little as possible); ClickHouse is
 * Debian's clickhouse-server started like the tests start it. Both share the machine's cores
 * with subtee, as a collector or a database on the same host would. Every run is checked:
 * exit 0, no warning (nothing undelivered or spooled), and for ClickHouse every line stored.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startClickHouse } from '../test/servers/clickhouse.js';
import { writeStream } from './gen.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'subtee.js');
const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const quick = process.argv.includes('--quick');
const runs = Number(arg('runs', quick ? '1' : '3'));
const sizeMb = Number(arg('size-mb', quick ? '2' : '100'));
const work = mkdtempSync(join(tmpdir(), 'subtee-fleet-bench-'));
const hasTime = existsSync('/usr/bin/time');

interface Sample {
  ms: number;
  /** User + system CPU time of subtee: steadier than wall time on a shared machine. */
  cpuMs: number | null;
  rssKb: number | null;
  code: number | null;
  stderr: string;
}

/** Runs subtee on a file (async: the collector in this process must keep answering). */
async function measure(args: string[], input: string): Promise<Sample> {
  const rss = join(work, 'rss');
  const argv = [process.execPath, BIN, ...args, input];
  const [cmd, ...rest] = hasTime ? ['/usr/bin/time', '-f', '%M %U %S', '-o', rss, ...argv] : argv;
  const t0 = performance.now();
  const child = spawn(cmd, rest, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const ms = performance.now() - t0;
  if (!hasTime) return { ms, cpuMs: null, rssKb: null, code, stderr };
  const [kb, user, sys] = readFileSync(rss, 'utf8').trim().split('\n').pop()!.split(' ').map(Number);
  return { ms, cpuMs: (user + sys) * 1000, rssKb: kb, code, stderr };
}

/** A collector that takes everything: counts requests and bytes, answers 200. */
async function startSinkCollector() {
  const seen = { requests: 0, bytes: 0 };
  const server = createServer((req, res) => {
    req.on('data', (d: Buffer) => (seen.bytes += d.length));
    req.on('end', () => {
      seen.requests++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const report: string[] = [];
  report.push(`# subtee fleet sinks benchmark — ${new Date().toISOString()}`, '');
  report.push(
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, load average at start ${loadavg()[0].toFixed(1)}`,
    '',
  );
  const collector = await startSinkCollector();
  const ch = await startClickHouse();
  try {
    for (const shape of ['large', 'small'] as const) {
      const input = join(work, `${shape}.jsonl`);
      const { lines } = await writeStream(
        { sizeBytes: sizeMb * 1024 * 1024, fanout: 50, shape, seed: shape === 'large' ? 21 : 22 },
        input,
      );
      const mb = statSync(input).size / 1e6;
      let n = 0;
      const out = () => join(work, 'out', `${shape}-${++n}`);
      const clickhouseConfig = (runId: string, otlp: boolean) => {
        const file = join(work, `${runId}.json`);
        writeFileSync(
          file,
          JSON.stringify({
            sinks: [
              { use: 'stdout', mode: 'none' },
              ...(otlp ? [{ use: 'otlp', url: collector.url }] : []),
              { use: 'clickhouse', url: ch.url, runId },
            ],
          }),
        );
        return file;
      };
      type Plan = { args: string[]; out: string; runId?: string };
      const plan = (extra: string[], runId?: string): Plan => {
        const dir = out();
        return { args: ['--out', dir, '--stdout', 'none', '-q', ...extra], out: dir, runId };
      };
      const clickhouseRun = (otlp: boolean) => {
        const runId = `bench-${shape}-${++n}`;
        return plan(['-c', clickhouseConfig(runId, otlp)], runId);
      };
      const rows: Array<{ label: string; args: () => Plan; samples: Sample[]; stored: number[] }> = [
        { label: 'files only', args: () => plan([]), samples: [], stored: [] },
        { label: 'files + otlp', args: () => plan([`--otlp=${collector.url}`]), samples: [], stored: [] },
        { label: 'files + clickhouse', args: () => clickhouseRun(false), samples: [], stored: [] },
        { label: 'files + otlp + clickhouse', args: () => clickhouseRun(true), samples: [], stored: [] },
      ];
      for (let i = 0; i < runs; i++) {
        for (const row of rows) {
          const p = row.args();
          const s = await measure(p.args, input);
          if (s.code !== 0 || s.stderr.trim() !== '')
            throw new Error(`${row.label}: exit ${s.code}\n${s.stderr}`);
          row.samples.push(s);
          if (p.runId) {
            const [r] = await ch.rows<{ n: string }>(
              `SELECT count() AS n FROM subtee_events FINAL WHERE run = '${p.runId}'`,
            );
            const inputLines = JSON.parse(readFileSync(join(p.out, 'index.json'), 'utf8')).input.lines;
            if (Number(r.n) !== inputLines)
              throw new Error(`${row.label}: ${r.n} rows stored for ${inputLines} input lines`);
            row.stored.push(Number(r.n));
          }
        }
        rmSync(join(work, 'out'), { recursive: true, force: true });
      }
      const base = median(rows[0].samples.map((s) => s.ms));
      const cpuOf = (r: (typeof rows)[number]) =>
        r.samples.map((s) => s.cpuMs).filter((x): x is number => x !== null);
      const baseCpu = hasTime ? median(cpuOf(rows[0])) : NaN;
      report.push(
        `### ${shape} lines, 50 subagents`,
        '',
        `${mb.toFixed(0)} MB, ${lines.toLocaleString('en')} lines; ${runs} runs each, interleaved; median (min–max)`,
        '',
      );
      report.push(
        '| label | wall s | MB/s | lines/s | × files only (wall) | CPU s | × files only (CPU) | peak RSS MB | rows stored in ClickHouse (= input lines) |',
        '|---|---|---|---|---|---|---|---|---|',
      );
      for (const row of rows) {
        const ms = row.samples.map((s) => s.ms);
        const m = median(ms);
        const rss = row.samples.map((s) => s.rssKb).filter((x): x is number => x !== null);
        const stored = row.stored.length
          ? [...new Set(row.stored)].map((x) => x.toLocaleString('en')).join(', ')
          : '–';
        const cpu = hasTime ? median(cpuOf(row)) : NaN;
        const cells = [
          row.label,
          `${(m / 1000).toFixed(2)} (${(Math.min(...ms) / 1000).toFixed(2)}–${(Math.max(...ms) / 1000).toFixed(2)})`,
          (mb / (m / 1000)).toFixed(0),
          Math.round(lines / (m / 1000)).toLocaleString('en'),
          (base / m).toFixed(2),
          hasTime ? (cpu / 1000).toFixed(2) : '–',
          hasTime ? (baseCpu / cpu).toFixed(2) : '–',
          rss.length ? (Math.max(...rss) / 1024).toFixed(0) : '–',
          stored,
        ];
        report.push(`| ${cells.join(' | ')} |`);
      }
      report.push('');
    }
    report.push(
      `OTLP collector received ${collector.seen.requests.toLocaleString('en')} requests, ${(collector.seen.bytes / 1e6).toFixed(1)} MB.`,
      '',
    );
  } finally {
    await collector.close();
    await ch.stop();
    rmSync(work, { recursive: true, force: true });
  }
  process.stdout.write(report.join('\n') + '\n');
}

await main();
