/**
 * The HTML report at scale, beside the run it reports on: a generated run (2,000 subagents,
 * ~200 MB by default) goes through subtee to files, then `subtee report` builds the page;
 * both are timed in the same session, and the page size is printed beside the input's.
 * With Chromium installed, the page is then opened once and timed until it is usable.
 *
 *   npm run build && node dist/bench/report.js [--size-mb 200] [--fanout 2000] [--runs 3] [--out-root DIR]
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { writeStream } from './gen.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'subtee.js');
const CHROMIUM = process.env.SUBTEE_CHROMIUM ?? '/usr/bin/chromium';
const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const sizeMb = Number(arg('size-mb', '200'));
const fanout = Number(arg('fanout', '2000'));
const runs = Number(arg('runs', '3'));
const work = mkdtempSync(join(arg('out-root', tmpdir()), 'subtee-bench-report-'));
const hasTime = existsSync('/usr/bin/time');

interface Sample {
  ms: number;
  rssKb: number | null;
  /** User + system CPU time: steadier than wall time on a machine shared with other work. */
  cpuMs: number | null;
}

/** Wall time, peak RSS and CPU time (GNU time) of one subtee command. */
function timed(args: string[]): Sample {
  const cmd = hasTime
    ? ['/usr/bin/time', '-f', '%M %U %S', '-o', join(work, 'rss'), process.execPath, BIN, ...args]
    : [process.execPath, BIN, ...args];
  const t0 = performance.now();
  const r = spawnSync(cmd[0], cmd.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`subtee ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  const t = hasTime
    ? readFileSync(join(work, 'rss'), 'utf8').trim().split('\n').pop()!.split(' ').map(Number)
    : null;
  return { ms, rssKb: t ? t[0] : null, cpuMs: t ? (t[1] + t[2]) * 1000 : null };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const s = (ms: number) => (ms / 1000).toFixed(2);
const mb = (bytes: number) => (bytes / 1e6).toFixed(1);

/** Opens the page once in Chromium: time to a rendered page, to a transcript on click, to search hits. */
async function openInBrowser(page: string): Promise<string[]> {
  if (!existsSync(CHROMIUM)) return [`(Chromium not found at ${CHROMIUM}: page not opened)`];
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const tab = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const t0 = performance.now();
    await tab.goto(pathToFileURL(page).href);
    await tab.waitForSelector('#app[data-state="ready"]', { timeout: 120_000 });
    const ready = performance.now() - t0;
    const agents = Number(await tab.locator('#app').getAttribute('data-channels'));
    const rows = await tab.locator('#tree tr.tree-row').count();
    const t1 = performance.now();
    await tab
      .locator('#tree tr.tree-row')
      .nth(Math.floor(rows / 2))
      .click();
    await tab.waitForSelector('#transcript:not([hidden]) .entries');
    const click = performance.now() - t1;
    const t2 = performance.now();
    await tab.fill('#search', 'sentence');
    await tab.waitForSelector('#hits li.hit', { timeout: 60_000 });
    const search = performance.now() - t2;
    return [
      `| page open in Chromium, to rendered (${agents} agents; ${rows} rows drawn, the rest as they scroll into view) | ${s(ready)} |`,
      `| click a row → its transcript | ${s(click)} |`,
      `| search across all transcripts ("sentence", incl. 120 ms input debounce) | ${s(search)} |`,
    ];
  } finally {
    await browser.close();
  }
}

const input = join(work, 'input.jsonl');
const gen = await writeStream({ sizeBytes: sizeMb * 1024 * 1024, fanout, shape: 'large', seed: 1 }, input);
const runSamples: Sample[] = [];
const reportSamples: Sample[] = [];
const htmlSamples: Sample[] = [];
let pageBytes = 0;
let lastOut = '';
for (let i = 0; i < runs; i++) {
  const out = join(work, `o${i}`);
  runSamples.push(timed(['--out', out, '--stdout', 'none', '-q', input]));
  reportSamples.push(timed(['report', '-q', out]));
  pageBytes = statSync(join(out, 'report.html')).size;
  const both = join(work, `h${i}`);
  htmlSamples.push(timed(['--out', both, '--stdout', 'none', '-q', '--html', input]));
  if (lastOut) rmSync(lastOut, { recursive: true, force: true });
  rmSync(both, { recursive: true, force: true });
  lastOut = out;
}
const data = JSON.parse(
  /<script type="application\/json" id="subtee-data">([^<]*)<\/script>/.exec(
    readFileSync(join(lastOut, 'report.html'), 'utf8'),
  )![1],
);
const runMs = median(runSamples.map((x) => x.ms));
const runCpu = median(runSamples.map((x) => x.cpuMs ?? NaN));
const row = (label: string, xs: Sample[]) => {
  const ms = xs.map((x) => x.ms);
  const rss = xs.map((x) => x.rssKb).filter((x): x is number => x !== null);
  const cpu = median(xs.map((x) => x.cpuMs ?? NaN));
  return (
    `| ${label} | ${s(median(ms))} (${s(Math.min(...ms))}–${s(Math.max(...ms))}) | ${(median(ms) / runMs).toFixed(2)} | ` +
    `${Number.isNaN(cpu) ? '–' : s(cpu)} | ${Number.isNaN(cpu) ? '–' : (cpu / runCpu).toFixed(2)} | ` +
    `${rss.length ? (Math.max(...rss) / 1024).toFixed(0) : '–'} |`
  );
};
const lines = [
  `Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}`,
  '',
  `Input: ${mb(gen.bytes)} MB, ${gen.lines.toLocaleString('en')} lines, ${fanout.toLocaleString('en')} subagents (bench/gen.ts, large lines, seed 1); ${runs} runs, median (min–max)`,
  '',
  '| step | wall s | × the run | CPU s | × the run | peak RSS MB |',
  '|---|---|---|---|---|---|',
  row('subtee → files (the run)', runSamples),
  row('subtee report OUT (the page from the folder)', reportSamples),
  row('subtee → files with --html (both in one)', htmlSamples),
  '',
  `| page | size |`,
  '|---|---|',
  `| report.html | ${mb(pageBytes)} MB (limit ${data.page.limitBytes / 1024 / 1024} MiB), ${((pageBytes / gen.bytes) * 100).toFixed(1)}% of the input |`,
  `| transcripts | ${data.channels.length.toLocaleString('en')} channels, ${data.page.cutChannels.toLocaleString('en')} cut to ${data.page.channelChars.toLocaleString('en')} characters each (the rest in the .log files) |`,
  '',
  '| in the browser (once) | s |',
  '|---|---|',
  ...(await openInBrowser(join(lastOut, 'report.html'))),
];
process.stdout.write(lines.join('\n') + '\n');
rmSync(work, { recursive: true, force: true });
