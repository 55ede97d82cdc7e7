import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmdirSync,
  statSync,
  unlinkSync,
  writeSync,
  type Stats,
} from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';

/**
 * Opening the files subtee writes without ever writing somewhere else. An output folder may
 * hold entries planted by someone else (a link to a file outside it, a named pipe, a hard
 * link): every open refuses to follow a link at the last step (O_NOFOLLOW), never blocks on a
 * pipe (O_NONBLOCK), and checks what it got before writing.
 */
const O_NOFOLLOW = constants.O_NOFOLLOW ?? 0;
const O_NONBLOCK = constants.O_NONBLOCK ?? 0;
const NEW = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | O_NOFOLLOW | O_NONBLOCK;
const APPEND = constants.O_WRONLY | constants.O_APPEND | O_NOFOLLOW | O_NONBLOCK;
const READ = constants.O_RDONLY | O_NOFOLLOW | O_NONBLOCK;

/** The identity of a file subtee created, so a reopen can tell it is still the same file. */
export interface FileIdentity {
  dev: number;
  ino: number;
}

function errno(code: string, message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code });
}

/**
 * Creates a new regular file. With `replace`, whatever entry already has the name (a file, a
 * link, a pipe) is removed first: the entry itself, never what a link points to; a folder is
 * not removed. Without it an existing entry fails with EEXIST.
 */
