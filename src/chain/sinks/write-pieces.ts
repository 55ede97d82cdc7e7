import { writeAllSync } from '../../safe-open.js';

/** Characters gathered before one write: large enough for few calls, small beside the document. */
const WRITE_CHARS = 64 * 1024;

/**
 * Writes text handed over in pieces (`jsonPieces`), then `tail`, to a descriptor, a bounded
 * run of characters at a time, so the whole text is never one string nor one buffer.
 */
export function writePiecesSync(fd: number, pieces: Iterable<string>, tail = ''): void {
  let held = '';
  // One buffer for every write (UTF-8 takes at most 3 bytes per UTF-16 unit): a fresh one per
  // write left a 10 MB index.json as 10 MB of dead buffers until the next collection.
  const scratch = Buffer.allocUnsafe(3 * WRITE_CHARS);
  const put = (text: string) =>
    writeAllSync(
      fd,
      text.length * 3 <= scratch.length
        ? scratch.subarray(0, scratch.write(text, 'utf8'))
        : Buffer.from(text, 'utf8'),
    );
  for (const piece of pieces) {
    held += piece;
    if (held.length >= WRITE_CHARS) {
      put(held);
      held = '';
    }
  }
  held += tail;
  if (held.length > 0) put(held);
}
