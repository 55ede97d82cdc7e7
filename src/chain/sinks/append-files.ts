import { closeSync, writevSync } from 'node:fs';
import { join } from 'node:path';
import { writeFailed } from '../../errors.js';
import {
  checkFolder,
  checkStillThere,
  createNewFile,
  pinFolder,
  reopenFile,
  writeAllSync,
  type FolderPin,
} from '../../safe-open.js';

/**
 * One file's state. Kept small, since there is one or two per channel and 10,000 channels
 * are all alive to the end: no absolute path (made again when needed) and the identity in
 * two numbers rather than an object of its own.
 */
export interface AppendFile {
  /**
   * Its path relative to the output folder (`relPath`), with `/` separators, as written in
   * index.json: in two parts, the name a channel's files share and the extension, so a
   * channel's two paths are not two strings of their own.
   */
  readonly stem: string;
  readonly ext: string;
  /**
   * It holds input lines byte for byte (a `.jsonl`, the quarantine): written before the
   * files made from them, so a disk that fills takes a transcript's text, not an input line.
   */
  readonly raw: boolean;
  fd: number;
  /** Device and inode once the file is created (`createdIno` -1 before): a reopen must find it. */
  createdDev: number;
  createdIno: number;
  /**
   * Bytes queued since the last write, in a list made for them, emptied and dropped once
   * written: an old-generation list's slots are roots to the young collector even once the
   * list is dropped, so the input chunks it last pointed at would wait for a full collection
   * (with 10,000 channels, when one list was kept across writes, every chunk did).
   */
  pending: Buffer[] | null;
  pendingBytes: number;
}

/** A line up to this long is copied by `writeCopied`; a longer one is queued as it is. */
const COPIED_LINE_BYTES = 512;
const COPY_BUFFER_BYTES = 64 * 1024;
/** Where `writeText` encodes text, shared by every file; text longer than a quarter goes on its own. */
const TEXT_ARENA_BYTES = 64 * 1024;
const LF = 0x0a;
/** Buffer's own encoder, which `write` calls after checking its arguments. */
type Utf8Write = { utf8Write(text: string, offset: number): number };
const NEWLINE = Buffer.from('\n');

/**
 * Append-only files with a bounded number of open descriptors and batched writes.
 * Writes are queued per file and written in one call per file at flush time; the least
 * recently used descriptor is closed when the limit is reached and reopened for append
 * later, so 10,000 channels never run into EMFILE (and should the process's limit be lower
 * than the budget, an EMFILE closes more of them and lowers the budget). A file is created
 * exclusively on its first write, so an existing file is never overwritten unless
 * `overwrite` is set, and then the entry is replaced, never written through (see safe-open).
 *
 * Nothing is made through a folder swapped during the run: `dir` and the `folders` under it
 * (`agents`) are pinned when this is made, and each file is made only once its folder is
 * found, before and after, still under its name (`checkFolder`), else the write fails naming
 * the folder. A file replaced while it is open is seen when it is reopened (`reopenFile`) or
 * by `closeAll` at the end, which finds every file made still under its name
 * (`checkStillThere`): never on a write, which would cost a call per write, nor on each
 * close and reopen of the LRU, which with thousands of channels can be one per line.
 */
export class AppendFiles {
  private readonly open = new Set<AppendFile>();
  private readonly dirty = new Set<AppendFile>();
  /** The folders files are opened in, by their path relative to `dir` (`''` for `dir`). */
  private readonly pins = new Map<string, FolderPin>();
  /** Every file created, each checked at the end to be still under its name. */
  private readonly created: AppendFile[] = [];
  pendingBytes = 0;
  /**
   * Text of every file is encoded into one arena, each file's consecutive text as one run,
   * queued as one view when another write comes between: a transcript line then costs no
   * buffer of its own. The arena is used again from its start once everything is written.
   */
  private arena: Buffer | null = null;
  private arenaUsed = 0;
  /** The file whose text ends the arena, from `runStart`, not queued in its `pending` yet. */
  private runFile: AppendFile | null = null;
  private runStart = 0;
  /**
   * Where `writeLine` gathers the lines of one file that follow each other in one input
   * buffer: the file, the buffer, and the first and last byte of the lines not in the file's
   * `pending` yet. One run for every file, so 10,000 channels hold nothing for it.
   */
  private linesFile: AppendFile | null = null;
  private lines: Buffer | null = null;
  private linesStart = 0;
  private linesEnd = 0;
  /**
   * Where `writeCopied` gathers the short lines of one file (the files sink copies only the
   * quarantine's): bytes from `copyStart` on are not in its `pending` yet. Should another
   * file copy lines too, it takes the buffer over once the first file's are written; no file
   * holds a buffer of its own.
   */
  private copyFile: AppendFile | null = null;
  private copyBuf: Buffer | null = null;
  private copyStart = 0;
  private copyUsed = 0;

