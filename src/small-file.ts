import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import { systemReason } from './errors.js';

/** Why a small file was not read: one phrase, for the error line of the option that named it. */
export class SmallFileRefused extends Error {}

/** How long a read of a named pipe whose writer has not written yet waits before it tries again. */
const FIFO_POLL_MS = 5;
const PAUSE = new Int32Array(new SharedArrayBuffer(4));

/** Why a file is not read as a small file, or null for a regular file or a named pipe. */
function notReadable(st: Stats): string | null {
  if (st.isFile() || st.isFIFO()) return null;
  if (st.isDirectory()) return 'a folder, not a file';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device, not a file';
  return 'not a regular file';
}

/**
 * The text of a file an option names (a config, a price table), at most `maxBytes`, a UTF-8
 * byte order mark left out (editors on Windows write one). A device (`/dev/zero`) or a
 * folder is refused without a read; a file or a pipe (`<(yes)`) longer than `maxBytes` once
 * it passes it, saying it is not `what`. A named pipe is opened without blocking (a blocking
 * open waits for a writer in a thread no signal reaches): with no writer it is refused; once
 * a writer is there (`--config <(make-config)`), its data is waited for. Throws
 * SmallFileRefused with the reason.
 */
export function readSmallText(path: string, maxBytes: number, what: string): string {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    throw new SmallFileRefused(systemReason(err), { cause: err });
  }
  try {
    const st = fstatSync(fd);
    const why = notReadable(st);
    if (why !== null) throw new SmallFileRefused(why);
    const buf = Buffer.alloc(maxBytes + 1);
    let size = 0;
    while (size <= maxBytes) {
      let n: number;
      try {
        n = readSync(fd, buf, size, buf.length - size, null);
      } catch (err) {
        if (!st.isFIFO() || (err as NodeJS.ErrnoException).code !== 'EAGAIN')
          throw new SmallFileRefused(systemReason(err), { cause: err });
        // A writer is there and has not written yet: its data is waited for on this descriptor.
        // (Opening the pipe again to block would wait for ever for a writer that wrote and left
        // in between.)
        Atomics.wait(PAUSE, 0, 0, FIFO_POLL_MS);
        continue;
      }
      if (n === 0) break;
      size += n;
    }
    if (size > maxBytes) throw new SmallFileRefused(`larger than ${maxBytes} bytes, not ${what}`);
    if (size === 0 && st.isFIFO()) throw new SmallFileRefused('a named pipe with nothing written to it');
    const text = buf.subarray(0, size).toString('utf8');
    return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  } finally {
    closeSync(fd);
  }
}
