import type { Writable } from 'node:stream';
import { UsageError } from '../errors.js';
import { reportLine, writeReport } from '../views/report/build.js';
import { channelReaderFor } from '../chain/stages/input-format.js';
import { REPORT_DEFAULTS } from '../views/report/model.js';
import { helpText, parseArgs, type OptionDef } from './options.js';

export const REPORT_USAGE = `subtee report [options] OUT

Writes OUT/report.html, one self-contained page, from a subtee output folder (index.json and the .jsonl files):
  subtee report logs && xdg-open logs/report.html`;

export const REPORT_OPTIONS: readonly OptionDef[] = Object.freeze([
  {
    name: 'max-page-bytes',
    type: 'number',
    arg: 'N',
    default: REPORT_DEFAULTS.maxPageBytes,
    min: 256 * 1024,
    help: 'largest page; transcripts are cut (with a pointer to their .log file) to stay under it',
  },
  { name: 'quiet', alias: 'q', type: 'boolean', default: false, help: 'no line about the written report' },
  { name: 'help', alias: 'h', type: 'boolean', default: false, help: 'show this help' },
]);

/** `subtee report OUT`. Throws SubteeErrors (bad usage, unreadable folder, failed write). */
export function reportCommand(argv: string[], stdout: Writable, stderr: Writable): number {
  const o = parseArgs(argv, REPORT_OPTIONS);
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
  const r = writeReport(o._[0], {
    maxPageBytes: given === undefined ? REPORT_DEFAULTS.maxPageBytes : Number(given),
    channelReader: channelReaderFor,
  });
  if (!o.quiet) stderr.write(reportLine(r));
  return 0;
}
