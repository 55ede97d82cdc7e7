/**
 * Seeded run folders for `subtee stats`: index.json files shaped like the files sink's (a main
 * channel and 0–12 subagents of a few types and models, statuses, usage, times over 20
 * days), some with the cost fields and some written before index.json had them, spread
 * over nested folders (`fleet/<host>/<day>/run-N/`). Only index.json is written.
 *
 *   node dist/bench/stats-gen.js --runs 10000 --seed 1 --out DIR
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export const AGENTS = ['general-purpose', 'Explore', 'Plan', 'code-reviewer', 'test-runner'] as const;
export const MODELS = ['claude-opus-5-5', 'claude-sonnet-5', 'claude-haiku-5'] as const;

function mulberry32(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface GeneratedRun {
  /** The run folder, relative to the root. */
  rel: string;
  index: Record<string, any>;
}

/** The runs, one at a time (the same ones for the same seed). */
export function* generateRuns(runs: number, seed: number): Generator<GeneratedRun> {
  const rnd = mulberry32(seed);
  const int = (a: number, b: number) => a + Math.floor(rnd() * (b - a + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
  for (let n = 0; n < runs; n++) {
    const start = Date.UTC(2026, 10, 1 + int(0, 19), int(0, 23), int(0, 59), int(0, 59)) + int(0, 999);
    const withCost = rnd() < 0.7;
    const mainModel = pick(MODELS);
    const channels: Record<string, any>[] = [];
    const channel = (id: string | null, i: number): Record<string, any> => {
      const first = start + (id === null ? 0 : int(10, 60_000));
      const last = first + int(0, 900_000);
      const model = id === null ? mainModel : pick(MODELS);
      const status =
        id === null ? 'completed' : pick(['completed', 'completed', 'completed', 'failed', 'running']);
      const untimed = id !== null && rnd() < 0.03;
      const usage: Record<string, number> = { input_tokens: int(10, 50_000), output_tokens: int(1, 8000) };
      if (rnd() < 0.6) usage.cache_read_input_tokens = int(0, 200_000);
      if (rnd() < 0.3) usage.cache_creation_input_tokens = int(0, 20_000);
      const file = id === null ? 'main' : `agents/${id}`;
      const ch: Record<string, any> = {
        id,
        parent: null,
        orphan: false,
        depth: id === null ? 0 : 1,
        agent: id === null ? null : pick(AGENTS),
        description: id === null ? null : `task ${i}`,
        status,
        background: id === null ? null : rnd() < 0.2,
        summary: null,
        log: `${file}.log`,
        jsonl: `${file}.jsonl`,
        lines: int(1, 400),
        counts: { text: int(0, 9), thinking: 0, tool_use: int(0, 9), tool_result: int(0, 9) },
        usage,
        first_seen: untimed ? null : new Date(first).toISOString(),
        last_seen: untimed ? null : new Date(last).toISOString(),
      };
      if (withCost) {
        // Now and then a channel switches models: it counts under the first.
        ch.models = rnd() < 0.1 ? [model, pick(MODELS.filter((m) => m !== model))] : [model];
        const priced = rnd() < 0.95;
        const usd = priced ? Math.round(rnd() * 2_000_000) / 1e6 : null;
        ch.cost = { usd, subtree_usd: usd };
      }
      return ch;
    };
    channels.push(channel(null, 0));
    const subagents = int(0, 12);
    for (let i = 1; i <= subagents; i++) channels.push(channel(`toolu_${seed}_${n}_${i}`, i));
    const index: Record<string, any> = {
      format: 'subtee-index/1',
      session_id: `session-${seed}-${n}`,
      claude_code_version: '2.1.328',
      producer: 'claude',
      interrupted: false,
      stalled: false,
      stall: null,
      input: { lines: 100, bytes: 10_000, quarantined: 0, blank_lines: 0, failed: 0 },
      quarantine: null,
      quarantine_lines: [],
      quarantine_lines_omitted: 0,
      warnings: [],
      channels,
    };
    if (withCost)
      index.cost = {
        usd: channels.reduce((s, c) => s + (c.cost.usd ?? 0), 0),
        basis: 'table',
        prices_date: '2026-11-01',
        output_tokens: 'estimated',
      };
    yield { rel: join(`host-${n % 7}`, new Date(start).toISOString().slice(0, 10), `run-${n}`), index };
  }
}

/** Writes the runs' index.json files under root. */
export function writeRuns(root: string, runs: number, seed: number): void {
  for (const { rel, index } of generateRuns(runs, seed)) {
    const dir = join(root, rel);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'index.json'), `${JSON.stringify(index, null, 2)}\n`);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const arg = (name: string, def: string) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? process.argv[i + 1] : def;
  };
  writeRuns(arg('out', 'stats-runs'), Number(arg('runs', '1000')), Number(arg('seed', '1')));
}
