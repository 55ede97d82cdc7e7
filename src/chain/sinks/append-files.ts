import { closeSync, openSync, writeSync, writevSync } from 'node:fs';
import { join } from 'node:path';
import { writeFailed } from '../../errors.js';

export interface AppendFile {
  /** Path relative to the output folder, with `/` separators (as written in index.json). */
  readonly rel: string;
  readonly path: string;
  fd: number;
  created: boolean;
  pending: Buffer[];
  pendingBytes: number;
}

/**
 * Append-only files with a bounded number of open descriptors and batched writes.
 * Writes are queued per file and written in one call per file at flush time; the least
 * recently used descriptor is closed when the limit is reached and reopened for append
 * later, so 10,000 channels never run into EMFILE. A file is created exclusively on its
 * first write (`wx`), so an existing file is never overwritten unless `overwrite` is set.
 */
export class AppendFiles {
  private readonly open = new Set<AppendFile>();
  private readonly dirty = new Set<AppendFile>();
  pendingBytes = 0;

  constructor(
    private readonly dir: string,
    private readonly maxOpenFiles: number,
    private readonly overwrite = false,
  ) {}

  file(rel: string): AppendFile {
    return { rel, path: join(this.dir, rel), fd: -1, created: false, pending: [], pendingBytes: 0 };
  }

  write(f: AppendFile, data: Buffer | string): void {
    const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    if (buf.length === 0 && f.created) return;
    f.pending.push(buf);
    f.pendingBytes += buf.length;
    this.pendingBytes += buf.length;
    this.dirty.add(f);
  }

  /** Writes everything queued. Throws an OutputError naming the file on failure. */
  flush(): void {
    for (const f of this.dirty) this.flushFile(f);
    this.dirty.clear();
  }

  closeAll(): void {
    for (const f of this.open) this.close(f);
  }

  private flushFile(f: AppendFile): void {
    const parts = f.pending;
    const total = f.pendingBytes;
    this.pendingBytes -= f.pendingBytes;
    f.pending = [];
    f.pendingBytes = 0;
    const fd = this.fdFor(f);
    try {
      // Gathered by writev: copying the parts into one new buffer first cost more than the write.
      const written = parts.length > 1 ? writevSync(fd, parts) : 0;
      const data = written >= total ? null : parts.length === 1 ? parts[0] : Buffer.concat(parts, total).subarray(written);
      for (let off = 0; data && off < data.length; ) off += writeSync(fd, data, off, data.length - off);
    } catch (err) {
      throw writeFailed(f.path, err);
    }
  }

  private fdFor(f: AppendFile): number {
    if (f.fd >= 0) {
      // Refresh the LRU position: a Set iterates in insertion order.
      this.open.delete(f);
      this.open.add(f);
      return f.fd;
    }
    if (this.open.size >= this.maxOpenFiles) {
      const oldest = this.open.values().next().value as AppendFile;
      this.close(oldest);
    }
    const flags = f.created ? 'a' : this.overwrite ? 'w' : 'wx';
    try {
      f.fd = openSync(f.path, flags, 0o644);
    } catch (err) {
      throw writeFailed(f.path, err);
    }
    f.created = true;
    this.open.add(f);
    return f.fd;
  }

  private close(f: AppendFile): void {
    this.open.delete(f);
    if (f.fd < 0) return;
    const fd = f.fd;
    f.fd = -1;
    try {
      closeSync(fd);
    } catch (err) {
      throw writeFailed(f.path, err);
    }
  }
}
