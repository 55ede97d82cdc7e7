import type { OpenedLog } from '../../safe-open.js';
import type { IndexReserve } from './index-reserve.js';
import type { OutLock } from './out-lock.js';

/** An output folder made ready as the files sink makes it ready (`prepareOutput`). */
export interface PreparedOut {
  readonly out: string;
  /** index.json's room (`index.json.tmp`), open in it. */
  readonly reserve: IndexReserve;
  /** The folders the preparing made (the folder itself, `agents`), outermost first. */
  readonly made: readonly string[];
  /** The folder's lock (`.subtee-lock`), held until the run's index.json is written. */
  readonly lock: OutLock;
}

/**
 * Where a chain writes, made ready before its input starts: `subtee run` makes it ready before
 * it starts the command, so that a folder or a file that cannot be written refuses the run
 * before the agent does anything. Each sink takes what is its own when the chain makes it, and
 * opens nothing again.
 */
export interface PreparedWrites {
  /** The files sink's output folder `out`, when it was made ready (and not taken yet). */
  takeOut(out: string): PreparedOut | undefined;
  /** The pino sink's log file `path`, open, when it was (and not taken yet). */
  takeLog(path: string): OpenedLog | undefined;
}

/** What `prepareWrites` made ready; `release` lets go of what no sink took. */
export interface PreparedRun extends PreparedWrites {
  release(): void;
}
