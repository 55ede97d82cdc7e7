import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chainProblems, DEFAULT_STAGES, type ChainSpec, type ComponentSpec } from './chain.js';
import { UsageError } from '../errors.js';
import { readSmallText, SmallFileRefused } from '../small-file.js';
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

/**
 * The text of a config file, at most MAX_CONFIG_BYTES (see readSmallText: a device or an
 * endless pipe is never read whole). Errors are ERR_CONFIG_READ, one line.
 */
function readConfigText(path: string): string {
  try {
    return readSmallText(path, MAX_CONFIG_BYTES, 'a config');
  } catch (err) {
    if (!(err instanceof SmallFileRefused)) throw err;
    throw new UsageError('ERR_CONFIG_READ', `cannot read config ${path}: ${err.message}`, err.cause ?? err);
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
