import type { Writable } from 'node:stream';
import { lstatSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { EXIT, SubteeError, UsageError } from '../errors.js';
import { writeIndexPage, writeReport } from '../chain/sinks/report-file.js';
import { channelReaderFor, runReaderFor } from '../chain/stages/input-format.js';
import { escapeOneLine } from '../views/escape.js';
import { counted } from '../views/summary.js';
import { reportLine, type ReportBuildOptions } from '../views/report/build.js';
import { indexPageRow, type IndexPageRow } from '../views/report/index-page.js';
import { readRunIndex, runFolders } from './run-folders.js';
import { REPORT_DEFAULTS } from '../views/report/model.js';
import { helpText, parseArgs, type OptionDef } from './options.js';

export const REPORT_USAGE = `subtee report [options] OUT

Writes OUT/report.html, one self-contained page, from a subtee output folder (index.json and
the .jsonl files):
  subtee report logs && xdg-open logs/report.html
Given a folder of output folders (no index.json of its own), writes each run's report.html and
DIR/index.html, one row per run linking to its page:
  subtee report fleet-logs && xdg-open fleet-logs/index.html`;

export const REPORT_OPTIONS: readonly OptionDef[] = Object.freeze([
  {
    name: 'max-page-bytes',
    type: 'number',
    arg: 'N',
    default: REPORT_DEFAULTS.maxPageBytes,
    min: 256 * 1024,
    help:
      'largest page; transcripts (with a pointer to their .log file), then long fields, ' +
      'then the deepest agents are cut to stay under it',
  },
  { name: 'quiet', alias: 'q', type: 'boolean', default: false, help: 'no line about the written report' },
  { name: 'help', alias: 'h', type: 'boolean', default: false, help: 'show this help' },
]);

/** `subtee report OUT`. Throws SubteeErrors (bad usage, unreadable folder, failed write). */
export function reportCommand(argv: string[], stdout: Writable, stderr: Writable): number {
  const o = parseArgs(argv, REPORT_OPTIONS, 'subtee report');
  if (o.help) {
    stdout.write(helpText(REPORT_USAGE, REPORT_OPTIONS));
    return 0;
  }
  if (o._.length !== 1 || o.rest.length > 0)
    throw new UsageError(
      'ERR_USAGE',
      `subtee report needs one output folder: ${REPORT_USAGE.split('\n')[0]}`,
    );
  const given = o['max-page-bytes'];
  const maxPageBytes = given === undefined ? REPORT_DEFAULTS.maxPageBytes : Number(given);
  const out = o._[0];
  if (isOtherThanFolder(out))
    throw new SubteeError('ERR_INPUT', `cannot read ${out}: it is a file, not an output folder`, {
      exitCode: EXIT.IO,
    });
  if (!isRunFolder(out) && isFolder(out)) return indexReport(out, maxPageBytes, o.quiet === true, stderr);
  const written = writeReport(out, reportOptions(maxPageBytes));
  if (!o.quiet) stderr.write(reportLine(written));
  return 0;
}

/** The page's build: its size and how channels' files are read. */
function reportOptions(maxPageBytes: number): ReportBuildOptions {
  return { maxPageBytes, channelReader: channelReaderFor, runReader: runReaderFor };
}

function isRunFolder(dir: string): boolean {
  try {
    lstatSync(join(dir, 'index.json'));
    return true;
  } catch {
    return false;
  }
}

/** Something that is there but not a folder (a recording given for its output folder). */
function isOtherThanFolder(path: string): boolean {
  try {
    return !statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function isFolder(dir: string): boolean {
  try {
    return statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

/**
 * A folder of run folders: each run's report page, then ROOT/index.html over them. A run
 * whose index.json cannot be read, or whose page cannot be built, is a row saying so (and a
 * line on stderr), never the end of the command.
 */
function indexReport(root: string, maxPageBytes: number, quiet: boolean, stderr: Writable): number {
  const rows: IndexPageRow[] = [];
  const unreadable = (dir: string, why: string) =>
    stderr.write(`subtee: skipped ${escapeOneLine(dir)}: folder not read: ${why}\n`);
  for (const dir of runFolders([root], unreadable)) {
    const rel = relative(root, dir).split(sep).join('/');
    const read = readRunIndex(dir);
    if ('why' in read) {
      stderr.write(`subtee: skipped ${escapeOneLine(join(dir, 'index.json'))}: ${read.why}\n`);
      const row = indexPageRow(rel, null, null);
      row.problem = `index.json ${read.why}`;
      rows.push(row);
      continue;
    }
    let problem: string | null = null;
    try {
      writeReport(dir, reportOptions(maxPageBytes));
    } catch (err) {
      if (!(err instanceof SubteeError)) throw err;
      problem = err.message;
      const why = `${escapeOneLine(err.message)} [${err.code}]`;
      stderr.write(`subtee: no report for ${escapeOneLine(dir)}: ${why}\n`);
    }
    const row = indexPageRow(rel, problem === null ? `${rel}/report.html` : null, read.index);
    if (problem !== null) row.problem = problem;
    rows.push(row);
  }
  if (rows.length === 0)
    throw new SubteeError(
      'ERR_INPUT',
      `cannot read ${root}: no index.json in it or its subfolders (is it a subtee output folder?)`,
      { exitCode: EXIT.IO },
    );
  const path = writeIndexPage(root, rows);
  if (!quiet) stderr.write(`subtee: wrote ${escapeOneLine(path)}: ${counted(rows.length, 'run')}\n`);
  return 0;
}