  constructor(
    private readonly dir: string,
    private maxOpenFiles: number,
    private readonly overwrite = false,
    folders: readonly string[] = [],
  ) {
    for (const rel of ['', ...folders]) this.pinOf(rel);
  }

  file(stem: string, ext: string, raw = false): AppendFile {
    return {
      stem,
      ext,
      raw,
      fd: -1,
      createdDev: 0,
      createdIno: -1,
      pending: null,
      pendingBytes: 0,
    };
  }

  write(f: AppendFile, data: Buffer | string): void {
    const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    if (buf.length === 0 && f.createdIno !== -1) return;
    if (this.linesFile === f) this.sealLines();
    if (this.runFile === f) this.sealRun();
    if (this.copyFile === f) this.sealCopied();
    (f.pending ??= []).push(buf);
    f.pendingBytes += buf.length;
    this.pendingBytes += buf.length;
    this.dirty.add(f);
  }

  /**
   * Queues `line` and, with `newline`, a newline after it. A short line is copied into a
   * buffer it shares with the lines around it, so a file of millions of tiny lines (junk in
   * the quarantine) is queued and written as a few large parts, not two views per line.
   */
  writeCopied(f: AppendFile, line: Buffer, newline: boolean): void {
    if (line.length >= COPIED_LINE_BYTES) {
      this.write(f, line);
      if (newline) this.write(f, NEWLINE);
      return;
    }
    const size = line.length + (newline ? 1 : 0);
    if (size === 0) return this.write(f, line);
    if (this.linesFile === f) this.sealLines();
    if (this.runFile === f) this.sealRun();
    if (this.copyFile !== f && this.copyFile !== null) {
      // The buffer is another file's: that file's queue is written first.
      this.flushFile(this.copyFile);
      this.dirty.delete(this.copyFile);
    }
    this.copyFile = f;
    if (this.copyBuf === null) {
      this.copyBuf = Buffer.allocUnsafe(COPY_BUFFER_BYTES);
    } else if (this.copyUsed + size > this.copyBuf.length) {
      // Full: the file's queue is written now and the one buffer used again, rather than a
      // new buffer per 64 KiB (garbage the collector was slow to take back).
      this.flushFile(f);
      this.dirty.delete(f);
    }
    this.copyBuf.set(line, this.copyUsed);
    this.copyUsed += line.length;
    if (newline) this.copyBuf[this.copyUsed++] = LF;
    f.pendingBytes += size;
    this.pendingBytes += size;
    this.dirty.add(f);
  }

  /** Queues `text` as UTF-8, as `write(f, text)` does, encoded into the shared arena. */
  writeText(f: AppendFile, text: string): void {
    // At most three bytes per UTF-16 unit.
    const most = text.length * 3;
    if (most === 0 || most > TEXT_ARENA_BYTES / 4) return this.write(f, text);
    if (this.linesFile === f) this.sealLines();
    if (this.copyFile === f) this.sealCopied();
    if (this.runFile !== f) this.sealRun();
    if (this.arena === null || this.arenaUsed + most > this.arena.length) {
      this.sealRun();
      this.arena = Buffer.allocUnsafe(TEXT_ARENA_BYTES);
      this.arenaUsed = 0;
    }
    if (this.runFile === null) {
      this.runFile = f;
      this.runStart = this.arenaUsed;
    }
    // What `write` calls, without its argument checks (the arena has room for every byte).
    const size = (this.arena as Buffer & Utf8Write).utf8Write(text, this.arenaUsed);
    this.arenaUsed += size;
    f.pendingBytes += size;
    this.pendingBytes += size;
    this.dirty.add(f);
  }

