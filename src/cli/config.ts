import { join } from 'node:path';
import { UsageError } from '../errors.js';
import { builtinRegistry } from '../chain/builtins.js';
import { DEFAULT_STAGES, defaultSpec, type ChainSpec } from '../chain/chain.js';
import {
  checkSpec,
  configPlaces,
  readConfigProblems,
  registerPlugins,
  unusedPlugins,
  withDefaultStages,
} from '../chain/config.js';
import { OPTIONS, type OptionDef, type ParsedOptions } from './options.js';
import { applyReportFlags } from './report-flags.js';
import { checkPinoDestination } from './inputs.js';

/**
 * Applies command-line flags to a chain spec. Without a config every flag applies (defaults
 * included); with one, only flags given on the command line do, overriding the file. A flag
 * for a stage or sink the spec does not have adds it (stages at their default position, sinks
 * at the end, before a pino sink and the files sink before a report sink too; pino itself last).
 */
export function applyFlags(
  spec: ChainSpec,
  o: ParsedOptions,
  fromConfig: boolean,
  table: readonly OptionDef[] = OPTIONS,
): ChainSpec {
  const out: ChainSpec = {
    stages: spec.stages.map((c) => ({ ...c })),
    sinks: spec.sinks.map((c) => ({ ...c })),
  };
  const order = DEFAULT_STAGES.map((s) => s.use);
  const builtins = builtinRegistry();
  for (const def of table) {
    if (!def.target || o[def.name] === undefined) continue;
    const explicit = o.given.has(def.name);
    if (fromConfig && !explicit) continue;
    if (def.target.use === 'pino' && !explicit) continue;
    const isSink = builtins.get(def.target.use)?.kind === 'sink';
    const list = isSink ? out.sinks : out.stages;
    let c = list.find((x) => x.use === def.target!.use);
    if (!c) {
      c = { use: def.target.use };
      // A sink the flags add goes last, but before pino: what a sink warns when it finishes
      // (OTLP_UNDELIVERED, CLICKHOUSE_SPOOLED) reaches the pino log only from a sink before it.
      // index.json has it wherever the sink is: the files sink writes it once the sinks after
      // it have ended. The files sink (--out) goes before a report sink: the report waits for
      // its index.json.
      const before = isSink && def.target.use === 'files' ? ['report', 'pino'] : ['pino'];
      const at = isSink
        ? list.findIndex((x) => before.includes(x.use))
        : list.findIndex((x) => order.indexOf(x.use) > order.indexOf(def.target!.use));
      if (at === -1) list.push(c);
      else list.splice(at, 0, c);
    }
    c[def.target.key] = o[def.name];
  }
  const clickhouse = out.sinks.find((c) => c.use === 'clickhouse');
  if (clickhouse && clickhouse.url === undefined && o.given.has('clickhouse-resend')) {
    // Said in the flags' terms: the config error would name `sinks[N].url`, which no one wrote.
    throw new UsageError(
      'ERR_USAGE',
      '--clickhouse-resend DIR needs --clickhouse URL: the server to send to',
    );
  }
  const files = out.sinks.find((c) => c.use === 'files');
  const pinoSink = out.sinks.find((c) => c.use === 'pino');
  const bare = OPTIONS.find((d) => d.name === 'pino')!.optionalDefault;
  if (pinoSink && files && pinoSink.destination === bare && typeof files.out === 'string')
    pinoSink.destination = join(files.out, String(bare));
  return out;
}

/**
 * Builds the chain spec from the config file (if any) and the flags, and the registry with its
 * plugins. The config's own problems and the chain's are reported together, in one message.
 */
export async function resolveSpec(o: ParsedOptions) {
  const registry = builtinRegistry();
  let spec: ChainSpec;
  if (typeof o.config !== 'string') {
    spec = applyReportFlags(applyFlags(defaultSpec(String(o.out)), o, false), o);
    checkSpec(spec, registry, 'options');
  } else {
    const read = readConfigProblems(o.config);
    const loaded = await registerPlugins(registry, read.config.plugins, read.baseDir);
    // Checked as the file lists its stages, so that a problem names the entry where it stands.
    const written = { stages: read.listed, sinks: read.config.sinks };
    const listed = applyReportFlags(applyFlags(written, o, true), o);
    const problems = [...read.problems, ...unusedPlugins(listed, loaded)];
    checkSpec(listed, registry, `config ${o.config}`, problems, configPlaces(written, listed));
    spec = { ...listed, stages: withDefaultStages(listed.stages, read.config.leaveOut) };
  }
  // The run's inputs: its files, else stdin; under `subtee run` (a command after --), none.
  const inputs = o.rest.length > 0 ? [] : o._.length > 0 ? o._ : ['-'];
  checkPinoDestination(spec, inputs, o.given.has('pino'));
  return { spec, registry };
}
