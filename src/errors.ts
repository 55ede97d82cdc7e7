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

const WRITE_FAILURES: Record<string, string> = {
  ENOSPC: 'no space left on device',
  ELOOP: 'it is a symbolic link, and subtee does not write through links',
  ENXIO: 'it is a named pipe with no reader',
  EAGAIN: 'its reader stopped reading (a pipe that took nothing for 10 s)',
  ENOTREG: 'it is not a regular file (a named pipe or a device)',
  EHARDLINK: 'it is a hard link (a file with other names), and subtee does not write through links',
  EREPLACED: 'it was replaced by something else during the run',
};

/** How many input lines a failed output left out of the folder, in words. */
export function unwrittenText(input: { lines: number; unwritten: number }): string {
  return `${input.unwritten} of ${input.lines} input lines not written`;
}

/** Wraps a Node fs error as an OutputError naming the path, keeping the original as cause. */
export function writeFailed(path: string, err: unknown): OutputError {
  const sys = err as NodeJS.ErrnoException;
  const why = (sys?.code && WRITE_FAILURES[sys.code]) ?? sys?.code ?? String(err);
  return new OutputError('ERR_WRITE', path, `cannot write ${path}: ${why}`, err);
}
