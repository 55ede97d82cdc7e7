import { Registry, type PluginDefinition } from './plugin.js';
import { lineParserPlugin } from './stages/line-parser.js';
import { objectSourcePlugin } from './stages/object-source.js';
import { inputFormatPlugin } from './stages/input-format.js';
import { versionGuardPlugin } from './stages/version-guard.js';
import { channelRouterPlugin } from './stages/channel-router.js';
import { thinkingTruncatorPlugin } from './stages/thinking-truncator.js';
import { idleWatchdogPlugin } from './stages/idle-watchdog.js';
import { filesSinkPlugin } from './sinks/files.js';
import { stdoutSinkPlugin } from './sinks/stdout.js';
import { pinoSinkPlugin } from './sinks/pino.js';
import { otlpSinkPlugin } from './sinks/otlp.js';
import { clickhouseSinkPlugin } from './sinks/clickhouse.js';
import { reportSinkPlugin } from './sinks/report.js';

/**
 * The built-in stages and sinks, in the order --help and the schema list them. Each one's
 * definition (options, defaults, how it is built) lives beside its factory.
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
