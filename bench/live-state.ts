/**
 * What a run keeps per subagent while it runs: the heap the default chain (files, no stdout)
 * holds part way through its input (its session, tree, cost ledger, in-flight state, the
 * files sink's per-channel state, and the chain's own buffers), after a full garbage
 * collection, beside the heap before it started, divided by the subagents spawned so far.
 * Taken at half the input and again near its end, with the same subagents alive: state that
 * grew with the input would show as a difference between the two.
 *
 *   node --expose-gc dist/bench/live-state.js [--quick] [--owners] [--out-root DIR]
 *
 * Prints one Markdown table on stdout; with `--owners`, a second one: where the most
 * subagents' bytes are at the last weighing, by owner, from heap snapshots (see heap-owners).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { writeHeapSnapshot } from 'node:v8';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { parseArgs } from 'node:util';
import { defaultSpec, runChain } from '../src/chain/chain.js';
import { Session } from '../src/model/session.js';
import { writeStream } from './gen.js';
import { newBytesByOwner, snapshotIds } from './heap-owners.js';

export interface LiveState {
  fanout: number;
  inputMb: number;
  /** How far into the input (0..1) the heap was weighed. */
  at: number;
  lines: number;
  /** Subagents spawned by then (the tree's channels but main). */
  subagents: number;
  /** Heap held then beyond the heap before the run, after a full collection. */
  heldBytes: number;
  /** With `owners`, at the last weighing: the bytes of the objects made since the run began, by owner. */
  owners?: { total: number; owners: Map<string, number> };
}

const collect = (): number => {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with node --expose-gc');
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

/** Resolves once the chain has taken every byte written so far and its sinks have written them. */
async function settled(run: Session, bytes: number): Promise<void> {
  while (run.input.bytes < bytes) await new Promise((resolve) => setImmediate(resolve));
  for (let k = 0; k < 3; k++) await new Promise((resolve) => setImmediate(resolve));
}

/** Runs the CLI's chain over a generated input and weighs it at each fraction of `stops`. */
export async function measureLiveState(
  work: string,
  fanout: number,
  inputMb: number,
  seed: number,
  stops: number[],
  owners = false,
): Promise<LiveState[]> {
  const file = join(work, `state-${fanout}-${inputMb}.jsonl`);
  await writeStream({ sizeBytes: inputMb * 1024 * 1024, fanout, shape: 'small', seed }, file);
  const data = readFileSync(file);
  rmSync(file, { force: true });
  const out = join(work, `state-out-${fanout}-${inputMb}`);
  const before = collect();
  // Written, not read, until the weighing is over: the ids it holds would be weighed too.
  const snapshotBefore = owners ? writeHeapSnapshot(join(work, 'before.heapsnapshot')) : null;
  const run = new Session();
  const input = new PassThrough();
  const done = runChain(input, defaultSpec(out, 'none'), { session: run });
  const rows: LiveState[] = [];
  let from = 0;
  for (const at of stops) {
    const cut = data.indexOf(0x0a, Math.floor(data.length * at)) + 1;
    input.write(data.subarray(from, cut));
    from = cut;
    await settled(run, cut);
    const held = collect() - before;
    const lines = data.subarray(0, cut).reduce((n, byte) => (byte === 0x0a ? n + 1 : n), 0);
    rows.push({ fanout, inputMb, at, lines, subagents: run.tree.size - 1, heldBytes: held });
  }
  if (snapshotBefore !== null) {
    const snapshotAfter = writeHeapSnapshot(join(work, 'after.heapsnapshot'));
    rows[rows.length - 1].owners = newBytesByOwner(snapshotAfter, snapshotIds(snapshotBefore));
    rmSync(snapshotBefore);
    rmSync(snapshotAfter);
  }
  input.end(data.subarray(from));
  await done;
  rmSync(out, { recursive: true, force: true });
  return rows;
}

/** Where the bytes of the run with owners went, per subagent, largest first. */
export function ownersTable(row: LiveState): string {
  const { total, owners } = row.owners!;
  const perSubagent = (bytes: number) => Math.round(bytes / row.subagents).toLocaleString('en');
  const out = [
    `Objects made since the run began and alive at ${Math.round(row.at * 100)}% of the input, ` +
      `${row.subagents.toLocaleString('en')} subagents, by the structure that holds them ` +
      '(the nearest on the shortest path from the heap\'s roots):',
    '',
    '| held by | bytes per subagent | share |',
    '|---|---|---|',
  ];
  for (const [owner, bytes] of [...owners].sort((a, b) => b[1] - a[1]))
    out.push(`| ${owner} | ${perSubagent(bytes)} | ${((100 * bytes) / total).toFixed(1)}% |`);
  out.push(`| all | ${perSubagent(total)} | 100.0% |`);
  return out.join('\n') + '\n';
}

export function liveStateTable(rows: LiveState[]): string {
  const out = [
    '| subagents | input MB | weighed at | lines read | heap held by the run, MB | bytes per subagent |',
    '|---|---|---|---|---|---|',
  ];
  for (const r of rows) {
    const cells = [
      r.subagents.toLocaleString('en'),
      String(r.inputMb),
      `${Math.round(r.at * 100)}%`,
      r.lines.toLocaleString('en'),
      (r.heldBytes / 2 ** 20).toFixed(1),
      Math.round(r.heldBytes / r.subagents).toLocaleString('en'),
    ];
    out.push(`| ${cells.join(' | ')} |`);
  }
  out.push('', ...addedSubagentLines(rows));
  return out.join('\n') + '\n';
}

/**
 * What each subagent adds, without the chain's fixed buffers: between the runs of the fewest
 * and the most subagents, weighed at the same point of their inputs, the heap's difference over
 * the subagents' (none with a single fan-out).
 */
export function addedSubagentLines(rows: LiveState[]): string[] {
  const lines: string[] = [];
  for (const at of new Set(rows.map((r) => r.at))) {
    const same = rows.filter((r) => r.at === at).sort((a, b) => a.subagents - b.subagents);
    const [few, many] = [same[0], same[same.length - 1]];
    if (same.length < 2 || many.subagents === few.subagents) continue;
    const bytes = (many.heldBytes - few.heldBytes) / (many.subagents - few.subagents);
    lines.push(
      `Weighed at ${Math.round(at * 100)}%, each subagent from ${few.subagents.toLocaleString('en')} ` +
        `to ${many.subagents.toLocaleString('en')} added ${Math.round(bytes).toLocaleString('en')} bytes.`,
    );
  }
  return lines.length > 0 ? [...lines, ''] : [];
}

if (process.argv[1]?.endsWith('live-state.js')) {
  const { values } = parseArgs({
    options: { quick: { type: 'boolean' }, owners: { type: 'boolean' }, 'out-root': { type: 'string' } },
  });
  const work = mkdtempSync(join(values['out-root'] ?? tmpdir(), 'subtee-state-'));
  try {
    const plan: Array<[number, number]> = values.quick
      ? [[200, 4]]
      : [
          [2000, 100],
          [10_000, 100],
        ];
    const rows: LiveState[] = [];
    for (const [k, [fanout, mb]] of plan.entries()) {
      const owners = values.owners === true && k === plan.length - 1;
      rows.push(...(await measureLiveState(work, fanout, mb, 11 + k, [0.5, 0.95], owners)));
    }
    process.stdout.write(liveStateTable(rows));
    const weighed = rows.at(-1)!;
    if (weighed.owners) process.stdout.write(ownersTable(weighed));
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
