/**
 * subtee's benchmarks, side by side with the floors and the baselines, on the same
 * generated input in one run:  npm run bench  (or `npm run bench -- --quick` for the smoke form).
 * Options: see USAGE.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { generateBackground, writeLines, writeStream } from './gen.js';
import { measureHandover } from './handover.js';
import { measureLatency } from './latency.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'subtee.js');
/** The seed article's jq filter: the main conversation's text. */
const MAIN_TEXT_JQ =
  'select(.type == "assistant" and .parent_tool_use_id == null) | .message.content[]? | ' +
  'select(.type == "text") | .text';
/** `bench/floor.ts`'s modes: what a line costs with no run model, no index and no escapes. */
const FLOOR_LABELS = Object.freeze({
  bytes: 'floor: routed by bytes, nothing judged, .jsonl only',
  'parse-all': 'floor: JSON.parse every line, .jsonl + .log',
  'scan-parse': 'floor: scanner judges every line, JSON.parse all but stream events, .jsonl + .log',
  'scan-view': "floor: scanner judges every line, its view read, .jsonl + .log",
});
const USAGE = `usage: npm run bench -- [options]
  --quick        small inputs, one run each: proves the benchmark works (used by the tests)
  --runs N       repetitions per measurement (default 5; the median is reported)
  --size-mb N    size of the main inputs (default 200)
  --big-mb N     size of the long input for the memory check (default 1024; 0 skips it)
  --out-root D   where outputs are written (default: the system temp folder)
  --only T,…     run only these tables: shapes, fanout, projection, memory, junk, huge, latency,
                 handover, state
  --huge-mb L    sizes of the single-line inputs (default 200,2048; 0 skips them)
  --junk-lines N one-byte junk lines in the junk input (default 45000000; 0 skips it)
  --demux FILE   the seed's demux.mjs, the baseline (default ../shared/baselines/demux.mjs)
`;
const OPTIONS = ['runs', 'size-mb', 'big-mb', 'out-root', 'only', 'huge-mb', 'junk-lines', 'demux'] as const;
let values: Record<string, string | boolean | undefined>;
try {
  ({ values } = parseArgs({
    options: {
      ...Object.fromEntries(OPTIONS.map((name) => [name, { type: 'string' as const }])),
      quick: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  }));
} catch (err) {
  process.stderr.write(`bench: ${(err as Error).message}\n${USAGE}`);
  process.exit(2);
}
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const arg = (name: (typeof OPTIONS)[number], fallback: string) => String(values[name] ?? fallback);
const quick = values.quick === true;
const TABLES = ['shapes', 'fanout', 'projection', 'memory', 'junk', 'huge', 'latency', 'handover', 'state'];
const refuse = (why: string): never => {
  process.stderr.write(`bench: ${why}\n${USAGE}`);
  process.exit(2);
};
const counted = (name: (typeof OPTIONS)[number], fallback: string, least = 0) => {
  const n = Number(arg(name, fallback));
  return Number.isInteger(n) && n >= least
    ? n
    : refuse(`--${name} must be a whole number of at least ${least}, not ${arg(name, fallback)}`);
};
const runs = counted('runs', quick ? '1' : '5', 1);
const sizeMb = counted('size-mb', quick ? '4' : '200');
const bigMb = counted('big-mb', quick ? '8' : '1024');
const junkLines = counted('junk-lines', quick ? '200000' : '45000000');
const only = arg('only', '');
const DEMUX = arg('demux', join(ROOT, '..', 'shared', 'baselines', 'demux.mjs'));
const unknownTable = only.split(',').find((table) => only !== '' && !TABLES.includes(table));
if (unknownTable !== undefined) refuse(`--only: no table ${unknownTable} (tables: ${TABLES.join(', ')})`);
const hugeMb = arg('huge-mb', quick ? '20' : '200,2048')
  .split(',')
  .map((size) =>
    /^\d+$/.test(size) ? Number(size) : refuse(`--huge-mb must list whole numbers, not ${size}`),
  )
  .filter((n) => n > 0);
const wanted = (table: string) => only === '' || only.split(',').includes(table);
const outRoot = arg('out-root', tmpdir());
mkdirSync(outRoot, { recursive: true });
const work = mkdtempSync(join(outRoot, 'subtee-bench-'));
const hasTime = existsSync('/usr/bin/time');
const hasJq = spawnSync('jq', ['--version']).status === 0;
const node = process.execPath;

interface Sample {
  ms: number;
  rssKb: number | null;
  /** User and system CPU seconds (GNU time `%U + %S`): on a shared machine, steadier than wall time. */
  cpuS: number | null;
  code: number | null;
}

/**
 * Longest one measured command may run, far above any row's time on a loaded machine: a
 * command that hangs is killed (with what it started) and named, and the benchmark fails,
 * rather than holding the whole run for ever.
 */
const COMMAND_LIMIT_S = quick ? 120 : 1800;
let overran = 0;

/** Runs one shell command with stdin from a file (or `feed | …`); wall time and peak RSS (GNU time). */
function measure(cmd: string, input: string, feed?: string): Sample {
  const timed = hasTime ? `/usr/bin/time -f '%M %U %S' -o ${work}/rss ${cmd}` : cmd;
  const limited = `timeout -s KILL ${COMMAND_LIMIT_S} ${timed}`;
  const t0 = performance.now();
  rmSync(`${work}/rss`, { force: true });
  const shell = feed
    ? `${feed} | ${limited} > /dev/null 2>${work}/stderr`
    : `${limited} < '${input}' > /dev/null 2>${work}/stderr`;
  const r = spawnSync('bash', ['-c', shell], { stdio: 'ignore' });
  const ms = performance.now() - t0;
  if (ms >= COMMAND_LIMIT_S * 1000) {
    overran++;
    process.stderr.write(`bench: killed after ${COMMAND_LIMIT_S} s: ${cmd}\n`);
  }
  const rss = hasTime && existsSync(`${work}/rss`) ? readFileSync(`${work}/rss`, 'utf8') : '';
  const [kb, user, sys] = rss === '' ? [] : rss.trim().split('\n').pop()!.split(' ').map(Number);
  return { ms, rssKb: kb ?? null, cpuS: user === undefined ? null : user + sys, code: r.status };
}

function fresh(name: string): string {
  const d = join(work, 'out', name);
  rmSync(d, { recursive: true, force: true });
  return d;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

interface Row {
  label: string;
  samples: Sample[];
  /** The input of this row when it differs from the table's. */
  input?: { file: string; lines: number };
}

function table(title: string, file: string, rows: Row[], lines: number, ratiosTo: string[]) {
  const mbOf = (f: string) => statSync(f).size / 1e6;
  const med = new Map(rows.map((r) => [r.label, median(r.samples.map((s) => s.ms))]));
  const n = Math.max(...rows.map((r) => r.samples.length));
  const out = [
    `### ${title}`,
    '',
    `${mbOf(file).toFixed(0)} MB, ${lines.toLocaleString('en')} lines unless the label says otherwise; ` +
      `${n} runs each; median (min–max)`,
    '',
  ];
  const cpuOf = (r: Row) => {
    const cpu = r.samples.map((s) => s.cpuS);
    return cpu.every((x): x is number => x !== null) ? median(cpu) : null;
  };
  const cpuMed = new Map(rows.map((r) => [r.label, cpuOf(r)]));
  // CPU time against the first baseline too: on a machine others share, wall time is also a wait for a core.
  const cpuBase = ratiosTo.length > 0 ? ratiosTo[0] : null;
  const heads = [
    'label',
    'wall s',
    'CPU s',
    'MB/s',
    'lines/s',
    'peak RSS MB',
    'exit',
    ...ratiosTo.map((r) => `× vs ${r}`),
    ...(cpuBase ? [`CPU × vs ${cpuBase}`] : []),
  ];
  out.push(`| ${heads.join(' | ')} |`);
  out.push(`|${'---|'.repeat(heads.length)}`);
  for (const r of rows) {
    const ms = r.samples.map((s) => s.ms);
    const m = med.get(r.label)!;
    const rss = r.samples.map((s) => s.rssKb).filter((x): x is number => x !== null);
    const ratio = ratiosTo.map((b) => (med.has(b) ? (med.get(b)! / m).toFixed(2) : '–'));
    const cpu = cpuMed.get(r.label) ?? null;
    const baseCpu = cpuBase ? (cpuMed.get(cpuBase) ?? null) : null;
    if (cpuBase) ratio.push(cpu !== null && baseCpu !== null && cpu > 0 ? (baseCpu / cpu).toFixed(2) : '–');
    const mb = mbOf(r.input?.file ?? file);
    const rowLines = r.input?.lines ?? lines;
    const seconds = (x: number) => (x / 1000).toFixed(2);
    const cells = [
      r.label,
      `${seconds(m)} (${seconds(Math.min(...ms))}–${seconds(Math.max(...ms))})`,
      cpu === null ? '–' : cpu.toFixed(2),
      (mb / (m / 1000)).toFixed(0),
      Math.round(rowLines / (m / 1000)).toLocaleString('en'),
      rss.length ? (Math.max(...rss) / 1024).toFixed(0) : '–',
      [...new Set(r.samples.map((s) => s.code))].join(','),
      ...ratio,
    ];
    out.push(`| ${cells.join(' | ')} |`);
  }
  return out.join('\n') + '\n';
}

async function main() {
  const report: string[] = [];
  report.push(
    `# subtee benchmark — ${new Date().toISOString()}`,
    '',
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ` +
      `${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}`,
    '',
  );
  if (!existsSync(DEMUX)) report.push(`_demux.mjs baseline skipped: ${DEMUX} is not there._`, '');
  if (!hasJq) report.push('_jq baseline skipped: jq is not installed._', '');

  const inputs: Record<string, { file: string; lines: number }> = {};
  const gen = async (name: string, mb: number, fanout: number, shape: 'large' | 'small', seed: number) => {
    const file = join(work, `${name}.jsonl`);
    const r = await writeStream({ sizeBytes: mb * 1024 * 1024, fanout, shape, seed }, file);
    inputs[name] = { file, lines: r.lines };
  };
  const byShape = wanted('shapes') || wanted('handover');
  if (byShape) await gen('large', sizeMb, 50, 'large', 1);
  if (byShape) await gen('small', sizeMb, 50, 'small', 2);
  if (wanted('fanout') || wanted('projection') || wanted('memory'))
    await gen('large-f2000', sizeMb, 2000, 'large', 3);
  if (wanted('fanout')) await gen('large-f10000', sizeMb, 10_000, 'large', 4);

  const commands = (shape: string): Array<[string, () => string]> => [
    ['cat (floor)', () => 'cat'],
    ['node read (floor)', () => `${node} ${join(ROOT, 'dist/bench/drain.js')}`],
    ...(existsSync(DEMUX)
      ? [['demux.mjs', () => `${node} ${DEMUX} ${fresh('demux')}`] as [string, () => string]]
      : []),
    ...(hasJq
      ? [
          ['jq one-liner (aborts at first bad line)', () => `jq -r '${MAIN_TEXT_JQ}'`] as [
            string,
            () => string,
          ],
          ['jq, tolerant (fromjson?)', () => `jq -rR 'fromjson? | ${MAIN_TEXT_JQ}'`] as [
            string,
            () => string,
          ],
        ]
      : []),
    [
      'split2 + JSON.parse, routing only (not chosen)',
      () => `${node} ${join(ROOT, 'dist/bench/alt-parse.js')} split2`,
    ],
    [
      'stream-json jsonl, routing only (not chosen)',
      () => `${node} ${join(ROOT, 'dist/bench/alt-parse.js')} stream-json`,
    ],
    ...(['bytes', 'parse-all', 'scan-parse', 'scan-view'] as const).map((mode): [string, () => string] => [
      FLOOR_LABELS[mode],
      () => `${node} ${join(ROOT, 'dist/bench/floor.js')} ${mode} ${fresh(`floor-${mode}-${shape}`)}`,
    ]),
    ['subtee parse only', () => `${node} ${join(ROOT, 'dist/bench/parse-only.js')}`],
    ['subtee → files', () => `${node} ${BIN} --out ${fresh(`files-${shape}`)} --stdout none -q`],
    [
      'subtee → files + pino',
      () =>
        `${node} ${BIN} --out ${fresh(`pino-${shape}`)} --stdout none -q ` +
        `--pino=${join(work, 'out', `pino-${shape}.log`)}`,
    ],
  ];

  for (const shape of wanted('shapes') ? ['large', 'small'] : []) {
    const rows: Row[] = commands(shape).map(([label]) => ({ label, samples: [] }));
    for (let i = 0; i < runs; i++) {
      commands(shape).forEach(([, cmd], k) => rows[k].samples.push(measure(cmd(), inputs[shape].file)));
    }
    report.push(
      table(`${shape} lines, 50 subagents`, inputs[shape].file, rows, inputs[shape].lines, [
        'demux.mjs',
        'jq, tolerant (fromjson?)',
        'node read (floor)',
      ]),
    );
  }

  // Many channels, with a low descriptor limit: open files stay bounded by --max-open-files.
  const fanRows: Row[] = [];
  for (const name of wanted('fanout') ? ['large-f2000', 'large-f10000'] : []) {
    const withDemux: Row[] = existsSync(DEMUX)
      ? [{ label: `demux.mjs, ${name}`, samples: [], input: inputs[name] }]
      : [];
    const row: Row = { label: `subtee → files, ${name}, ulimit -n 256`, samples: [], input: inputs[name] };
    // The page over the same output, built afterwards from its files.
    const page: Row = { label: `subtee report of that output, ${name}`, samples: [], input: inputs[name] };
    for (let i = 0; i < runs; i++) {
      const out = fresh('fan');
      row.samples.push(
        measure(
          `bash -c 'ulimit -n 256 && exec ${node} ${BIN} --out ${out} --stdout none -q'`,
          inputs[name].file,
        ),
      );
      page.samples.push(measure(`${node} ${BIN} report ${out}`, '/dev/null'));
      for (const d of withDemux)
        d.samples.push(measure(`${node} ${DEMUX} ${fresh('demux-fan')}`, inputs[name].file));
    }
    fanRows.push(row, page, ...withDemux);
  }
  if (wanted('fanout')) {
    // Claude Code's background subagents: each ends after the main turn's result line.
    const file = join(work, 'background-after-result.jsonl');
    const fanout = quick ? 2000 : 10_000;
    const { lines } = await writeLines(generateBackground(fanout), file);
    const label =
      `subtee → files, ${fanout.toLocaleString('en-US')} background subagents, ending after the result`;
    const row: Row = { label, samples: [], input: { file, lines } };
    const cmd = () => `${node} ${BIN} --out ${fresh('bg')} --stdout none -q`;
    for (let i = 0; i < runs; i++) row.samples.push(measure(cmd(), file));
    fanRows.push(row);
  }
  if (wanted('fanout'))
    report.push(
      table(
        'many subagents (2,000 and 10,000, large lines; background ones ending after the result)',
        inputs['large-f2000'].file,
        fanRows,
        inputs['large-f2000'].lines,
        [],
      ),
    );

  // The library's projection: a program reading the tree, or every message, beside files only.
  const proj = (mode: string) =>
    `${node} ${join(ROOT, 'dist/bench/projection.js')} ${fresh(`proj-${mode}`)} ${mode}`;
  const projRows: Row[] = [
    { label: 'subtee → files (CLI)', samples: [] },
    { label: 'open() → files, no consumer', samples: [] },
    { label: 'open() → files, lifecycle consumer', samples: [] },
    { label: 'open() → files, every message read', samples: [] },
  ];
  const projCommands = [
    () => `${node} ${BIN} --out ${fresh('proj-cli')} --stdout none -q`,
    () => proj('none'),
    () => proj('lifecycle'),
    () => proj('messages'),
  ];
  for (let i = 0; i < (wanted('projection') ? runs : 0); i++) {
    projCommands.forEach((cmd, k) => projRows[k].samples.push(measure(cmd(), inputs['large-f2000'].file)));
  }
  if (wanted('projection'))
    report.push(
      table(
        'library projection, 2,000 subagents, large lines',
        inputs['large-f2000'].file,
        projRows,
        inputs['large-f2000'].lines,
        ['subtee → files (CLI)', 'open() → files, no consumer'],
      ),
    );

  if (bigMb > 0 && wanted('memory')) {
    await gen('big-f2000', bigMb, 2000, 'large', 5);
    const rows: Row[] = [
      { label: `subtee → files, ${sizeMb} MB, 2,000 subagents`, samples: [], input: inputs['large-f2000'] },
      { label: `subtee → files, ${bigMb} MB, 2,000 subagents`, samples: [], input: inputs['big-f2000'] },
      {
        label: `open() → files, lifecycle consumer, ${bigMb} MB, 2,000 subagents`,
        samples: [],
        input: inputs['big-f2000'],
      },
    ];
    for (let i = 0; i < runs; i++) {
      rows[0].samples.push(
        measure(`${node} ${BIN} --out ${fresh('rss1')} --stdout none -q`, inputs['large-f2000'].file),
      );
      rows[1].samples.push(
        measure(`${node} ${BIN} --out ${fresh('rss2')} --stdout none -q`, inputs['big-f2000'].file),
      );
      rows[2].samples.push(measure(proj('lifecycle'), inputs['big-f2000'].file));
    }
    report.push(
      table(
        'peak memory against stream length',
        inputs['big-f2000'].file,
        rows,
        inputs['big-f2000'].lines,
        [],
      ),
    );
  }

  // Millions of one-byte lines that are not JSON: every one is a quarantine record, so the
  // records in flight (not the bytes) are what memory must stay bounded against.
  if (wanted('junk') && junkLines > 0) {
    const file = join(work, 'junk.txt');
    const block = Buffer.from('x\n'.repeat(1 << 20));
    writeFileSync(file, '');
    for (let left = junkLines; left > 0; left -= 1 << 20)
      writeFileSync(file, left >= 1 << 20 ? block : block.subarray(0, 2 * left), { flag: 'a' });
    const input = { file, lines: junkLines };
    const rows: Row[] = [
      {
        label: `subtee → files, ${junkLines.toLocaleString('en')} one-byte junk lines`,
        samples: [],
        input,
      },
      { label: 'cat (floor)', samples: [], input },
    ];
    for (let i = 0; i < runs; i++) {
      rows[0].samples.push(measure(`${node} ${BIN} --out ${fresh('junk')} --stdout none -q`, file));
      rows[1].samples.push(measure('cat', file));
    }
    report.push(table('tiny junk lines (quarantined)', file, rows, junkLines, []));
    rmSync(file, { force: true });
  }

  // Single lines of hundreds of MB and more, generated as they are piped in (never a file).
  if (wanted('huge') && hugeMb.length > 0) {
    const rows: Row[] = [];
    const gen = (mb: number) => `${node} ${join(ROOT, 'dist/bench/huge-line.js')} ${mb}`;
    const lineFile = (mb: number) => ({ file: join(work, `huge-${mb}.size`), lines: 4 });
    for (const mb of hugeMb) {
      // A stand-in file of the stream's size, for the MB/s column (the stream itself is piped).
      writeFileSync(lineFile(mb).file, '');
      spawnSync('truncate', ['-s', String(mb * 1024 * 1024 + 400), lineFile(mb).file]);
      const label = `subtee → files, one ${mb} MB line, default options`;
      rows.push({ label, samples: [], input: lineFile(mb) });
      rows.push({ label: `generator → cat (floor), ${mb} MB`, samples: [], input: lineFile(mb) });
    }
    for (let i = 0; i < runs; i++) {
      hugeMb.forEach((mb, k) => {
        const cmd = `${node} ${BIN} --out ${fresh('huge')} --stdout none -q`;
        rows[2 * k].samples.push(measure(cmd, '', gen(mb)));
        rows[2 * k + 1].samples.push(measure('cat', '', gen(mb)));
      });
    }
    const title = 'one line larger than --max-line-bytes (spooled, routed byte for byte)';
    report.push(table(title, lineFile(hugeMb[0]).file, rows, 4, []));
  }

  if (wanted('handover')) {
    report.push(
      '### handing a parsed line to the main thread',
      '',
      'Main-thread milliseconds for every JSON object line of the two 50-subagent inputs: parsing it ' +
        'there (today), or receiving the object another thread parsed (`v8.deserialize` of what ' +
        '`postMessage` carries, and `structuredClone`); best of 5.',
      '',
      '| input | lines | MB | JSON.parse ms | v8.deserialize ms | structuredClone ms | ' +
        'deserialize × vs parse |',
      '|---|---|---|---|---|---|---|',
    );
    for (const shape of ['large', 'small']) {
      const f = measureHandover(inputs[shape].file);
      const cells = [shape, f.lines.toLocaleString('en'), (f.bytes / 1e6).toFixed(0)];
      cells.push(f.parseMs.toFixed(0), f.deserializeMs.toFixed(0), f.cloneMs.toFixed(0));
      cells.push((f.parseMs / f.deserializeMs).toFixed(2));
      report.push(`| ${cells.join(' | ')} |`);
    }
    report.push('');
  }

  const lat = wanted('latency')
    ? await measureLatency(BIN, { linesPerSecond: 1000, seconds: quick ? 2 : 10, channels: 20 })
    : null;
  if (lat)
    report.push(
      '### live latency',
      '',
      `1,000 lines/s through a pipe into \`subtee --out\`, 20 channels, ${lat.lines} lines: time from ` +
        "the write into subtee's stdin to the line being in its channel's .jsonl file.",
      '',
    );
  if (lat)
    report.push(
      `| p50 ms | p99 ms | max ms | lines not seen |`,
      '|---|---|---|---|',
      `| ${lat.p50.toFixed(2)} | ${lat.p99.toFixed(2)} | ${lat.max.toFixed(2)} | ${lat.lost} |`,
      '',
    );

  if (wanted('state')) {
    // In a process of its own: a full collection needs --expose-gc, which subtee never sets.
    const args = ['--expose-gc', join(ROOT, 'dist/bench/live-state.js'), '--owners', '--out-root', work];
    const r = spawnSync(node, quick ? [...args, '--quick'] : args, { encoding: 'utf8' });
    report.push(
      '### live state per subagent',
      '',
      'Heap the default chain (files, no stdout) holds part way through its input, after a full ' +
        'collection, beyond the heap before it started, divided by the subagents spawned so far: ' +
        "the tree, the cost ledger, the in-flight state, the files sink's per-channel state and the " +
        "chain's own buffers. Small lines; weighed half way and near the end of the same input.",
      '',
      r.status === 0 ? r.stdout : `_failed (exit ${r.status}): ${r.stderr.trim()}_\n`,
    );
  }

  process.stdout.write(report.join('\n') + '\n');
  rmSync(work, { recursive: true, force: true });
  if (overran > 0) process.exitCode = 1;
}

await main();
