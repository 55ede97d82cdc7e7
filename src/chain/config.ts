import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  chainProblems,
  DEFAULT_STAGES,
  OPTIONAL_STAGES,
  type ChainSpec,
  type ComponentSpec,
  type PlaceOf,
} from './chain.js';
import { UsageError } from '../errors.js';
import { readSmallText, SmallFileRefused } from '../small-file.js';
import { loadPlugin, type PluginDefinition, type Registry } from './plugin.js';

export interface Config extends ChainSpec {
  /**
   * Plugin modules to register: paths (relative to the config file), package names, or
   * bundled plugin names.
   */
  plugins: string[];
  /** The default stages not to run (`OPTIONAL_STAGES`); `stages` already leaves them out. */
  leaveOut: string[];
}

const TOP_KEYS = new Set(['$schema', 'stages', 'sinks', 'plugins', 'leaveOut']);

/** Stages that read the input: one of them comes first in every chain. */
const INPUT_EDGES: ReadonlySet<string> = new Set(['line-parser', 'object-source']);

/**
 * A config's stages placed among the default ones: every default stage the list neither names
 * nor `leaveOut` names runs too, right after the default stage before it (its input edge for
 * the first), so a stage the list puts after the line parser sees the lines as the input
 * format made them, as in the default chain. Entries that are not stages stay, for the check.
 */
export function withDefaultStages(
  stages: readonly ComponentSpec[],
  leaveOut: readonly unknown[],
): ComponentSpec[] {
  const order = DEFAULT_STAGES.map((s) => s.use);
  const rank = (c: ComponentSpec) => (INPUT_EDGES.has(c?.use) ? 0 : order.indexOf(c?.use));
  const out = stages.map((c) => (typeof c === 'object' && c !== null ? { ...c } : c));
  order.forEach((use, at) => {
    const named = out.some((c) => (at === 0 ? rank(c) === 0 : c?.use === use));
    if (named || (OPTIONAL_STAGES.includes(use) && leaveOut.includes(use))) return;
    let after = -1;
    out.forEach((c, i) => {
      const r = rank(c);
      if (r >= 0 && r < at) after = i;
    });
    out.splice(after + 1, 0, { use });
  });
  return out;
}

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

/** A config file read and its shape checked: what is wrong with it, not yet thrown. */
export interface ConfigRead {
  config: Config;
  /**
   * Its stages as the file lists them, before the default stages are placed among them: its
   * problems name the entries by their place in this list.
   */
  listed: ComponentSpec[];
  /** The config file's folder: its plugins' paths are relative to it. */
  baseDir: string;
  /** What is wrong with its shape (unknown keys, a section of the wrong type), one each. */
  problems: string[];
}

/**
 * Reads a config file and checks its shape, returning its problems rather than throwing them
 * (a file that cannot be read or is not a JSON object still throws at once): the command line
 * reports them with its chain's, in one message (checkSpec). A section of the wrong type
 * stands in as its default, so the rest is still checked.
 */
export function readConfigProblems(path: string): ConfigRead {
  const text = readConfigText(path);
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new UsageError('ERR_CONFIG', `config ${path} is not valid JSON: ${(err as Error).message}`, err);
  }
  return { ...configShape(data, `config ${path}`), baseDir: dirname(resolve(path)) };
}

/** Reads and checks the shape of a config file. Every problem is reported in one message. */
export function readConfig(path: string): { config: Config; baseDir: string } {
  const { config, baseDir, problems } = readConfigProblems(path);
  if (problems.length > 0) throw new UsageError('ERR_CONFIG', `config ${path}: ${problems.join('; ')}`);
  return { config, baseDir };
}

/** A config's data as a Config, its stages as listed, and what is wrong with its shape. */
export function configShape(
  data: unknown,
  where: string,
): { config: Config; listed: ComponentSpec[]; problems: string[] } {
  if (typeof data !== 'object' || data === null || Array.isArray(data))
    throw new UsageError('ERR_CONFIG', `${where}: must be a JSON object`);
  const problems: string[] = [];
  const d = data as Record<string, unknown>;
  for (const k of Object.keys(d))
    if (!TOP_KEYS.has(k)) problems.push(`${k}: unknown key (known: stages, sinks, plugins, leaveOut)`);
  const plugins = d.plugins === undefined ? [] : Array.isArray(d.plugins) ? d.plugins : null;
  if (plugins === null || !plugins.every((p) => typeof p === 'string'))
    problems.push('plugins: must be a list of module paths or names');
  const list = (k: 'stages' | 'sinks'): ComponentSpec[] | undefined => {
    if (d[k] === undefined || Array.isArray(d[k])) return d[k] as ComponentSpec[] | undefined;
    problems.push(`${k}: must be a list`);
    return undefined;
  };
  const leaveOut = d.leaveOut === undefined ? [] : Array.isArray(d.leaveOut) ? d.leaveOut : null;
  if (leaveOut === null) problems.push('leaveOut: must be a list of default stages');
  for (const use of leaveOut ?? []) {
    if (!OPTIONAL_STAGES.includes(use as string))
      problems.push(`leaveOut: ${JSON.stringify(use)} is not a default stage that can be left out ` +
        `(${OPTIONAL_STAGES.join(', ')})`);
    else if (Array.isArray(d.stages) && d.stages.some((c) => c?.use === use))
      problems.push(`leaveOut: "${use}" is in stages too: keep it in one of them`);
  }
  const listed = list('stages') ?? [];
  const config = {
    stages: withDefaultStages(listed, leaveOut ?? []),
    leaveOut: (leaveOut ?? []).filter((use) => OPTIONAL_STAGES.includes(use)),
    sinks: list('sinks') ?? [],
    // The names in a bad list are still loaded: the stages and sinks they register are checked.
    plugins: (plugins ?? []).filter((p): p is string => typeof p === 'string'),
  };
  return { config, listed, problems };
}

