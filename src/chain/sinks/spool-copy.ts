import type { Spool } from '../../model/record.js';
import type { AppendFile, AppendFiles } from './append-files.js';

/**
 * Appends a spooled line to a file after what is queued for it, a piece at a time: each
 * piece is written before the next is read into the same buffer, so a line of any length
 * costs one buffer of memory.
 */
export function appendSpool(files: AppendFiles, f: AppendFile, spool: Spool): void {
  files.flush();
  spool.copy((piece) => {
    files.write(f, piece);
    files.flush();
  });
}