  /**
   * Queues `line` and a newline after it, as `write(line)` and `write(NEWLINE)` would. Lines
   * that follow each other in one input buffer, one newline between them, are queued as one
   * view of it: a file written a line at a time is then written in a few large parts.
   */
  writeLine(f: AppendFile, line: Buffer): void {
    const held = this.lines;
    const at = line.byteOffset;
    if (
      this.linesFile === f &&
      line.buffer === held!.buffer &&
      at === this.linesEnd + 1 &&
      held![at - 1] === LF
    ) {
      this.linesEnd = at + line.length;
    } else {
      if (line.length === 0) {
        this.write(f, line);
        this.write(f, NEWLINE);
        return;
      }
      this.sealLines();
      if (this.copyFile === f) this.sealCopied();
      if (this.runFile === f) this.sealRun();
      // The whole input buffer, as a Buffer: no copy.
      this.linesFile = f;
      this.lines = Buffer.from(line.buffer);
      this.linesStart = at;
      this.linesEnd = at + line.length;
    }
    f.pendingBytes += line.length + 1;
    this.pendingBytes += line.length + 1;
    this.dirty.add(f);
  }

  /** Moves the lines `writeLine` gathered into their file's `pending`, each with its newline. */
  private sealLines(): void {
    const f = this.linesFile;
    if (f === null) return;
    (f.pending ??= []).push(this.lines!.subarray(this.linesStart, this.linesEnd), NEWLINE);
    this.linesFile = null;
    this.lines = null;
  }

  /** Moves the arena's open run into its file's `pending`. */
  private sealRun(): void {
    const f = this.runFile;
    if (f === null) return;
    this.runFile = null;
    if (this.arenaUsed > this.runStart)
      (f.pending ??= []).push(this.arena!.subarray(this.runStart, this.arenaUsed));
  }

  /** Moves the copied bytes not yet queued into their file's `pending`, after what is there. */
  private sealCopied(): void {
    if (this.copyUsed === this.copyStart) return;
    (this.copyFile!.pending ??= []).push(this.copyBuf!.subarray(this.copyStart, this.copyUsed));
    this.copyStart = this.copyUsed;
  }

  /**
   * Writes everything queued, the raw files (input lines) first. Throws an OutputError naming
   * the first file that failed. A raw file that fails does not stop the other raw files (each
   * line they hold is one more kept); the rest are then left queued, not written, so the space
   * left goes to input lines.
   */
  flush(): void {
    let failure: unknown = null;
    for (const f of this.dirty) {
      if (!f.raw) continue;
      this.dirty.delete(f);
      try {
        this.flushFile(f);
      } catch (err) {
        failure ??= err;
      }
    }
    if (failure !== null) throw failure;
    for (const f of this.dirty) this.flushFile(f);
    this.dirty.clear();
    // Every view of the arena is written: it is filled again from its start.
    this.arenaUsed = 0;
  }

  /**
   * Closes every file, then finds each folder and each file created still under its name: the
   * first that is not (replaced while a file was open, or after it was closed) fails as a write
   * to it would.
   */
  closeAll(): void {
    let failure: unknown = null;
    for (const f of this.open) {
      try {
        this.close(f);
      } catch (err) {
        failure ??= err;
      }
    }
    if (failure !== null) throw failure;
    for (const pin of this.pins.values()) this.checkFolder(pin);
    for (const f of this.created) this.checkStillThere(f);
  }

  private flushFile(f: AppendFile): void {
    if (this.linesFile === f) this.sealLines();
    if (this.runFile === f) this.sealRun();
    if (this.copyFile === f) this.sealCopied();
    const parts = f.pending;
    const total = f.pendingBytes;
    this.pendingBytes -= f.pendingBytes;
    f.pending = null;
    f.pendingBytes = 0;
    if (parts === null) return;
    const fd = this.fdFor(f);
    try {
      // Gathered by writev: copying the parts into one new buffer first cost more than the write.
      const written = parts.length > 1 ? writevSync(fd, parts) : 0;
      const data =
        written >= total
          ? null
          : parts.length === 1
            ? parts[0]
            : Buffer.concat(parts, total).subarray(written);
      if (data) writeAllSync(fd, data);
    } catch (err) {
      throw writeFailed(this.pathOf(f), err);
    } finally {
      // Emptied, not only dropped: V8 may allocate these lists in the old generation from the
      // start (allocation-site pretenuring, once a young collection finds most of them alive).
      // With 10,000 subagents one run in four then held 25-45 MB of input chunks.
      parts.length = 0;
    }
    // Everything copied is written: the buffer is filled again from its start.
    if (this.copyFile === f) {
      this.copyStart = 0;
      this.copyUsed = 0;
    }
  }

