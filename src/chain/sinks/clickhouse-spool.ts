import {
  closeSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { writeFailed } from '../../errors.js';
import { openDataFileForAppend, openRegularForRead, replaceFileWith, writeAllSync } from '../../safe-open.js';
import type { Entry, TableKind } from './clickhouse-rows.js';
import { processAlive } from '../../process-alive.js';

/** The spool of a run in its output folder; rows waiting for ClickHouse, one JSON entry a line. */
export const SPOOL_FILE = 'clickhouse-spool.jsonl';
/** What a sender renames a spool file to while it sends it (found again by a later resend if it dies). */
const SENDING = /^clickhouse-spool(\.sending-[A-Za-z0-9-]+)?\.jsonl$/;
/** A file a sender renamed for itself: its process id comes first. */
const CLAIMED = /^clickhouse-spool\.sending-(\d+)-[A-Za-z0-9-]+\.jsonl$/;
/**
 * Rows ClickHouse refused as data (a wrong type, an unknown field), set aside beside the spool
 * they came from so they no longer hold back the rows after them; never sent again by subtee.
 */
export const REJECTS_FILE = 'clickhouse-rejected.jsonl';

let claims = 0;
/** Files this process claimed and is still sending (a sink's own, not to be taken by another). */
const sendingHere = new Set<string>();

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
        writeAllSync(fd, Buffer.from(text));
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

/**
 * Renames a spool file to a name only this sender uses; null if another sender took it first
 * or is sending it now. A file another sender claimed is taken only when its process is gone
 * (it died mid-send): taking a live sender's file would send its rows twice.
 */
export function claimFile(path: string): string | null {
  const claimedBy = CLAIMED.exec(basename(path));
  if (claimedBy) {
    const pid = Number(claimedBy[1]);
    if (pid === process.pid ? sendingHere.has(path) : processAlive(pid)) return null;
  }
  const to = join(
    dirname(path),
    `clickhouse-spool.sending-${process.pid}-${Date.now().toString(36)}-${++claims}.jsonl`,
  );
  try {
    renameSync(path, to);
  } catch {
    return null;
  }
  sendingHere.add(to);
  return to;
}

/** Claimed files this process stops sending (left for a later resend). */
export function releaseClaims(paths: Iterable<string>): void {
  for (const path of paths) sendingHere.delete(path);
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
      // A link or a pipe planted under a spool's name is not a spool: never read, never claimed.
      if (SENDING.test(name)) {
        if (isRegularFile(p)) found.push(p);
      } else if (depth === 0 && isDir(p)) scan(p, 1);
    }
  };
  scan(dir, 0);
  return found;
}

function isRegularFile(p: string): boolean {
  try {
    return lstatSync(p).isFile();
  } catch {
    return false;
  }
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** Where a spool file's reading stands: what a send stopped midway keeps is the rest of the file. */
export interface SpoolPlace {
  /** Bytes of the file before the first line not yet in a batch handed out. */
  bytes: number;
  /** Entries in the batches handed out. */
  entries: number;
}

/** Bytes a spool file is read and copied in. */
const PIECE_BYTES = 1024 * 1024;

/**
 * The entries of a spool file in batches, read in 1 MiB pieces so a large spool never sits in
 * memory. A torn last line (a sender killed mid-write) or any line that is not an entry is skipped.
 * `place`, when given, follows the batches handed out (see SpoolPlace).
 */
export function* readSpool(path: string, batchRows: number, place?: SpoolPlace): Generator<Entry[]> {
  const fd = openRegularForRead(path);
  const buf = Buffer.alloc(PIECE_BYTES);
  /** The start of a line not ended yet, carried to the next piece. */
  let carried: Buffer[] = [];
  /** Bytes of the file before the next line to read. */
  let at = 0;
  let batch: Entry[] = [];
  const add = (line: Buffer): boolean => {
    at += line.length + 1;
    const e = parseEntry(line.toString('utf8'));
    if (e) batch.push(e);
    return batch.length >= batchRows;
  };
  const handOut = (): Entry[] => {
    const out = batch;
    batch = [];
    if (place) {
      place.bytes = at;
      place.entries += out.length;
    }
    return out;
  };
  try {
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      let from = 0;
      for (let nl = buf.indexOf(10, 0); nl !== -1 && nl < n; nl = buf.indexOf(10, from)) {
        const piece = buf.subarray(from, nl);
        const line = carried.length > 0 ? Buffer.concat([...carried, piece]) : piece;
        carried = [];
        from = nl + 1;
        if (add(line)) yield handOut();
      }
      if (from < n) carried.push(Buffer.from(buf.subarray(from, n)));
    }
    // A last line without its newline: `add` counts one byte more than it has, past the end.
    if (carried.length > 0) add(Buffer.concat(carried));
  } finally {
    closeSync(fd);
  }
  if (batch.length > 0) yield handOut();
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
  sendingHere.delete(path);
  try {
    unlinkSync(path);
  } catch {
    // Already gone (another sender finished it).
  }
}

