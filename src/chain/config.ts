import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chainProblems, DEFAULT_STAGES, type ChainSpec, type ComponentSpec } from './chain.js';
import { UsageError } from '../errors.js';
import { loadPlugin, type Registry } from './plugin.js';

export interface Config extends ChainSpec {
  /**
   * Plugin modules to register: paths (relative to the config file), package names, or
   * bundled plugin names.
   */
  plugins: string[];
}

const TOP_KEYS = new Set(['$schema', 'stages', 'sinks', 'plugins']);

/** The plugins shipped in `plugins/`, loadable by bare name. */
export const BUNDLED_PLUGINS_DIR = fileURLToPath(new URL('../../plugins/', import.meta.url));

/** The largest config read: a chain of every stage and sink is a few kilobytes. */
export const MAX_CONFIG_BYTES = 1024 * 1024;

/** Why a file is not read as a config, or null for a regular file or a named pipe. */
function notReadable(st: Stats): string | null {
  if (st.isFile() || st.isFIFO()) return null;
  if (st.isDirectory()) return 'a folder, not a file';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device, not a file';
  return 'not a regular file';
}

/**
 * The text of a config file, at most MAX_CONFIG_BYTES: a device (`/dev/zero`) is refused
 * without a read, a file or a pipe larger than that once it passes it. A named pipe is
 * opened without blocking (a blocking open waits for a writer in a thread no signal reaches):
 * with no writer it is refused; once a writer is there (`--config <(make-config)`), its data
 * is waited for. Errors are ERR_CONFIG_READ, one line.
 */
function readConfigText(path: string): string {
  const refuse = (why: string, cause?: unknown) =>
    new UsageError('ERR_CONFIG_READ', `cannot read config ${path}: ${why}`, cause);
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    throw refuse((err as NodeJS.ErrnoException).code ?? String(err), err);
  }
  let blocking: number | null = null;
  try {
    const st = fstatSync(fd);
    const why = notReadable(st);
    if (why !== null) throw refuse(why);
    const buf = Buffer.alloc(MAX_CONFIG_BYTES + 1);
    let size = 0;
    while (size <= MAX_CONFIG_BYTES) {
      let n: number;
      try {
        n = readSync(blocking ?? fd, buf, size, buf.length - size, null);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (!st.isFIFO() || code !== 'EAGAIN' || blocking !== null) throw refuse(code ?? String(err), err);
        // A writer is there and has not written yet: it opens at once now.
        blocking = openSync(path, 'r');
        continue;
      }
      if (n === 0) break;
      size += n;
    }
    if (size > MAX_CONFIG_BYTES) throw refuse(`larger than ${MAX_CONFIG_BYTES} bytes, not a config`);
    if (size === 0 && st.isFIFO()) throw refuse('a named pipe with nothing written to it');
    return buf.subarray(0, size).toString('utf8');
  } finally {
    closeSync(fd);
    if (blocking !== null) closeSync(blocking);
  }
}

/** Reads and checks the shape of a config file. Every problem is reported in one message. */
export function readConfig(path: string): { config: Config; baseDir: string } {
  const text = readConfigText(path);
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new UsageError('ERR_CONFIG', `config ${path} is not valid JSON: ${(err as Error).message}`, err);
  }
  return { config: configOf(data, `config ${path}`), baseDir: dirname(resolve(path)) };
}

/** Checks the shape of a config's data (parsed from a file, or given as an object). */
export function configOf(data: unknown, where: string): Config {
  if (typeof data !== 'object' || data === null || Array.isArray(data))
    throw new UsageError('ERR_CONFIG', `${where}: must be a JSON object`);
  const problems: string[] = [];
  const d = data as Record<string, unknown>;
  for (const k of Object.keys(d))
    if (!TOP_KEYS.has(k)) problems.push(`${k}: unknown key (known: stages, sinks, plugins)`);
  if (
    d.plugins !== undefined &&
    (!Array.isArray(d.plugins) || !d.plugins.every((p) => typeof p === 'string'))
  )
    problems.push('plugins: must be a list of module paths or names');
  for (const k of ['stages', 'sinks'])
    if (d[k] !== undefined && !Array.isArray(d[k])) problems.push(`${k}: must be a list`);
  if (problems.length > 0) throw new UsageError('ERR_CONFIG', `${where}: ${problems.join('; ')}`);
  return {
    stages: (d.stages as ComponentSpec[] | undefined) ?? DEFAULT_STAGES.map((s) => ({ ...s })),
    sinks: (d.sinks as ComponentSpec[] | undefined) ?? [],
    plugins: (d.plugins as string[] | undefined) ?? [],
  };
}

/** Registers the config's plugins; a bare name that matches a bundled plugin loads that one. */
export async function registerPlugins(registry: Registry, plugins: string[], baseDir: string): Promise<void> {
  for (const spec of plugins) {
    const bundled = /^[a-z0-9-]+$/.test(spec) ? join(BUNDLED_PLUGINS_DIR, spec, 'index.js') : null;
    let def;
    try {
      def = await loadPlugin(bundled ?? spec, baseDir);
    } catch (err) {
      if (!bundled) throw err;
      def = await loadPlugin(spec, baseDir);
    }
    registry.add(def);
  }
}

export function checkSpec(spec: ChainSpec, registry: Registry, where: string): void {
  const problems = chainProblems(spec, registry);
  const stdoutWriters = [
    spec.sinks.some((c) => c.use === 'stdout' && c.mode !== 'none'),
    spec.sinks.some((c) => c.use === 'pino' && (c.destination ?? '-') === '-' && c.transport === undefined),
  ].filter(Boolean).length;
  if (stdoutWriters > 1)
    problems.push('stdout and pino both write to stdout: use --stdout none, or --pino FILE');
  if (problems.length > 0) throw new UsageError('ERR_CONFIG', `${where}: ${problems.join('; ')}`);
}
