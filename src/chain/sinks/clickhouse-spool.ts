import {
  closeSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { writeFailed } from '../../errors.js';
import { openDataFileForAppend } from '../../safe-open.js';
import type { Entry } from './clickhouse-rows.js';

/** The spool of a run in its output folder; rows waiting for ClickHouse, one JSON entry a line. */
export const SPOOL_FILE = 'clickhouse-spool.jsonl';
/** What a sender renames a spool file to while it sends it (found again by a later resend if it dies). */
const SENDING = /^clickhouse-spool(\.sending-[A-Za-z0-9-]+)?\.jsonl$/;

let claims = 0;

/**
 * Rows that could not be inserted, appended to a file so that nothing is lost while the
 * server is away and nothing is held in memory; sent when it answers again, or by a later
 * `--clickhouse-resend`. The folder is resolved when the first row is spooled.
 */
export class Spool {
  /** Rows appended by this run and not yet claimed for sending. */
  rows = 0;
  private folder: string | null = null;

  constructor(private readonly resolveFolder: () => string) {}

  get dir(): string {
    this.folder ??= this.resolveFolder();
    return this.folder;
  }

  get file(): string {
    return join(this.dir, SPOOL_FILE);
  }

  append(entries: Entry[]): void {
    if (entries.length === 0) return;
    let text = '';
    for (const e of entries) text += JSON.stringify(e) + '\n';
    try {
      mkdirSync(this.dir, { recursive: true });
      // The spool may sit in an output folder reused with --force: a link planted under its
      // name would receive the rows, a pipe would block the run.
      const fd = openDataFileForAppend(this.file);
      try {
        const bytes = Buffer.from(text);
        for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at, bytes.length - at);
      } finally {
        closeSync(fd);
      }
    } catch (err) {
      throw writeFailed(this.file, err);
    }
    this.rows += entries.length;
  }

  /** Takes this run's spool for sending: a file path, or null when nothing is spooled. */
  claimOwn(): string | null {
    if (this.rows === 0) return null;
    const claimed = claimFile(this.file);
    if (claimed) this.rows = 0;
    return claimed;
  }
}

/** Renames a spool file to a name only this sender uses; null if another sender took it first. */
export function claimFile(path: string): string | null {
  const to = join(
    dirname(path),
    `clickhouse-spool.sending-${process.pid}-${Date.now().toString(36)}-${++claims}.jsonl`,
  );
  try {
    renameSync(path, to);
    return to;
  } catch {
    return null;
  }
}

/** Spool files (waiting or abandoned mid-send) in `dir` and in its immediate subfolders. */
export function findSpoolFiles(dir: string): string[] {
  const found: string[] = [];
  const scan = (d: string, depth: number) => {
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      return;
    }
    for (const name of names.sort()) {
      const p = join(d, name);
      if (SENDING.test(name)) found.push(p);
      else if (depth === 0 && isDir(p)) scan(p, 1);
    }
  };
  scan(dir, 0);
  return found;
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The entries of a spool file in batches, read in 1 MiB pieces so a large spool never sits in
 * memory. A torn last line (a sender killed mid-write) or any line that is not an entry is skipped.
 */
export function* readSpool(path: string, batchRows: number): Generator<Entry[]> {
  const fd = openSync(path, 'r');
  const buf = Buffer.alloc(1024 * 1024);
  const decoder = new StringDecoder('utf8');
  let rest = '';
  let batch: Entry[] = [];
  try {
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      const text = rest + (n === 0 ? decoder.end() : decoder.write(buf.subarray(0, n)));
      const lines = text.split('\n');
      rest = n === 0 ? '' : lines.pop()!;
      for (const line of lines) {
        const e = parseEntry(line);
        if (e) batch.push(e);
        if (batch.length >= batchRows) {
          yield batch;
          batch = [];
        }
      }
      if (n === 0) break;
    }
  } finally {
    closeSync(fd);
  }
  if (batch.length > 0) yield batch;
}

function parseEntry(line: string): Entry | null {
  if (line.length === 0) return null;
  try {
    const e = JSON.parse(line);
    if ((e?.t === 'events' || e?.t === 'channels') && typeof e.r === 'object' && e.r !== null)
      return e as Entry;
  } catch {
    // A torn line: the rest of the file is still good.
  }
  return null;
}

export function removeSpool(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Already gone (another sender finished it).
  }
}
