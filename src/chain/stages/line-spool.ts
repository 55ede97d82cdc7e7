import { randomBytes } from 'node:crypto';
import { closeSync, lstatSync, openSync, readdirSync, readSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { writeFailed } from '../../errors.js';
import type { Spool, SpooledRecord } from '../../model/record.js';
import type { Session } from '../../model/session.js';
import { isBlank } from '../../model/lines.js';
import { StreamScanner } from '../../model/stream-scan.js';
import { writeAllSync } from '../../safe-open.js';
import { processAlive } from '../../process-alive.js';

/** Bytes of a spooled line kept in memory for previews (the readable log, pino, warnings). */
export const SPOOL_HEAD_BYTES = 4096;
/** Top-level scalar members of a spooled line longer than this are left out of its value. */
export const SPOOL_CAPTURE_BYTES = 64 * 1024;
const COPY_BYTES = 1024 * 1024;

/** Spools not released yet, deleted at exit whatever happened to the chain. */
const live = new Set<string>();
let exitHook = false;

function track(path: string): void {
  live.add(path);
  if (exitHook) return;
  exitHook = true;
  process.once('exit', () => {
    for (const p of live) {
      try {
        unlinkSync(p);
      } catch {
        // Already gone.
      }
    }
  });
}

/** Where spools go: beside the output (`--out`) when there is one, else the system temp folder. */
export function spoolDir(out: string | undefined): string {
  return out ?? tmpdir();
}

/** A spool's name: `.subtee-spool-<pid>-<line>-<random>`. */
const SPOOL_NAME = /^\.subtee-spool-(\d+)-\d+-[0-9a-f]{12}$/;

/**
 * Removes the spools a killed run (`kill -9` mid-line: no exit hook ran) left in `dir`: files
 * with a spool's name whose process is gone. A live process's spool is left alone.
 */
export function removeLeftoverSpools(dir: string): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    const m = SPOOL_NAME.exec(name);
    if (!m || Number(m[1]) === process.pid || processAlive(Number(m[1]))) continue;
    const path = join(dir, name);
    try {
      if (lstatSync(path).isFile()) unlinkSync(path);
    } catch {
      // Removed meanwhile, or not ours to remove: a leftover costs only disk.
    }
  }
}

/**
 * Deletes the spools of this process not yet released that are in `dir` (the run's spool
 * folder), and says how many there were: for a run ending on a full disk, whose spooled lines
 * will not be copied any more, so that its index.json finds room. Another run in the same
 * process, spooling elsewhere, keeps its spools.
 */
export function releaseLiveSpools(dir: string): number {
  const folder = resolve(dir);
  let count = 0;
  for (const path of live) {
    if (dirname(resolve(path)) !== folder) continue;
    count++;
    live.delete(path);
    try {
      unlinkSync(path);
    } catch {
      // Already gone.
    }
  }
  return count;
}

/**
 * One line longer than the parser's limit, as it streams past: its bytes go to a file of
 * its own, a StreamScanner judges it and keeps its top-level scalar members, and its first
 * bytes are kept for previews. Memory stays at the scanner's few kilobytes whatever the
 * line's length.
 */
export class LineSpool {
  private readonly path: string;
  private fd: number;
  private bytes = 0;
  private readonly head: Buffer[] = [];
  private headBytes = 0;
  private readonly scanner = new StreamScanner(SPOOL_CAPTURE_BYTES);
  /** Spaces, tabs and CRs only so far: a blank line, whatever its length (see `blank`). */
  private blankSoFar = true;

  constructor(
    dir: string,
    private readonly lineNo: number,
  ) {
    this.path = join(dir, `.subtee-spool-${process.pid}-${lineNo}-${randomBytes(6).toString('hex')}`);
    try {
      // wx: never follows or reuses what is there; 0600: the line may hold anything.
      this.fd = openSync(this.path, 'wx', 0o600);
    } catch (err) {
      throw writeFailed(this.path, err);
    }
    track(this.path);
  }

  /** The line's next bytes, as the LineSplitter hands them on (its CR before the newline left out). */
  push(piece: Buffer): void {
    if (piece.length === 0) return;
    this.take(piece);
  }

  /**
   * Every byte taken is a space, a tab or a CR: a blank line, which the parser counts and
   * skips however long it is (each byte is looked at once, until the first that is not).
   */
  get blank(): boolean {
    return this.blankSoFar;
  }

  /** The line ended: at a newline (`terminated`), or with the input. */
  finish(terminated: boolean): SpooledRecord {
    closeSync(this.fd);
    const verdict = this.scanner.end(terminated);
    return {
      kind: 'spooled',
      lineNo: this.lineNo,
      head: Buffer.concat(this.head, this.headBytes),
      spool: spoolAt(this.path, this.bytes),
      value: verdict.ok ? verdict.value : null,
      reason: verdict.ok ? null : verdict.reason,
    };
  }

  /** Deletes the file of a line that will never be handed on (the chain was torn down). */
  discard(): void {
    try {
      closeSync(this.fd);
    } catch {
      // Closed by finish already.
    }
    spoolAt(this.path, this.bytes).release();
  }

  private take(piece: Buffer): void {
    try {
      writeAllSync(this.fd, piece);
    } catch (err) {
      throw writeFailed(this.path, err);
    }
    this.bytes += piece.length;
    if (this.blankSoFar) this.blankSoFar = isBlank(piece);
    if (!this.scanner.failed) this.scanner.push(piece);
    if (this.headBytes < SPOOL_HEAD_BYTES) {
      const part = Buffer.from(piece.subarray(0, SPOOL_HEAD_BYTES - this.headBytes));
      this.head.push(part);
      this.headBytes += part.length;
    }
  }
}

/**
 * The record of a spooled line once it has ended, counted in the session as the parser
 * counts every line, with a LINE_TOO_LONG warning (once per run) saying what became of it.
 */
export function endSpool(
  run: Session,
  spool: LineSpool,
  lineNo: number,
  terminated: boolean,
  maxLineBytes: number,
  countQuarantined = true,
): SpooledRecord {
  const rec = spool.finish(terminated);
  run.countLines();
  if (rec.reason && countQuarantined) run.countQuarantined(lineNo);
  const fate = rec.reason
    ? 'it is not a JSON object and was kept in the quarantine file'
    : 'it was routed byte for byte from a spool file; transcripts show only its start';
  run.warn('LINE_TOO_LONG', `line ${lineNo} is longer than ${maxLineBytes} bytes: ${fate}`);
  return rec;
}

function spoolAt(path: string, bytes: number): Spool {
  return {
    path,
    bytes,
    copy(write) {
      let fd: number;
      try {
        fd = openSync(path, 'r');
      } catch (err) {
        throw writeFailed(path, err);
      }
      const buf = Buffer.allocUnsafe(Math.min(COPY_BYTES, Math.max(1, bytes)));
      try {
        for (let at = 0; at < bytes;) {
          const n = readSync(fd, buf, 0, Math.min(buf.length, bytes - at), at);
          if (n === 0) throw new Error(`${path} ended after ${at} of ${bytes} bytes`);
          write(buf.subarray(0, n));
          at += n;
        }
      } finally {
        closeSync(fd);
      }
    },
    release() {
      live.delete(path);
      try {
        unlinkSync(path);
      } catch {
        // Already gone.
      }
    },
  };
}