  private fdFor(f: AppendFile): number {
    if (f.fd >= 0) {
      // Refresh the LRU position: a Set iterates in insertion order.
      this.open.delete(f);
      this.open.add(f);
      return f.fd;
    }
    if (this.open.size >= this.maxOpenFiles) this.close(this.open.values().next().value as AppendFile);
    const creating = f.createdIno === -1;
    // Before a file is made: nothing is created, or removed by `overwrite`, in a folder that
    // took the name of the one pinned. A reopen needs no check (a file found through another
    // folder is not the one made, and is refused), so a file the LRU closes and reopens again
    // and again costs no more calls.
    if (creating) this.checkFolder(this.folderOf(f));
    for (;;) {
      try {
        if (!creating) {
          f.fd = reopenFile(this.pathOf(f), { dev: f.createdDev, ino: f.createdIno });
        } else {
          const made = createNewFile(this.pathOf(f), this.overwrite);
          f.fd = made.fd;
          f.createdDev = made.id.dev;
          f.createdIno = made.id.ino;
          this.created.push(f);
        }
        break;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if ((code !== 'EMFILE' && code !== 'ENFILE') || this.open.size === 0) {
          // A folder swapped is named rather than the file not found through it.
          this.checkFolder(this.folderOf(f));
          throw writeFailed(this.pathOf(f), err);
        }
        // The process has fewer descriptors than the budget: give one back and keep the lower budget.
        this.maxOpenFiles = Math.max(1, this.open.size);
        this.close(this.open.values().next().value as AppendFile);
      }
    }
    this.open.add(f);
    // After: a swap made while the file was made is seen before a byte is written (the file,
    // empty, is left where the link led). Node has no openat: a folder swapped for a link and
    // back between the two checks still has the file made and written where the link led,
    // seen at the end (`closeAll` finds nothing of it under its name).
    if (creating) this.checkFolder(this.folderOf(f));
    return f.fd;
  }

  private folderOf(f: AppendFile): FolderPin {
    const slash = f.stem.lastIndexOf('/');
    return this.pinOf(slash === -1 ? '' : f.stem.slice(0, slash));
  }

  /** The folder `rel` (relative to `dir`) as first seen: `dir` itself may be a link, `rel` not. */
  private pinOf(rel: string): FolderPin {
    let pin = this.pins.get(rel);
    if (pin) return pin;
    const path = rel === '' ? this.dir : join(this.dir, rel);
    try {
      pin = pinFolder(path, rel === '');
    } catch (err) {
      throw writeFailed(path, err);
    }
    this.pins.set(rel, pin);
    return pin;
  }

  private checkFolder(pin: FolderPin): void {
    try {
      checkFolder(pin);
    } catch (err) {
      throw writeFailed(pin.path, err);
    }
  }

  private close(f: AppendFile): void {
    this.open.delete(f);
    if (f.fd < 0) return;
    const fd = f.fd;
    f.fd = -1;
    try {
      closeSync(fd);
    } catch (err) {
      throw writeFailed(this.pathOf(f), err);
    }
  }

  /** Finds `f` still under its name, its folder first (so a folder swapped is the one named). */
  private checkStillThere(f: AppendFile): void {
    this.checkFolder(this.folderOf(f));
    try {
      checkStillThere(this.pathOf(f), { dev: f.createdDev, ino: f.createdIno });
    } catch (err) {
      throw writeFailed(this.pathOf(f), err);
    }
  }

  pathOf(f: AppendFile): string {
    return join(this.dir, relPath(f));
  }
}

/** A file's path relative to the output folder, with `/` separators. */
export const relPath = (f: AppendFile): string => f.stem + f.ext;
