import { join } from 'node:path';

/**
 * Every failure subtee reports on purpose is a SubteeError with a stable `code` and the
 * process exit code it maps to. Tests and embedders check `code`; messages may change.
 */
export const EXIT = Object.freeze({
  OK: 0,
  /** An unexpected internal error (a bug): reported with its code, never a stack trace. */
  INTERNAL: 1,
  /** Bad command line, bad config, missing plugin. */
  USAGE: 2,
  /** The output folder or input file cannot be used, or a write failed (disk full…). */
  IO: 3,
  /** `--require-version` refused the agent's version. */
  VERSION: 4,
  /** The idle watchdog fired (same code as timeout(1)). */
  STALL: 124,
  SIGINT: 130,
  SIGTERM: 143,
});

export class SubteeError extends Error {
  readonly code: string;
  readonly exitCode: number;
  constructor(code: string, message: string, options: { exitCode?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'SubteeError';
    this.code = code;
    this.exitCode = options.exitCode ?? EXIT.INTERNAL;
  }
}

export class UsageError extends SubteeError {
  constructor(code: string, message: string, cause?: unknown) {
    super(code, message, { exitCode: EXIT.USAGE, cause });
    this.name = 'UsageError';
  }
}

export class OutputError extends SubteeError {
  readonly path: string;
  constructor(code: string, path: string, message: string, cause?: unknown) {
    super(code, message, { exitCode: EXIT.IO, cause });
    this.name = 'OutputError';
    this.path = path;
  }
}

/**
 * System error codes in words, for error lines and warnings: `no such file`, not `ENOENT`.
 * A code not listed here is said as the system describes it (`EXDEV: cross-device link not
 * permitted, …` gives `cross-device link not permitted`), and only then by its code.
 */
const SYSTEM_REASONS: Readonly<Record<string, string>> = Object.freeze({
  ENOENT: 'no such file',
  ENOTDIR: 'a part of its path is a file, not a folder',
  EISDIR: 'it is a folder, not a file',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'the file system is read-only',
  ENOSPC: 'no space left on device',
  EDQUOT: 'the disk quota is used up',
  EMFILE: 'too many open files (ulimit -n)',
  ENFILE: 'too many open files on this machine',
  ENAMETOOLONG: 'the name is too long',
  EEXIST: 'it already exists',
  EIO: 'an input/output error (a failing disk or a dropped mount?)',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'the host name cannot be looked up now',
  EADDRINUSE: 'the address is already in use',
  EADDRNOTAVAIL: "the address is not one of this machine's",
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'the connection was reset',
  ETIMEDOUT: 'timed out',
});

/**
 * Why a system call failed, in words (see SYSTEM_REASONS); `own` words a code the way the
 * caller's context needs (a link refused for a write, say) before the general words do.
 */
export function systemReason(err: unknown, own: Readonly<Record<string, string>> = {}): string {
  const e = err as NodeJS.ErrnoException | null | undefined;
  const code = typeof e?.code === 'string' ? e.code : undefined;
  if (code !== undefined && Object.hasOwn(own, code)) return own[code];
  if (code !== undefined && Object.hasOwn(SYSTEM_REASONS, code)) return SYSTEM_REASONS[code];
  const described = typeof e?.message === 'string' ? /^[A-Z][A-Z0-9_]*: ([^,]+)/.exec(e.message) : null;
  if (described) return described[1];
  return code ?? (typeof e?.message === 'string' ? e.message : String(err));
}

const WRITE_FAILURES: Record<string, string> = {
  ENOSPC: 'no space left on device',
  ELOOP: 'it is a symbolic link, and subtee does not write through links',
  ENXIO: 'it is a named pipe with no reader',
  EAGAIN: 'its reader stopped reading (a pipe that took nothing for 10 s)',
  ENOTREG: 'it is not a regular file (a named pipe or a device)',
  EHARDLINK: 'it is a hard link (a file with other names), and subtee does not write through links',
  EREPLACED: 'it was replaced by something else during the run',
  EREMOVED: 'it was removed during the run',
};

/** How many input lines a failed output left out of the folder, in words. */
export function unwrittenText(input: { lines: number; unwritten: number }): string {
  return `${input.unwritten} of ${input.lines} input lines not written`;
}

/** Wraps a Node fs error as an OutputError naming the path, keeping the original as cause. */
export function writeFailed(path: string, err: unknown): OutputError {
  const why = systemReason(err, WRITE_FAILURES);
  return new OutputError('ERR_WRITE', path, `cannot write ${path}: ${why}`, err);
}

/** A folder that already holds files, refused without `--force`; `named` as the refusal names it. */
export function outNotEmpty(out: string, named = `--out ${out}`): OutputError {
  const why = 'already holds files (a previous run?); choose a new folder or pass --force';
  return new OutputError('ERR_OUT_NOT_EMPTY', out, `${named} ${why}`);
}

/**
 * A folder another run is writing (its lock, `.subtee-lock`, names a live process), refused
 * with or without `--force`. A lock from another host cannot be checked from here, and says so.
 */
export function outBusy(out: string, named: string, pid: number | null, host: string | null): OutputError {
  const who = pid === null ? '' : host === null ? ` (pid ${pid})` : ` (pid ${pid} on host ${host})`;
  const then =
    host === null
      ? 'wait for it to end or choose another folder'
      : `it cannot be checked from this host; if that run is gone, remove ${join(out, '.subtee-lock')}`;
  const what = `${named} is being written by another subtee run${who}`;
  return new OutputError('ERR_OUT_BUSY', out, `${what}; ${then}`);
}
