import { fstatSync } from 'node:fs';
import type { Writable } from 'node:stream';
import type { ChainSpec } from '../chain/chain.js';
import type { RunView } from '../model/run-model.js';
import { statusLine } from '../views/summary.js';

/** How often the status line is redrawn. */
const STATUS_LINE_MS = 250;

/** Whether two descriptors are one terminal (`claude … | subtee` on a shell: 1 and 2). */
export function sameTerminal(fdA: number, fdB: number): boolean {
  try {
    const a = fstatSync(fdA);
    const b = fstatSync(fdB);
    return a.isCharacterDevice() && b.isCharacterDevice() && a.rdev === b.rdev;
  } catch {
    return false;
  }
}

/** Whether a chain writes to stdout: the stdout sink in a mode that shows something, or `--pino -`. */
export function writesStdout(spec: ChainSpec): boolean {
  return spec.sinks.some(
    (c) =>
      (c.use === 'stdout' && c.mode !== 'none') ||
      (c.use === 'pino' && (c.destination ?? '-') === '-' && c.transport === undefined),
  );
}

/**
 * The status line is drawn on a terminal's stderr unless stdout writes text to that same
 * terminal: two writers on one screen line would glue stdout's text to the status line's end.
 */
export function statusLineWanted(spec: ChainSpec, stdoutFd: number | undefined, stderrFd: number): boolean {
  return stdoutFd === undefined || !writesStdout(spec) || !sameTerminal(stdoutFd, stderrFd);
}

/**
 * A line cut to a terminal `columns` wide, one column short of it: text that reaches the last
 * column wraps on some terminals, and `\r` would then go back to the wrong row. Unknown width
 * (0 or undefined): the line as it is.
 */
export function fitToWidth(text: string, columns: number | undefined): string {
  if (columns === undefined || columns < 2) return text;
  const chars = [...text];
  return chars.length < columns ? text : `${chars.slice(0, columns - 2).join('')}…`;
}

/**
 * The one-line progress on a terminal's stderr: drawn at once, redrawn in place, fitted to the
 * terminal's width at every draw, cleared before a warning is written and when the run ends,
 * so it never mixes with other output.
 */
export function startStatusLine(run: RunView, stderr: Writable & { columns?: number }) {
  let shown = false;
  let lastLines = run.input.lines;
  let last = performance.now();
  const draw = (rate: number) => {
    stderr.write(`\r\x1b[2K${fitToWidth(statusLine(run, rate), stderr.columns)}`);
    shown = true;
  };
  draw(0);
  const timer = setInterval(() => {
    const now = performance.now();
    const rate = ((run.input.lines - lastLines) * 1000) / Math.max(1, now - last);
    lastLines = run.input.lines;
    last = now;
    draw(rate);
  }, STATUS_LINE_MS);
  timer.unref();
  const clear = () => {
    if (shown) stderr.write('\r\x1b[2K');
    shown = false;
  };
  return { clear, stop: () => (clearInterval(timer), clear()) };
}
