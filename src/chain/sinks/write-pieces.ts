import { writeAllSync } from '../../safe-open.js';

/** Characters gathered before one write: large enough for few calls, small beside the document. */
const WRITE_CHARS = 64 * 1024;

/**
 * Writes text handed over in pieces (`jsonPieces`), then `tail`, to a descriptor, a bounded
 * run of characters at a time, so the whole text is never one string nor one buffer.
 */
export function writePiecesSync(fd: number, pieces: Iterable<string>, tail = ''): void {
  let held = '';
  const put = (text: string) => writeAllSync(fd, Buffer.from(text, 'utf8'));
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
