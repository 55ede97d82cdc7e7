/**
 * `subtee stats` over many run folders (time, peak RSS) beside `find … -name index.json |
 * xargs jq …` counting the same per-agent figures, on the same generated folders in the
 * same run, interleaved:
 *
 *   npm run build && node dist/bench/stats.js [--runs 10000] [--repeat 3] [--quick]
 *
 * The folders are written by bench/stats-gen.ts (seeded, index.json only). Each repeat runs
 * every command once; the table gives the median (min–max) wall time and the peak RSS of the
 * largest process (GNU time's %M). The jq pipeline's per-agent counts are checked against
 * subtee's, so both did the same work.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeRuns } from './stats-gen.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'subtee.js');
const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const quick = process.argv.includes('--quick');
const runs = Number(arg('runs', quick ? '200' : '10000'));
const repeat = Number(arg('repeat', quick ? '1' : '3'));
const work = mkdtempSync(join(arg('out-root', tmpdir()), 'subtee-stats-bench-'));
const hasJq = spawnSync('jq', ['--version']).status === 0;
const hasTime = existsSync('/usr/bin/time');

/** Per agent: agents, failed, input + output tokens — what the jq baseline counts too. */
const JQ_CHANNELS =
  '.channels[] | [(if .id == null then "main" else (.agent // "") end), .status, ' +
  '((.usage.input_tokens // 0) + (.usage.output_tokens // 0))]';
const JQ_GROUPS =
  'group_by(.[0]) | map({key: .[0][0], agents: length, failed: (map(select(.[1] == "failed")) | length), ' +
  'tokens: (map(.[2]) | add)}) | sort_by(.key)';

interface Sample {
  ms: number;
  rssKb: number | null;
  code: number | null;
  stdout: string;
}

function timed(shell: string): Sample {
  const rssFile = join(work, 'rss');
  const cmd = hasTime ? `/usr/bin/time -f '%M' -o ${rssFile} sh -c ${JSON.stringify(shell)}` : shell;
  const start = process.hrtime.bigint();
  const r = spawnSync('sh', ['-c', cmd], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  const rss = hasTime ? Number(readFileSync(rssFile, 'utf8').trim().split('\n').pop()) : NaN;
  return { ms, rssKb: Number.isFinite(rss) ? rss : null, code: r.status, stdout: r.stdout };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function main(): void {
  const fleet = join(work, 'fleet');
  const t0 = Date.now();
  writeRuns(fleet, runs, 1);
  // A tenth as many: peak RSS beside the full set's shows whether memory grows with the runs.
  const tenth = join(work, 'tenth');
  writeRuns(tenth, Math.max(1, Math.floor(runs / 10)), 2);
  console.log(
    `${runs.toLocaleString('en-US')} run folders written in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
  const commands: Array<[string, string]> = [
    ['subtee stats (tables, lists, percentiles)', `node ${BIN} stats ${fleet} --json`],
    ['subtee stats --by day', `node ${BIN} stats ${fleet} --by day --json`],
    [
      `subtee stats, ${Math.floor(runs / 10).toLocaleString('en-US')} folders (memory check)`,
      `node ${BIN} stats ${tenth} --json`,
    ],
  ];
  if (hasJq)
    commands.push([
      'find + xargs jq + jq -s (per-agent counts only)',
      `find ${fleet} -name index.json -print0 | xargs -0 jq -c '${JQ_CHANNELS}' | jq -s -c '${JQ_GROUPS}'`,
    ]);
  else console.log('jq is not installed: the baseline is left out (apt-get install jq)');
  const samples = new Map<string, Sample[]>(commands.map(([label]) => [label, []]));
  for (let i = 0; i < repeat; i++)
    for (const [label, cmd] of commands) {
      const s = timed(cmd);
      if (s.code !== 0) throw new Error(`${label} exited ${s.code}`);
      samples.get(label)!.push(s);
    }

  // Both did the same counting.
  const subtee = JSON.parse(samples.get(commands[0][0])![0].stdout);
  if (hasJq) {
    const jq = JSON.parse(samples.get(commands[3][0])![0].stdout) as Array<{
      key: string;
      agents: number;
      failed: number;
      tokens: number;
    }>;
    const ours = (subtee.tables.agent as any[])
      .map((g) => ({
        key: g.key === '(unknown)' ? '' : g.key,
        agents: g.agents,
        failed: g.failed,
        tokens: g.tokens,
      }))
      .sort((a, b) => (a.key < b.key ? -1 : 1));
    if (JSON.stringify(ours) !== JSON.stringify(jq))
      throw new Error(`subtee and jq disagree:\n${JSON.stringify(ours)}\n${JSON.stringify(jq)}`);
    console.log('per-agent agents, failed and tokens: subtee and jq agree');
  }
  console.log(`subtee: ${subtee.runs} runs, ${subtee.total.agents} agents, ${subtee.skipped} skipped`);
  console.log(
    `\nMachine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`,
  );
  console.log(`${runs.toLocaleString('en-US')} run folders; ${repeat} runs each; median (min–max)\n`);
  console.log('| command | wall s | peak RSS MB |\n|---|---|---|');
  for (const [label] of commands) {
    const xs = samples.get(label)!;
    const ms = xs.map((s) => s.ms);
    const rss = xs.map((s) => s.rssKb).filter((v): v is number => v !== null);
    const wall = `${(median(ms) / 1000).toFixed(2)} (${(Math.min(...ms) / 1000).toFixed(2)}–${(Math.max(...ms) / 1000).toFixed(2)})`;
    console.log(`| ${label} | ${wall} | ${rss.length ? Math.round(Math.max(...rss) / 1024) : '?'} |`);
  }
}

try {
  main();
} finally {
  rmSync(work, { recursive: true, force: true });
}
