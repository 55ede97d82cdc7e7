import { letGoOfLog, openLog, type OpenedLog } from '../safe-open.js';
import { writeFailed } from '../errors.js';
import type { ChainSpec } from './chain.js';
import { FILES_SINK_DEFAULTS, prepareOutput, releaseOutput } from './sinks/files.js';
import { PINO_SINK_DEFAULTS } from './sinks/pino-options.js';
import type { PreparedOut, PreparedRun } from './sinks/prepared.js';

/**
 * Makes ready where a chain writes before its input starts: the files sink's output folder, as
 * the sink makes it ready (checked, made, index.json's room taken), then the pino sink's log
 * file, opened. A folder or a file that cannot be used fails here (ERR_OUT_NOT_EMPTY,
 * ERR_OUT_NOT_DIR, ERR_WRITE), and what was made ready before it is let go. Each is opened
 * once: the chain hands it to its sink (`ChainOptions`' `prepared`), which opens nothing again.
 */
export function prepareWrites(spec: ChainSpec): PreparedRun {
  let out: PreparedOut | null = null;
  let log: OpenedLog | null = null;
  const files = spec.sinks.find((c) => c.use === 'files');
  if (files && typeof files.out === 'string') {
    const force = (files.force as boolean | undefined) ?? FILES_SINK_DEFAULTS.force;
    out = prepareOutput(files.out, force);
  }
  const pino = spec.sinks.find((c) => c.use === 'pino');
  const path = String(pino?.destination ?? PINO_SINK_DEFAULTS.destination);
  if (pino && pino.transport === undefined && path !== '-') {
    try {
      log = openLog(path);
    } catch (err) {
      if (out) releaseOutput(out);
      throw writeFailed(path, err);
    }
  }
  return {
    takeOut(path) {
      if (out?.out !== path) return undefined;
      const taken = out;
      out = null;
      return taken;
    },
    takeLog(path) {
      if (log?.path !== path) return undefined;
      const taken = log;
      log = null;
      return taken;
    },
    release() {
      if (log) letGoOfLog(log);
      if (out) releaseOutput(out);
      log = out = null;
    },
  };
}
