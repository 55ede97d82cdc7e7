import type { Writable } from 'node:stream';

/**
 * After a signal, how long a reader may take nothing of what subtee has written for it (a
 * pager left open: `… | subtee | less`) before subtee lets go of that output.
 */
export const STUCK_OUTPUT_MS = 2000;

/**
 * Watches an output from now on: when its reader has taken nothing for `ms` while writes wait
 * for it, the output is let go (destroyed: its writers see it close, as when a reader goes
 * away, and stop writing to it), so the run ends without it. `letGo` does it at once.
 */
export function letGoWhenStuck(stream: Writable, ms = STUCK_OUTPUT_MS) {
  let gone = false;
  let took = false;
  let waiting = stream.writableLength;
  const onDrain = () => (took = true);
  const letGo = () => {
    end();
    if (gone || stream.writableLength === 0) return;
    gone = true;
    stream.destroy();
  };
  const timer = setInterval(() => {
    const stuck = stream.writableLength > 0 && !took && stream.writableLength >= waiting;
    took = false;
    waiting = stream.writableLength;
    if (stuck) letGo();
  }, ms);
  timer.unref();
  stream.on('drain', onDrain);
  const end = () => {
    clearInterval(timer);
    stream.off('drain', onDrain);
  };
  return { letGo, end };
}

/** Resolves once the stream holds nothing more to write, or after `ms`. */
export function drainedWithin(stream: Writable, ms = STUCK_OUTPUT_MS): Promise<void> {
  if (stream.writableLength === 0) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      stream.off('drain', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    stream.on('drain', done);
  });
}
