import { realpathSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { clickhouseStats } from '../chain/stats-clickhouse.js';
import { EXIT, SubteeError, UsageError } from '../errors.js';
import { escapeOneLine, terminalSafeJson } from '../views/escape.js';
import {
  statsCsv,
  StatsAggregator,
  statsRunOf,
  statsSkipReason,
  statsText,
  STATS_GROUPINGS,
  type StatsGrouping,
  type StatsReport,
} from '../views/stats.js';
import { helpText, parseArgs, STATS_OPTIONS } from './options.js';
import { readRunIndex, runFolders, type SkippedRun } from './run-folders.js';

const STATS_USAGE = `subtee stats [options] DIR…
subtee stats [options] --clickhouse URL

Figures over many runs: every run folder (a folder holding index.json) under the DIRs, or the
ClickHouse sink's tables. A table per agent type and per model (runs, agents, failed %, tokens,
cost, elapsed p50/p95), then the costliest and the failed subagents with their transcripts:
  subtee stats logs/ --since 2026-11-01 --by day`;

const STATS_EXIT_CODES_HELP = `Exit codes: 0 ok (unreadable index.json files are named on stderr
  and skipped), 1 internal error, 2 bad usage, 3 a DIR cannot be read or ClickHouse cannot be
  queried.`;

interface FolderStatsOptions {
  by?: readonly StatsGrouping[];
  sinceMs?: number | null;
  since?: string | null;
  top?: number;
  /** Called for each run folder skipped, as it is found. */
  onSkipped?: (s: SkippedRun) => void;
  /** Called for a folder left out as the same run as one counted (`as`), by its run id. */
  onDuplicate?: (s: { path: string; as: string }) => void;
  /** Called for a run counted with figures refused as implausible: how many, and the first. */
  onRefused?: (s: { path: string; refused: number; first: string }) => void;
}

/**
 * The figures over every run folder under the roots, reading one index.json at a time:
 * memory holds one document, a few numbers per group and the elapsed samples.
 */
function folderStats(roots: readonly string[], options: FolderStatsOptions = {}): StatsReport {
  const { by, sinceMs, top, onSkipped, onDuplicate, onRefused } = options;
  const stats = new StatsAggregator({ by, sinceMs, top, joinPath: join });
  const unreadable = (dir: string, why: string) => onSkipped?.({ path: dir, why: `folder not read: ${why}` });
  // A run is counted once however it is named (`runs runs/r1 ./runs/r1/`, a link to it): by
  // its folder's real path, and by its run id where one recording was processed twice.
  const seenPaths = new Set<string>();
  const seenRuns = new Map<string, string>();
  for (const dir of runFolders(roots, unreadable)) {
    let real: string;
    try {
      real = realpathSync(dir);
    } catch {
      real = resolve(dir);
    }
    if (seenPaths.has(real)) continue;
    seenPaths.add(real);
    const read = readRunIndex(dir);
    const run = 'index' in read ? statsRunOf(dir, read.index) : null;
    if (run === null) {
      stats.skipped++;
      const why = 'why' in read ? read.why : (statsSkipReason(read.index) ?? 'not a subtee index.json');
      onSkipped?.({ path: join(dir, 'index.json'), why });
      continue;
    }
    if (run.runId !== null) {
      const first = seenRuns.get(run.runId);
      if (first !== undefined) {
        onDuplicate?.({ path: dir, as: first });
        continue;
      }
      seenRuns.set(run.runId, dir);
    }
    if (stats.addRun(run) && run.refused > 0)
      onRefused?.({ path: join(dir, 'index.json'), refused: run.refused, first: run.firstRefused ?? '' });
  }
  return stats.report(options.since ?? null);
}

/**
 * `--since DATE`: a day or a time, in UTC unless the time states an offset; ms since the epoch.
 * (Date.parse reads a time without an offset as local time, so `Z` is added to one.)
 */
function parseSince(text: string): number {
  const shape = /^\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/;
  const found = shape.exec(text);
  let ms = NaN;
  if (found) {
    const iso = text.replace(' ', 'T');
    ms = Date.parse(iso.length > 10 && found[1] === undefined ? `${iso}Z` : iso);
    // Date.parse rolls a day a month lacks over (2026-02-30 is March 2): such a day is refused.
    const day = text.slice(0, 10);
    const dayMs = Date.parse(`${day}T00:00:00Z`);
    if (Number.isNaN(dayMs) || new Date(dayMs).toISOString().slice(0, 10) !== day) ms = NaN;
  }
  if (!Number.isFinite(ms))
    throw new UsageError(
      'ERR_BAD_OPTION',
      `--since must be a date (2026-11-30) or a time (2026-11-30T12:00:00Z), not "${text}"`,
    );
  return ms;
}

/** `subtee stats`. Throws SubteeErrors (bad usage, an unreadable DIR, ClickHouse unreachable). */
export async function statsCommand(argv: string[], stdout: Writable, stderr: Writable): Promise<number> {
  const args = parseArgs(argv, STATS_OPTIONS, 'subtee stats');
  if (args.help) {
    stdout.write(`${helpText(STATS_USAGE, STATS_OPTIONS)}\n${STATS_EXIT_CODES_HELP}\n`);
    return EXIT.OK;
  }
  if (args.json && args.csv) throw new UsageError('ERR_USAGE', 'subtee stats: --json or --csv, not both');
  const url = typeof args.clickhouse === 'string' ? args.clickhouse : null;
  if (args.rest.length > 0 || (url === null) === (args._.length === 0))
    throw new UsageError(
      'ERR_USAGE',
      url === null
        ? 'subtee stats needs folders of runs: subtee stats [options] DIR… (or --clickhouse URL)'
        : 'subtee stats reads folders or --clickhouse, not both',
    );
  if (args.given.has('clickhouse-channels-table') && url === null)
    throw new UsageError('ERR_USAGE', '--clickhouse-channels-table needs --clickhouse URL');
  const since = typeof args.since === 'string' ? args.since : null;
  const sinceMs = since === null ? null : parseSince(since);
  const by: readonly StatsGrouping[] =
    typeof args.by === 'string' ? [args.by as StatsGrouping] : STATS_GROUPINGS.filter((g) => g !== 'day');
  const top = Number(args.top);

  let report: StatsReport;
  const table = args['clickhouse-channels-table'];
  if (url !== null) {
    report = await clickhouseStats({
      url,
      channelsTable: typeof table === 'string' ? table : undefined,
      by,
      since,
      sinceMs,
      top,
    });
  } else {
    for (const dir of args._) {
      let isDir = false;
      try {
        isDir = statSync(dir).isDirectory();
      } catch {
        // reported below
      }
      if (!isDir)
        throw new SubteeError('ERR_INPUT', `cannot read ${dir}: not a folder`, { exitCode: EXIT.IO });
    }
    report = folderStats(args._, {
      by,
      since,
      sinceMs,
      top,
      onSkipped: (s) => stderr.write(`subtee: skipped ${escapeOneLine(s.path)}: ${s.why}\n`),
      onDuplicate: (s) =>
        stderr.write(
          `subtee: not counted ${escapeOneLine(s.path)}: the same run (run_id) as ${escapeOneLine(s.as)}\n`,
        ),
      onRefused: (s) =>
        stderr.write(
          `subtee: ${escapeOneLine(s.path)}: ${s.refused} implausible figure${s.refused === 1 ? '' : 's'} ` +
            `counted as none (${s.first}; a count or dollar amount is a number from 0 to 2^53 − 1, ` +
            'a token count a whole one)\n',
        ),
    });
  }
  if (args.json) stdout.write(`${terminalSafeJson(JSON.stringify(report, null, 2))}\n`);
  else if (args.csv) stdout.write(statsCsv(report));
  else stdout.write(statsText(report));
  if (report.skipped > 0) {
    const folders = `${report.skipped} run folder${report.skipped === 1 ? '' : 's'}`;
    stderr.write(`subtee: ${folders} skipped (index.json unreadable or of no channel)\n`);
  }
  return EXIT.OK;
}