export function createNewFile(path: string, replace: boolean): { fd: number; id: FileIdentity } {
  let fd: number;
  try {
    fd = openSync(path, NEW, 0o644);
  } catch (err) {
    if (!replace || (err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    if (lstatSync(path).isDirectory()) throw errno('EISDIR', `${path} is a folder`);
    unlinkSync(path);
    fd = openSync(path, NEW, 0o644);
  }
  const st = fstatSync(fd);
  return { fd, id: { dev: smallInteger(st.dev), ino: smallInteger(st.ino) } };
}

/**
 * A stat figure as a small integer where it is one. `fs.Stats` figures are doubles, and an
 * object whose field once held a double keeps every value of that field in a box of its own:
 * 32 bytes per output file (a channel has two) that no run of 10,000 subagents needs.
 */
const smallInteger = (n: number): number => (n === (n | 0) ? n | 0 : n);

/** Writes all of `bytes`: one writeSync may write fewer than it was given. */
export function writeAllSync(fd: number, bytes: Uint8Array): void {
  for (let at = 0; at < bytes.length;) at += writeSync(fd, bytes, at, bytes.length - at);
}

/**
 * Replaces `path` atomically: a fresh `path.tmp` (whatever had that name is replaced, never
 * written through), then one rename, so a reader sees the old file or the new one. A write
 * that fails (a full disk) leaves no temporary file behind.
 */
export function replaceFile(path: string, data: string | Buffer): void {
  replaceFileWith(path, (fd) => writeAllSync(fd, typeof data === 'string' ? Buffer.from(data) : data));
}

/** As `replaceFile`, the content written by `write` to the temporary file's descriptor. */
export function replaceFileWith(path: string, write: (fd: number) => void): void {
  const temporary = `${path}.tmp`;
  try {
    const { fd } = createNewFile(temporary, true);
    try {
      write(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temporary, path);
  } catch (err) {
    try {
      unlinkSync(temporary);
    } catch {
      // Never created, or already gone.
    }
    throw err;
  }
}

/**
 * Opens a file of an output folder for reading: a link is refused (ELOOP), and so is anything
 * but a regular file (ENOTREG): a named pipe would block the reader, a device never ends.
 */
export function openRegularForRead(path: string): number {
  return onlyRegular(path, openSync(path, READ));
}

/**
 * Opens `relative` (a file inside the folder `root`) as openRegularForRead does, and refuses
 * (ELOOP) a folder on the way that is a link: O_NOFOLLOW only guards the last step, and an
 * `agents` folder replaced by a link would show the files of another folder.
 */
export function openRegularUnder(root: string, relative: string): number {
  const path = resolve(root, relative);
  for (let dir = dirname(path); dir.startsWith(resolve(root) + sep); dir = dirname(dir))
    if (lstatSync(dir).isSymbolicLink()) throw errno('ELOOP', `${dir} is a symbolic link`);
  return openRegularForRead(path);
}

/**
 * Opens a file of a run folder subtee wrote, as openRegularUnder does, and refuses (EHARDLINK)
 * one with other names: a hard link planted as `agents/x.jsonl` would put a file from outside
 * the folder in its report.
 */
export function openRunFile(root: string, relative: string): number {
  const fd = openRegularUnder(root, relative);
  try {
    return notHardLinked(join(root, relative), fd);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EHARDLINK') closeSync(fd);
    throw err;
  }
}

/** The descriptor when it is a regular file's; otherwise it is closed and ENOTREG thrown. */
function onlyRegular(path: string, fd: number): number {
  let regular: boolean;
  try {
    regular = fstatSync(fd).isFile();
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  if (regular) return fd;
  closeSync(fd);
  throw errno('ENOTREG', `${path} is not a regular file`);
}

/**
 * A folder subtee opens files in, as the run found it after preparing it: its device and
 * inode. O_NOFOLLOW guards only the last step of a path, so a folder on the way replaced by a
 * link (`agents/` pointing outside the output folder) would have files created and written
 * there; each open checks the folder's name still holds this folder (`checkFolder`). A folder
 * subtee made is taken with lstat (a link there is not it); `follow` takes it with stat, for
 * the output folder itself, whose name the user chose and may be a link.
 */
export interface FolderPin {
  readonly path: string;
  readonly follow: boolean;
  readonly dev: number;
  readonly ino: number;
}

/** The folder `path` is now: ELOOP when a link has its name (unless `follow`), ENOTDIR for a file. */
export function pinFolder(path: string, follow: boolean): FolderPin {
  const st = follow ? statSync(path) : lstatSync(path);
  if (!st.isDirectory())
    throw errno(st.isSymbolicLink() ? 'ELOOP' : 'ENOTDIR', `${path} is not a folder`);
  return { path, follow, dev: smallInteger(st.dev), ino: smallInteger(st.ino) };
}

/**
 * Throws unless `pin.path` still names the folder pinned: ELOOP when a link now has its name,
 * EREPLACED for another folder or a file, the lstat's own error when nothing has it. Node has
 * no openat: a swap made between this check and the open that follows still goes unseen by
 * it, so a caller checks again once the file is open (see AppendFiles).
 */
export function checkFolder(pin: FolderPin): void {
  const st = pin.follow ? statSync(pin.path) : lstatSync(pin.path);
  if (st.isDirectory() && st.dev === pin.dev && st.ino === pin.ino) return;
  throw errno(st.isSymbolicLink() ? 'ELOOP' : 'EREPLACED', `${pin.path} was replaced during the run`);
}

/**
 * Throws EREPLACED unless `path` still names the file subtee created (`id`), EREMOVED when
 * nothing does: a file replaced or removed while it was open takes no error on write, the
 * lines going to a file no name leads to any more.
 */
export function checkStillThere(path: string, id: FileIdentity): void {
  let st: Stats;
  try {
    st = lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    throw errno('EREMOVED', `${path} was removed during the run`);
  }
  if (st.isFile() && st.dev === id.dev && st.ino === id.ino) return;
  throw errno('EREPLACED', `${path} was replaced during the run`);
}

/** Reopens a file subtee created, for append; fails if the name now holds anything else. */
export function reopenFile(path: string, id: FileIdentity): number {
  const fd = openSync(path, APPEND);
  const st = fstatSync(fd);
  if (st.isFile() && st.dev === id.dev && st.ino === id.ino) return fd;
  closeSync(fd);
  throw errno('EREPLACED', `${path} was replaced during the run`);
}

/**
 * Opens a log file for append, creating it if missing: a link is refused, a pipe with no
 * reader fails at once (ENXIO) instead of blocking, a device such as /dev/full is allowed, a
 * file with other names is refused (EHARDLINK).
 */
export function openLogFile(path: string): number {
  return openLog(path).fd;
}

/** A log file openLog opened, and what the opening made: see `letGoOfLog`. */
export interface OpenedLog {
  readonly path: string;
  readonly fd: number;
  /** The folders made on its way, outermost first. */
  readonly made: readonly string[];
  /** The file, when the opening created it; null when it was there. */
  readonly created: FileIdentity | null;
}

/** openLogFile, saying what it made: the file (when it was not there) and folders on its way. */
export function openLog(path: string): OpenedLog {
  const made = makeDirs(dirname(path));
  let created = true;
  let fd: number;
  try {
    fd = openSync(path, APPEND | constants.O_CREAT | constants.O_EXCL, 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    created = false;
    fd = openSync(path, APPEND | constants.O_CREAT, 0o644);
  }
  let st: Stats;
  try {
    st = fstatSync(fd);
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  if (st.isDirectory()) {
    closeSync(fd);
    throw errno('EISDIR', `${path} is a folder`);
  }
  const id = created ? { dev: smallInteger(st.dev), ino: smallInteger(st.ino) } : null;
  return { path, fd: notHardLinked(path, fd, st), made, created: id };
}

/**
 * Closes a log file openLog opened and nothing was written to, and removes what the opening
 * made: the file if it created it (the same file, still empty), then the folders it made that
 * are still empty. Never fails: what cannot be removed stays.
 */
export function letGoOfLog(log: OpenedLog): void {
  try {
    closeSync(log.fd);
    const st = log.created && lstatSync(log.path);
    if (st && st.isFile() && st.size === 0 && st.dev === log.created!.dev && st.ino === log.created!.ino)
      unlinkSync(log.path);
  } catch {
    // Already closed, replaced or gone: left as it is.
  }
  removeEmptyFolders(log.made);
}

/** Removes folders (outermost first in `made`) that are still empty, innermost first. */
export function removeEmptyFolders(made: readonly string[]): void {
  for (const dir of [...made].reverse()) {
    try {
      rmdirSync(dir);
    } catch {
      // Not empty (someone wrote there) or gone: left as it is, and so are its parents.
      return;
    }
  }
}

/**
 * The descriptor of a file appended to, unless the file has other names: a hard link planted
 * under the name would have subtee's lines appended to a file outside the folder.
 */
function notHardLinked(path: string, fd: number, st: Stats = fstatSync(fd)): number {
  if (!st.isFile() || st.nlink <= 1) return fd;
  closeSync(fd);
  throw errno('EHARDLINK', `${path} is a hard link`);
}

/**
 * Opens a data file for append, creating it if missing: a link is refused (ELOOP), and so is
 * anything but a regular file (ENOTREG), a pipe without blocking on it, and a file with other
 * names (EHARDLINK).
 */
export function openDataFileForAppend(path: string): number {
  const fd = onlyRegular(path, openSync(path, APPEND | constants.O_CREAT, 0o644));
  try {
    return notHardLinked(path, fd);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EHARDLINK') closeSync(fd);
    throw err;
  }
}

/**
 * `mkdir -p` as a loop over the missing components, each created on its own. Node's
 * recursive mkdirSync spins forever under a path that cannot be created (`/proc/…`);
 * this fails there with the first component's error. Returns the folders it made, outermost
 * first.
 */
export function makeDirs(path: string): string[] {
  const missing: string[] = [];
  for (let at = resolve(path); ; at = dirname(at)) {
    try {
      if (statSync(at).isDirectory()) break;
      throw errno('ENOTDIR', `${at} is not a folder`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || dirname(at) === at) throw err;
      missing.push(at);
    }
  }
  const made: string[] = [];
  for (const dir of missing.reverse()) {
    try {
      mkdirSync(dir);
      made.push(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  return made;
}

/** Descriptors kept for everything but output files: Node's own, stdio, pino, a config, a child. */
const DESCRIPTOR_MARGIN = 32;

/**
 * The open-file budget that fits under the process's real limit (`ulimit -n`, read from
 * /proc/self/limits where there is one): the limit less a margin, between 4 and `ceiling`.
 */
export function descriptorBudget(ceiling: number, limits = '/proc/self/limits'): number {
  let soft: number | null = null;
  try {
    const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(readFileSync(limits, 'utf8'));
    if (m && m[1] !== 'unlimited') soft = Number(m[1]);
  } catch {
    // No /proc (macOS…): the files sink also shrinks its budget on EMFILE.
  }
  if (soft === null) return ceiling;
  return Math.max(4, Math.min(ceiling, soft - DESCRIPTOR_MARGIN));
}
