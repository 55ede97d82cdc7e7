import { writeAllSync } from '../../safe-open.js';

/** Characters gathered before one write: large enough for few calls, small beside the document. */
const WRITE_CHARS = 64 * 1024;

/** Encodes as `Buffer.from` does: whole characters, a lone surrogate as U+FFFD. */
const ENCODER = new TextEncoder();

/**
 * Writes text handed over in pieces (`jsonPieces`), then `tail`, to a descriptor, a bounded
 * run of characters at a time, so the whole text is never one string nor one buffer. Returns
 * the bytes written.
 */
export function writePiecesSync(fd: number, pieces: Iterable<string>, tail = ''): number {
  let held = '';
  let total = 0;
  const scratch = Buffer.allocUnsafe(3 * WRITE_CHARS);
  // One buffer for every write, the text encoded into it a bufferful at a time: a fresh
  // buffer per write left a 10 MB index.json as 10 MB of dead buffers until a collection.
  const put = (text: string) => {
    let rest = text;
    while (rest.length > 0) {
      const { read, written } = ENCODER.encodeInto(rest, scratch);
      writeAllSync(fd, scratch.subarray(0, written));
      total += written;
      rest = rest.slice(read);
    }
  };
  for (const piece of pieces) {
    held += piece;
    if (held.length >= WRITE_CHARS) {
      put(held);
      held = '';
    }
  }
  held += tail;
  if (held.length > 0) put(held);
  return total;
}