/** A plugin a config loaded: how the config names it, and what it registered. */
export interface LoadedPlugin {
  spec: string;
  def: PluginDefinition;
}

/**
 * Registers the config's plugins; a bare name that matches a bundled plugin loads that one.
 * Resolves with each as loaded, for `unusedPlugins`.
 */
export async function registerPlugins(
  registry: Registry,
  plugins: string[],
  baseDir: string,
): Promise<LoadedPlugin[]> {
  const loaded: LoadedPlugin[] = [];
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
    loaded.push({ spec, def });
  }
  return loaded;
}

/**
 * A problem for each loaded plugin that no stage or sink of the chain uses: loading one does
 * not run it, and the config would leave it out with nothing said.
 */
export function unusedPlugins(spec: ChainSpec, loaded: readonly LoadedPlugin[]): string[] {
  const used = new Set(
    [spec.stages, spec.sinks].flatMap((list) => (Array.isArray(list) ? list.map((c) => c?.use) : [])),
  );
  return loaded
    .filter(({ def }) => !used.has(def.name))
    .map(({ spec: name, def }) => {
      const section = def.kind === 'sink' ? 'sinks' : 'stages';
      return (
        `plugins: ${JSON.stringify(name)} is loaded but runs nowhere: no ${def.kind} uses ` +
        `"${def.name}"; add { "use": "${def.name}" } to ${section}`
      );
    });
}

/**
 * Whether a chain's stages lack the channel router: no line would reach its subagent's file,
 * and index.json would count none of the lines the files sink wrote to main. `open()` refuses
 * such a spec (ERR_ROUTER_REQUIRED); a config's stages always have it (withDefaultStages).
 */
export function lacksRouter(stages: unknown): boolean {
  return Array.isArray(stages) && !stages.some((stage) => stage?.use === 'channel-router');
}

/**
 * How problems name the entries of a config's stages and sinks once flags were applied to them
 * (`applied`): each of the file's by its index in the file (`sinks[1]`), as written, whatever
 * the flags put before it; one the flags added, as such. The flags copy every entry, in order,
 * and add one only of a `use` the list lacks.
 */
export function configPlaces(written: ChainSpec, applied: ChainSpec): PlaceOf {
  const placesIn = (section: 'stages' | 'sinks') => {
    const uses = new Set(written[section].map((c) => c?.use));
    let next = 0;
    return applied[section].map((c) =>
      uses.has(c?.use) ? `${section}[${next++}]` : `${section}[${c.use} from the flags]`,
    );
  };
  const places = { stages: placesIn('stages'), sinks: placesIn('sinks') };
  return (section, index) => places[section][index] ?? `${section}[${index}]`;
}

/**
 * Checks a chain spec as the command line runs it, with `earlier` problems (the config file's
 * own, readConfigProblems), and throws every problem in one message (ERR_CONFIG). `placeOf`
 * names the entries (see chainProblems).
 */
export function checkSpec(
  spec: ChainSpec,
  registry: Registry,
  where: string,
  earlier: string[] = [],
  placeOf?: PlaceOf,
): void {
  const problems = [...earlier, ...chainProblems(spec, registry, placeOf)];
  const stdoutWriters = [
    spec.sinks.some((c) => c.use === 'stdout' && c.mode !== 'none'),
    spec.sinks.some((c) => c.use === 'pino' && (c.destination ?? '-') === '-' && c.transport === undefined),
  ].filter(Boolean).length;
  if (stdoutWriters > 1)
    problems.push('stdout and pino both write to stdout: use --stdout none, or --pino FILE');
  if (problems.length > 0) throw new UsageError('ERR_CONFIG', `${where}: ${problems.join('; ')}`);
}
