import { closeSync, ftruncateSync, renameSync, writeSync } from 'node:fs';
import { createNewFile } from '../../safe-open.js';
import { writePiecesSync } from './write-pieces.js';

/** The reserve grows in steps of this many bytes: few writes, little left over. */
const STEP_BYTES = 16 * 1024;
const BLANKS = Buffer.alloc(STEP_BYTES, 0x20);

/**
 * The room `index.json` is written into, taken on the disk before it is needed: a file of
 * blanks (`index.json.tmp`) that grows with what the index will hold (`ensure`), and into which
 * the index is finally written from its start, cut to its length and renamed to `index.json`
 * (`fill`). Writing over blocks a file already has takes no new room on the file systems that
 * do not copy on write (ext4, XFS, tmpfs), so a disk that filled during the run still gets its
 * index. The descriptor stays open for the run, so the file cannot be swapped for a link.
 */
export class IndexReserve {
  #fd: number;
  #bytes = 0;
  readonly path: string;

  /** Creates `path` (an entry of that name is replaced with `replace`, never written through). */
  constructor(path: string, replace: boolean) {
    this.path = path;
    this.#fd = createNewFile(path, replace).fd;
  }

  /** Bytes held so far. */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Grows the reserve to at least `bytes`, in whole steps. Never fails: on a full disk it
   * stays as large as it could be made (the writes that follow fail and say so).
   */
  ensure(bytes: number): void {
    if (bytes <= this.#bytes || this.#fd < 0) return;
    const target = Math.ceil(bytes / STEP_BYTES) * STEP_BYTES;
    try {
      while (this.#bytes < target) {
        // At a position: the descriptor's own offset stays at 0, where `fill` writes.
        const size = Math.min(STEP_BYTES, target - this.#bytes);
        this.#bytes += writeSync(this.#fd, BLANKS, 0, size, this.#bytes);
      }
    } catch {
      // No room (or no more disk): what is reserved stays reserved.
    }
  }

  /**
   * Writes the document's pieces from the reserve's start, cuts the file to them and renames
   * it to `target`. Throws on failure (the descriptor is closed, the file left for the caller).
   */
  fill(pieces: Iterable<string>, target: string): void {
    const fd = this.#fd;
    this.#fd = -1;
    try {
      const written = writePiecesSync(fd, pieces, '\n');
      ftruncateSync(fd, written);
    } finally {
      closeSync(fd);
    }
    renameSync(this.path, target);
  }

  /** Lets go of the descriptor without writing (the file stays until replaced or removed). */
  close(): void {
    if (this.#fd < 0) return;
    const fd = this.#fd;
    this.#fd = -1;
    closeSync(fd);
  }
}
