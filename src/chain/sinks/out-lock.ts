import { randomBytes } from 'node:crypto';
import { closeSync, linkSync, lstatSync, readSync, renameSync, unlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { outBusy, outNotEmpty } from '../../errors.js';
import { createNewFile, openRegularForRead, writeAllSync, type FileIdentity } from '../../safe-open.js';
import { processAlive } from '../../process-alive.js';

/**
 * The entry a run holds in its output folder while it writes there: a small file naming the
 * run's process (`{"pid":…,"host":…}`). Two runs into one folder would clear each other's files
 * (`--force`) or interleave their lines; the second is refused instead (ERR_OUT_BUSY). A lock
 * whose process is gone (a run killed with SIGKILL, a power loss) holds nothing: the folder is
 * refused as one holding files, and taken over with `--force`.
 */
export const OUT_LOCK_NAME = '.subtee-lock';

/** A lock this process holds: its path, and the file it created there. */
export interface OutLock {
  readonly path: string;
  readonly id: FileIdentity;
}

/** What a folder's lock entry says of the run holding it; `pid` null when it is no lock subtee wrote. */
interface LockHolder {
  readonly pid: number | null;
  readonly host: string | null;
  readonly id: FileIdentity;
}

/** Locks not released yet, removed at exit (process.exit, an uncaught throw) whatever the chain did. */
const held = new Set<OutLock>();
let exitHook = false;

/** The lock entry of folder `out`. */
export const outLockPath = (out: string): string => join(out, OUT_LOCK_NAME);

/**
 * Refuses (ERR_OUT_BUSY) a folder whose lock a live run holds, before anything is checked or
 * written there. `named` is how the refusal names the folder (`--out logs`).
 */
export function refuseIfBusy(out: string, named = `--out ${out}`): void {
  const holder = lockHolder(outLockPath(out));
  if (holder !== null && holdsFolder(holder)) throw outBusy(out, named, holder.pid, otherHost(holder));
}

/**
 * Takes the lock of folder `out` (which exists) for this process: created exclusively, never
 * through a link planted under its name. A lock a live run holds refuses the run (ERR_OUT_BUSY);
 * a stale one is taken over with `force`, else the folder is refused as holding files. When two
 * runs take over one stale lock at once, one wins and the other is refused.
 */
export function takeOutLock(out: string, force: boolean, named = `--out ${out}`): OutLock {
  const path = outLockPath(out);
  for (let attempt = 0; ; attempt++) {
    const lock = createLock(path);
    if (lock !== null) {
      hold(lock);
      return lock;
    }
    const holder = lockHolder(path);
    // Released between the two steps: try again.
    if (holder === null) {
      if (attempt < 2) continue;
      throw outBusy(out, named, null, null);
    }
    if (holdsFolder(holder)) throw outBusy(out, named, holder.pid, otherHost(holder));
    if (!force) throw outNotEmpty(out, named);
    // Another run took it over first: refused, its lock left in place.
    if (attempt >= 1 || !removeStale(path, holder.id)) throw outBusy(out, named, null, null);
  }
}

/** Removes the lock this process holds (only the file it created). Never fails. */
export function releaseOutLock(lock: OutLock): void {
  if (!held.delete(lock)) return;
  try {
    const st = lstatSync(lock.path);
    if (st.isFile() && st.dev === lock.id.dev && st.ino === lock.id.ino) unlinkSync(lock.path);
  } catch {
    // Gone, or no longer ours: left as it is.
  }
}

function hold(lock: OutLock): void {
  held.add(lock);
  if (exitHook) return;
  exitHook = true;
  process.once('exit', () => {
    for (const lock of [...held]) releaseOutLock(lock);
  });
}

/** File systems without hard links (FAT, some network shares) fail `link` with these. */
const NO_HARD_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EXDEV']);

/**
 * Creates the lock with its content whole before its name appears: a temporary file, written,
 * then hard-linked under the lock's name (which, as an exclusive create, fails when the name is
 * taken, link or not), so a run reading the lock never finds it empty. Null when it is taken.
 */
function createLock(path: string): OutLock | null {
  const content = Buffer.from(JSON.stringify({ pid: process.pid, host: hostname() }) + '\n');
  const temporary = `${path}-${process.pid}-${randomBytes(6).toString('hex')}`;
  const { fd, id } = createNewFile(temporary, false);
  try {
    try {
      writeAllSync(fd, content);
    } finally {
      closeSync(fd);
    }
    linkSync(temporary, path);
    return { path, id };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (code === 'EEXIST') return null;
    if (NO_HARD_LINKS.has(code)) return createLockInPlace(path, content);
    throw err;
  } finally {
    try {
      unlinkSync(temporary);
    } catch {
      // Already gone.
    }
  }
}

/** The lock created under its own name, then written: where there are no hard links. */
function createLockInPlace(path: string, content: Buffer): OutLock | null {
  let created;
  try {
    created = createNewFile(path, false);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return null;
    throw err;
  }
  try {
    writeAllSync(created.fd, content);
  } finally {
    closeSync(created.fd);
  }
  return { path, id: created.id };
}

/**
 * Who holds the lock at `path`, null when there is none. An entry subtee did not write (a link,
 * a pipe, a file that names no process) is read as held by nobody: it is never followed, and a
 * forced run replaces it.
 */
function lockHolder(path: string): LockHolder | null {
  let st;
  try {
    st = lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const id = { dev: st.dev, ino: st.ino };
  if (!st.isFile()) return { pid: null, host: null, id };
  let text = '';
  try {
    const fd = openRegularForRead(path);
    try {
      const buf = Buffer.alloc(512);
      text = buf.toString('utf8', 0, readSync(fd, buf, 0, buf.length, 0));
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
  }
  let said: { pid?: unknown; host?: unknown } = {};
  try {
    said = JSON.parse(text) ?? {};
  } catch {
    // Not a lock subtee wrote.
  }
  const pid = Number.isSafeInteger(said.pid) && (said.pid as number) > 0 ? (said.pid as number) : null;
  return { pid, host: typeof said.host === 'string' ? said.host : null, id };
}

/** A lock from another machine cannot be checked from here: it is taken to hold the folder. */
const otherHost = (holder: LockHolder): string | null =>
  holder.host !== null && holder.host !== hostname() ? holder.host : null;

function holdsFolder(holder: LockHolder): boolean {
  if (holder.pid === null) return false;
  return otherHost(holder) !== null || processAlive(holder.pid);
}

/**
 * Removes the stale lock `stale` from `path`: moved aside first (one atomic step), then removed
 * if it is the one judged stale. Another run's lock, taken over in between, is put back and
 * false returned.
 */
function removeStale(path: string, stale: FileIdentity): boolean {
  const aside = `${path}-stale-${process.pid}-${randomBytes(6).toString('hex')}`;
  try {
    renameSync(path, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return true;
    throw err;
  }
  const st = lstatSync(aside);
  const same = st.dev === stale.dev && st.ino === stale.ino;
  if (!same) {
    try {
      linkSync(aside, path);
    } catch {
      // A third run holds the name now: the lock moved aside is lost, its run still refuses
      // none; such a three-way race is left at that.
    }
  }
  unlinkSync(aside);
  return same;
}
