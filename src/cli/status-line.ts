import type { Writable } from 'node:stream';
import type { RunView } from '../model/run-model.js';
import { statusLine } from '../views/summary.js';

/** How often the status line is redrawn. */
const STATUS_LINE_MS = 250;

/**
 * The one-line progress on a terminal's stderr: redrawn in place, cleared before a warning is
 * written and when the run ends, so it never mixes with other output.
 */
export function startStatusLine(run: RunView, stderr: Writable) {
  let shown = false;
  let lastLines = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const rate = ((run.input.lines - lastLines) * 1000) / Math.max(1, now - last);
    lastLines = run.input.lines;
    last = now;
    stderr.write(`\r\x1b[2K${statusLine(run, rate)}`);
    shown = true;
  }, STATUS_LINE_MS);
  timer.unref();
  const clear = () => {
    if (shown) stderr.write('\r\x1b[2K');
    shown = false;
  };
  return { clear, stop: () => (clearInterval(timer), clear()) };
}
