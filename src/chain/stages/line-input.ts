/** What both line parsers (one thread or several) do alike with the lines they cannot route. */
import type { SubteeRecord } from '../../model/record.js';
import type { Session } from '../../model/session.js';

/** A run of junk lines as one quarantine record (see LineSplitter's `junkRun`), frozen. */
export function junkRunRecord(raw: Buffer, lineNo: number, lines: number): SubteeRecord {
  return Object.freeze({ kind: 'quarantine', lineNo, raw, reason: 'not-object', final: true, lines });
}

/** At the end of the input: a warning when no line at all was a JSON object. */
export function warnIfAllQuarantined(run: Session): void {
  const { lines, quarantined } = run.input;
  if (lines > 0 && quarantined === lines) {
    const what = `none of the ${lines} input lines is a JSON object, all are in the quarantine file`;
    run.warn('INPUT_QUARANTINED', `${what}: is this Claude Code's --output-format stream-json output?`);
  }
}
