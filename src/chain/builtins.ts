import { defineLoadedBuiltin, Registry, supplyCode, type PluginDefinition } from './plugin.js';
import { lineParserPlugin } from './stages/line-parser.js';
import { objectSourcePlugin } from './stages/object-source.js';
import { inputFormatPlugin } from './stages/input-format.js';
import { versionGuardPlugin } from './stages/version-guard.js';
import { channelRouterPlugin } from './stages/channel-router.js';
import { thinkingTruncatorPlugin } from './stages/thinking-truncator.js';
import { idleWatchdogPlugin } from './stages/idle-watchdog.js';
import { filesSinkPlugin } from './sinks/files.js';
import { stdoutSinkPlugin } from './sinks/stdout.js';
import { PINO_SINK_DEFAULTS, pinoSinkDefinition } from './sinks/pino-options.js';
import { otlpSinkDefinition } from './sinks/otlp-options.js';
import { clickhouseSinkDefinition } from './sinks/clickhouse-options.js';
import { reportOptionsProblem, reportSinkDefinition } from './sinks/report-options.js';

// The sinks most runs do not use: their definitions are here at once, their code (and the
// pages, the SDK, the client they load) is imported only by a chain that names them.
export const pinoSinkPlugin = defineLoadedBuiltin(
  {
    ...pinoSinkDefinition,
    // Its own stream to stdout: a reader that stopped reading would hold index.json back.
    indexRole: (o) =>
      o.transport === undefined && (o.destination ?? PINO_SINK_DEFAULTS.destination) === '-'
        ? 'unwaited'
        : 'warns',
  },
  {
    code: () => import('./sinks/pino.js'),
    // A transport target pino would not find refuses the run before anything starts.
    check: (m, o) => m.checkTransportTargets(o.transport),
  },
  (m, o, ctx) =>
    m.createPreparedPinoSink(
      { ...o, session: ctx.session },
      ctx.prepared?.takeLog(o.destination ?? PINO_SINK_DEFAULTS.destination),
    ),
);
const otlpSinkPlugin = defineLoadedBuiltin(
  otlpSinkDefinition,
  { code: () => import('./sinks/otlp.js'), packages: (m) => m.importOtlpSdk() },
  (m, o, ctx) =>
    m.createOtlpSink({ ...o, session: ctx.session, env: ctx.env, inputEnded: ctx.inputEnded }),
);
const clickhouseSinkPlugin = defineLoadedBuiltin(
  clickhouseSinkDefinition,
  {
    code: () => import('./sinks/clickhouse.js'),
    packages: (m) => m.importClickHouseClient(),
    check: (m, o) => m.checkClickHouseUrl(o.url),
  },
  (m, o, ctx) =>
    m.createClickHouseSink({
      ...o,
      spoolDir: o.spoolDir ?? ctx.out,
      session: ctx.session,
      signal: ctx.signal,
    }),
);
const reportSinkPlugin = defineLoadedBuiltin(
  // With `html`, it builds its page from the folder once index.json is written.
  {
    ...reportSinkDefinition,
    indexRole: (o) => (o.html === true ? 'reads' : 'warns'),
    optionsProblem: reportOptionsProblem,
  },
  { code: () => import('./sinks/report.js') },
  (m, o, ctx) =>
    m.createReportSink({ ...o, session: ctx.session, stderr: ctx.stderr, indexWritten: ctx.indexWritten }),
);

/**
 * The built-in stages and sinks, in the order --help and the schema list them. Each one's
 * definition (options, defaults, how it is built) lives beside its factory; the pino, otlp,
 * clickhouse and report sinks' options in a file of their own (`sinks/*-options.ts`).
 */
export const BUILTINS: readonly PluginDefinition[] = [
  lineParserPlugin,
  objectSourcePlugin,
  inputFormatPlugin,
  versionGuardPlugin,
  channelRouterPlugin,
  thinkingTruncatorPlugin,
  idleWatchdogPlugin,
  filesSinkPlugin,
  stdoutSinkPlugin,
  pinoSinkPlugin,
  otlpSinkPlugin,
  clickhouseSinkPlugin,
  reportSinkPlugin,
];

export function builtinRegistry(): Registry {
  const r = new Registry();
  for (const def of BUILTINS) r.add(def);
  return r;
}

/**
 * The registry a chain is built from: the built-in stages and sinks, and what a program's own
 * registry adds to them (as open() reads one), so `new Registry().add(plugin)` runs the plugin
 * among the built-ins. A registry that holds them already (`builtinRegistry().add(…)`) is used as
 * it is; another stage or sink of a built-in's name is ERR_PLUGIN_DUPLICATE.
 */
export function chainRegistry(given?: Registry): Registry {
  if (given !== undefined && BUILTINS.every((def) => given.get(def.name) === def)) return given;
  return builtinsWith(given);
}

/**
 * A new registry of the built-in stages and sinks and what `given` adds to them: the built-in
 * itself in `given` is already there; another of a built-in's name is ERR_PLUGIN_DUPLICATE.
 */
export function builtinsWith(given?: Registry): Registry {
  const registry = builtinRegistry();
  for (const name of given?.names() ?? []) {
    const def = given!.get(name)!;
    if (registry.get(name) !== def) registry.add(def);
  }
  return registry;
}

/** The modules of the built-in sinks whose code is imported only when a chain names them. */
export interface BuiltinSinkCode {
  pino: typeof import('./sinks/pino.js');
  otlp: typeof import('./sinks/otlp.js');
  clickhouse: typeof import('./sinks/clickhouse.js');
  report: typeof import('./sinks/report.js');
}

/**
 * Hands the built-in sinks their code, imported statically by the caller, so that buildChain,
 * which cannot wait, makes any of them (the `subtee/chain` entry does it; the command line
 * imports only the sinks a run names).
 */
export function supplyBuiltinCode(code: BuiltinSinkCode): void {
  supplyCode(pinoSinkPlugin, code.pino);
  supplyCode(otlpSinkPlugin, code.otlp);
  supplyCode(clickhouseSinkPlugin, code.clickhouse);
  supplyCode(reportSinkPlugin, code.report);
}