/**
 * ClickHouse error codes that say the rows themselves were refused: text that does not parse
 * as the column's type, a number out of range, an unknown field. Any other failure (no answer,
 * a server error) says nothing about the rows, and they wait for the server instead.
 */
const REFUSED_DATA_CODES = new Set([6, 25, 26, 27, 32, 33, 38, 41, 53, 69, 70, 72, 117, 131, 321, 349]);

/** The ClickHouse code of an error the server answered with, or null (no answer). */
function clickhouseCode(err: unknown): number | null {
  const answered = err as { code?: unknown; message?: unknown } | null;
  // The client parses the code from recent servers; older ones are read from the message.
  if (typeof answered?.code === 'string' && /^\d+$/.test(answered.code)) return Number(answered.code);
  const stated = /^Code: (\d+)[,.]/.exec(String(answered?.message ?? ''));
  return stated ? Number(stated[1]) : null;
}

/**
 * Why the server refused a row, without the row: its code and the exception's first clause
 * (the message goes on to quote the row's bytes, after a colon or within quotes).
 */
export function refusalReason(err: unknown): string {
  const message = String((err as { message?: unknown } | null)?.message ?? err);
  // `Code: 53, e.displayText() = DB::Exception: …` (old servers) or `Code: 53. DB::Exception: …`.
  const exception = message.replace(/^Code: \d+(?:, e\.displayText\(\) =|\.) /, '');
  // The clause ends before a colon or a quote: what follows may be the row's text.
  const clause = /(?:DB::Exception: )?([^:'"`\n]{1,120})/.exec(exception);
  return `Code: ${clickhouseCode(err)}, ${clause?.[1].trimEnd() || 'refused'}`;
}

/** Whether ClickHouse refused an insert for what some row holds. */
export function refusedAsData(err: unknown): boolean {
  const code = clickhouseCode(err);
  return code !== null && REFUSED_DATA_CODES.has(code);
}

/**
 * Single rows of one table refused in a row, with none of that table's rows taken before them,
 * that say the table refuses every row (its shape, a setting) rather than these rows.
 */
export const TABLE_REFUSES_AFTER_ROWS = 8;

/**
 * A table subtee does not write to: one of another shape (`foreign`, found before any row is
 * sent), or one that refuses every row sent to it. The table's problem, not the rows'.
 */
export class TableRefused extends Error {
  constructor(
    readonly kind: TableKind,
    readonly reason: string,
    readonly foreign = false,
  ) {
    super(`the ${kind} table ${foreign ? 'is not subtee\'s' : 'refuses every row'} (${reason})`);
  }
}

/** What one spool file's send has learnt so far: the tables that took rows, the rows held. */
export class SendTally {
  readonly took = new Set<TableKind>();
  /** Rows refused alone by a table that took none yet: rows at fault, or the table. */
  readonly held = new Map<TableKind, Array<{ entry: Entry; err: unknown }>>();
}

export interface SettingAside {
  insert: (entries: Entry[]) => Promise<void>;
  /** A row the server refused as data, set aside for good. */
  setAside: (entry: Entry, err: unknown) => void;
  /** Checked before each insert: true stops the batch, its rows not yet done handed back. */
  stopped: () => boolean;
}

/** Why a batch's send stopped early, with its rows not yet inserted nor set aside. */
export class SendStopped extends Error {
  constructor(
    readonly rest: Entry[],
    override readonly cause: unknown,
  ) {
    super('send stopped');
  }
}

/**
 * Inserts a batch; when the server refuses it as data, inserts its halves, and so on down to
 * the rows it refuses alone, which are handed to `setAside`. A row inserted twice this way
 * counts once (the tables are keyed). A table that took none of this file's rows and refused
 * TABLE_REFUSES_AFTER_ROWS of them alone is the problem (TableRefused): those rows are not set
 * aside. Any other failure, and `stopped()`, end the batch with SendStopped, naming every row
 * neither inserted nor set aside (those held for their table included), so that each row is in
 * one place only.
 */
export async function insertSettingAside(batch: Entry[], to: SettingAside, tally: SendTally): Promise<void> {
  // A list, not recursion: the depth is log2 of the batch.
  const parts: Entry[][] = [batch];
  const rest = () => [...[...tally.held.values()].flat().map((h) => h.entry), ...[...parts].reverse().flat()];
  while (parts.length > 0) {
    if (to.stopped()) throw new SendStopped(rest(), null);
    const part = parts.pop()!;
    try {
      await to.insert(part);
    } catch (err) {
      if (!refusedAsData(err)) {
        parts.push(part);
        throw new SendStopped(rest(), err);
      }
      if (part.length > 1) {
        const half = Math.ceil(part.length / 2);
        parts.push(part.slice(half), part.slice(0, half));
        continue;
      }
      const kind = part[0].t;
      if (tally.took.has(kind)) {
        to.setAside(part[0], err);
        continue;
      }
      const held = tally.held.get(kind) ?? [];
      tally.held.set(kind, held);
      held.push({ entry: part[0], err });
      if (held.length >= TABLE_REFUSES_AFTER_ROWS)
        throw new SendStopped(rest(), new TableRefused(kind, refusalReason(err)));
      continue;
    }
    for (const kind of new Set(part.map((e) => e.t))) tookRows(tally, kind, to);
  }
}

/** A table took a row: the rows it refused alone before were at fault, and are set aside. */
function tookRows(tally: SendTally, kind: TableKind, to: SettingAside): void {
  tally.took.add(kind);
  for (const { entry, err } of tally.held.get(kind) ?? []) to.setAside(entry, err);
  tally.held.delete(kind);
}

/**
 * At the end of a file: rows held for a table that never took one are few (under
 * TABLE_REFUSES_AFTER_ROWS), so they are the rows at fault: set aside.
 */
export function settleHeld(tally: SendTally, to: Pick<SettingAside, 'setAside'>): void {
  for (const held of tally.held.values()) for (const { entry, err } of held) to.setAside(entry, err);
  tally.held.clear();
}

/**
 * Leaves in a claimed spool file only `rows` and the bytes after `place` (the lines not read
 * into a batch yet): what a send stopped midway has neither inserted nor set aside. The rest
 * of the file is copied as it is, a piece at a time, never parsed again; a file none of whose
 * entries went anywhere (every entry read is handed back) is left as it is.
 */
export function keepInSpool(path: string, rows: Entry[], place: SpoolPlace): void {
  if (rows.length === place.entries) return;
  try {
    const from = openRegularForRead(path);
    try {
      replaceFileWith(path, (fd) => {
        let text = '';
        for (const e of rows) text += JSON.stringify(e) + '\n';
        if (text) writeAllSync(fd, Buffer.from(text));
        const buf = Buffer.alloc(PIECE_BYTES);
        for (let at = place.bytes, n; (n = readSync(from, buf, 0, buf.length, at)) > 0; at += n)
          writeAllSync(fd, buf.subarray(0, n));
      });
    } finally {
      closeSync(from);
    }
  } catch (err) {
    throw writeFailed(path, err);
  }
}

/**
 * The entries of a spool file, counted by its lines, not parsed: a line not ended (a sender
 * killed mid-write) counts too. What a send left in the file is told at the end, after its wait.
 */
export function spooledRows(path: string): number {
  const fd = openRegularForRead(path);
  const buf = Buffer.alloc(PIECE_BYTES);
  let rows = 0;
  let last = 10;
  try {
    for (let n; (n = readSync(fd, buf, 0, buf.length, null)) > 0;) {
      for (let nl = buf.indexOf(10); nl !== -1 && nl < n; nl = buf.indexOf(10, nl + 1)) rows++;
      last = buf[n - 1];
    }
  } finally {
    closeSync(fd);
  }
  return last === 10 ? rows : rows + 1;
}

/** Rows set aside in REJECTS_FILE files: how many, where, and the first reason given. */
export class Rejects {
  rows = 0;
  readonly files = new Set<string>();
  reason = '';

  add(dir: string, entry: Entry, reason: string): void {
    const file = join(dir, REJECTS_FILE);
    try {
      const fd = openDataFileForAppend(file);
      try {
        writeAllSync(fd, Buffer.from(JSON.stringify(entry) + '\n'));
      } finally {
        closeSync(fd);
      }
    } catch (err) {
      throw writeFailed(file, err);
    }
    this.rows++;
    this.files.add(file);
    this.reason ||= reason;
  }
}
