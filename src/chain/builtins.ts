import { definePlugin, Registry, type OptionSpec, type PluginDefinition } from './plugin.js';
import { createChannelRouter } from './stages/channel-router.js';
import {
  createIdleWatchdog,
  IDLE_WATCHDOG_DEFAULTS,
  type IdleWatchdogSettings,
} from './stages/idle-watchdog.js';
import { createLineParser, LINE_PARSER_DEFAULTS } from './stages/line-parser.js';
import { createWorkerLineParser } from './stages/line-parser-worker.js';
import { createInputFormat, INPUT_FORMAT_DEFAULTS, INPUT_FORMATS } from './stages/input-format.js';
import { createObjectSource, OBJECT_SOURCE_DEFAULTS } from './stages/object-source.js';
import {
  createThinkingTruncator,
  THINKING_MODES,
  THINKING_TRUNCATOR_DEFAULTS,
} from './stages/thinking-truncator.js';
import { createVersionGuard } from './stages/version-guard.js';
import { createFilesSink, FILES_SINK_DEFAULTS } from './sinks/files.js';
import { createPinoSink, PINO_SINK_DEFAULTS } from './sinks/pino.js';
import { createOtlpSink, OTLP_PROTOCOLS, OTLP_SINK_DEFAULTS, type OtlpSinkOptions } from './sinks/otlp.js';
import {
  CLICKHOUSE_SINK_DEFAULTS,
  createClickHouseSink,
  type ClickHouseSinkOptions,
} from './sinks/clickhouse.js';
import { createReportSink, type ReportSinkOptions } from '../views/report/sink.js';
import { REPORT_DEFAULTS } from '../views/report/model.js';
import { createStdoutSink, STDOUT_MODES, STDOUT_SINK_DEFAULTS } from './sinks/stdout.js';
import { isValidRange } from '../semver.js';

const KIT = '^0.1.0';

const STALL_ACTIONS = ['fail', 'warn'] as const;

export const lineParser = definePlugin<{ maxLineBytes?: number; worker?: boolean }>({
  name: 'line-parser',
  kind: 'stage',
  kit: KIT,
  options: {
    maxLineBytes: {
      type: 'integer',
      min: 1024,
      default: LINE_PARSER_DEFAULTS.maxLineBytes,
      description:
        'longest line held in memory; longer lines are spooled to a file in --out and routed from there',
    },
    worker: {
      type: 'boolean',
      default: false,
      description: 'check long lines on a worker thread while the main thread routes and writes',
    },
  },
  input: () => 'bytes',
  create: ({ worker, ...o }, ctx) =>
    (worker ? createWorkerLineParser : createLineParser)({ ...o, session: ctx.session }),
});

export const objectSource = definePlugin<{ maxBatch?: number }>({
  name: 'object-source',
  kind: 'stage',
  kit: KIT,
  options: {
    maxBatch: {
      type: 'number',
      min: 1,
      description: `objects handed on together at most when they queue up (default ${OBJECT_SOURCE_DEFAULTS.maxBatch})`,
    },
  },
  input: () => 'objects',
  create: (o, ctx) => createObjectSource({ ...o, session: ctx.session }),
});

export const inputFormat = definePlugin<{ format?: (typeof INPUT_FORMATS)[number]; spawnTools?: string[] }>({
  name: 'input-format',
  kind: 'stage',
  kit: KIT,
  options: {
    format: {
      type: 'string',
      choices: INPUT_FORMATS,
      default: INPUT_FORMAT_DEFAULTS.format,
      description:
        'claude (stream-json, Agent SDK messages), langgraph (protocol events), or auto: decided from the first line',
    },
    spawnTools: {
      type: 'array',
      description: 'langgraph: tools whose calls start subagents (default ["task"])',
    },
  },
  create: (o, ctx) => createInputFormat({ ...o, session: ctx.session }),
});

export const versionGuard = definePlugin<{ requireVersion?: string }>({
  name: 'version-guard',
  kind: 'stage',
  kit: KIT,
  options: {
    requireVersion: {
      type: 'string',
      check: (v: string) => (isValidRange(v) ? null : 'must be a version range such as ">=2.1.219"'),
      description: 'refuse an agent whose version is not in this range, e.g. ">=2.1.219" (exit 4)',
    },
  },
  create: (o, ctx) => createVersionGuard({ ...o, session: ctx.session }),
});

export const channelRouter = definePlugin<Record<string, never>>({
  name: 'channel-router',
  kind: 'stage',
  kit: KIT,
  options: {},
  create: (_o, ctx) => createChannelRouter({ session: ctx.session }),
});

export const thinkingTruncator = definePlugin<{ mode?: (typeof THINKING_MODES)[number]; maxChars?: number }>({
  name: 'thinking-truncator',
  kind: 'stage',
  kit: KIT,
  options: {
    mode: {
      type: 'string',
      choices: THINKING_MODES,
      default: THINKING_TRUNCATOR_DEFAULTS.mode,
      description:
        'thinking in transcripts: keep, truncate, drop, or file (full text in <channel>.thinking.log)',
    },
    maxChars: {
      type: 'integer',
      min: 0,
      default: THINKING_TRUNCATOR_DEFAULTS.maxChars,
      description: 'characters of each thinking block kept in truncate mode',
    },
  },
  create: (o, ctx) => createThinkingTruncator({ ...o, session: ctx.session }),
});

/** A whole number of milliseconds from the environment, as Claude Code reads it. */
function envMs(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const value = env[name];
  return value !== undefined && /^\d+$/.test(value) && Number.isSafeInteger(Number(value))
    ? Number(value)
    : undefined;
}

/**
 * The agent's own time limits from its environment (the one subtee shares with it under
 * `subtee run`, and usually on a pipe): options given explicitly win over these.
 */
export function waitLimitsFromEnv(env: NodeJS.ProcessEnv): Partial<IdleWatchdogSettings> {
  return {
    modelTimeoutMs: envMs(env, 'API_TIMEOUT_MS'),
    bashDefaultTimeoutMs: envMs(env, 'BASH_DEFAULT_TIMEOUT_MS'),
    bashMaxTimeoutMs: envMs(env, 'BASH_MAX_TIMEOUT_MS'),
    mcpToolTimeoutMs: envMs(env, 'MCP_TOOL_TIMEOUT'),
    bgWaitCeilingMs: envMs(env, 'CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS'),
  };
}

type IdleWatchdogConfig = Partial<Omit<IdleWatchdogSettings, 'mcpToolTimeoutMs'>> & {
  mcpToolTimeoutMs?: number;
};

const msOption = (min: number, fallback: number, description: string): OptionSpec => ({
  type: 'integer',
  min,
  default: fallback,
  description,
});

export const idleWatchdog = definePlugin<IdleWatchdogConfig>({
  name: 'idle-watchdog',
  kind: 'stage',
  kit: KIT,
  options: {
    idleTimeoutMs: msOption(
      1,
      IDLE_WATCHDOG_DEFAULTS.idleTimeoutMs,
      'silence that is a hang when nothing is in flight, and between the events of a streamed message',
    ),
    modelTimeoutMs: msOption(
      1,
      IDLE_WATCHDOG_DEFAULTS.modelTimeoutMs,
      'silence allowed while a model request is in flight; $API_TIMEOUT_MS replaces the default',
    ),
    toolTimeoutMs: msOption(
      1,
      IDLE_WATCHDOG_DEFAULTS.toolTimeoutMs,
      'silence allowed while a tool call other than Bash (and MCP with $MCP_TOOL_TIMEOUT) runs',
    ),
    bashDefaultTimeoutMs: msOption(
      1,
      IDLE_WATCHDOG_DEFAULTS.bashDefaultTimeoutMs,
      'a Bash call without a timeout input; $BASH_DEFAULT_TIMEOUT_MS replaces the default',
    ),
    bashMaxTimeoutMs: msOption(
      1,
      IDLE_WATCHDOG_DEFAULTS.bashMaxTimeoutMs,
      "the most a Bash call's timeout input counts for; $BASH_MAX_TIMEOUT_MS replaces the default",
    ),
    mcpToolTimeoutMs: {
      type: 'integer',
      min: 1,
      description: 'an MCP tool call; default $MCP_TOOL_TIMEOUT, else toolTimeoutMs',
    },
    bgWaitCeilingMs: msOption(
      0,
      IDLE_WATCHDOG_DEFAULTS.bgWaitCeilingMs,
      'silence allowed while background tasks run (0 = no limit); $CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS replaces the default',
    ),
    graceMs: msOption(
      0,
      IDLE_WATCHDOG_DEFAULTS.graceMs,
      "added to every allowance in flight: the agent's own timeout fires first, then it reports",
    ),
    onStall: {
      type: 'string',
      choices: STALL_ACTIONS,
      default: IDLE_WATCHDOG_DEFAULTS.onStall,
      description: 'fail: stop (exit 124, and stop the agent under subtee run); warn: report only',
    },
    checkIntervalMs: msOption(1, IDLE_WATCHDOG_DEFAULTS.checkIntervalMs, 'how often silence is measured'),
  },
  create: (o, ctx) =>
    createIdleWatchdog({ ...waitLimitsFromEnv(ctx.env), ...definedOnly(o), session: ctx.session }),
});

/** The options that were given: an option left undefined must not hide the environment's value. */
function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>;
}

export const filesSink = definePlugin<{
  out: string;
  maxOpenFiles?: number;
  flushBytes?: number;
  force?: boolean;
}>({
  name: 'files',
  kind: 'sink',
  kit: KIT,
  options: {
    out: {
      type: 'string',
      required: true,
      minLength: 1,
      description: 'folder for transcripts and index.json (must be new or empty)',
    },
    maxOpenFiles: {
      type: 'integer',
      min: 4,
      default: FILES_SINK_DEFAULTS.maxOpenFiles,
      defaultVaries: true,
      description:
        'open file handles kept at most (others are reopened for append; the default fits under ulimit -n)',
    },
    flushBytes: {
      type: 'integer',
      min: 1,
      default: FILES_SINK_DEFAULTS.flushBytes,
      description: 'queued bytes that force a write',
    },
    force: {
      type: 'boolean',
      default: FILES_SINK_DEFAULTS.force,
      description:
        'write into an output folder that already holds files (entries of the same names are replaced)',
    },
  },
  create: (o, ctx) => createFilesSink({ ...o, session: ctx.session }),
});

export const stdoutSink = definePlugin<{ mode?: (typeof STDOUT_MODES)[number] }>({
  name: 'stdout',
  kind: 'sink',
  kit: KIT,
  options: {
    mode: {
      type: 'string',
      choices: STDOUT_MODES,
      default: STDOUT_SINK_DEFAULTS.mode,
      description:
        'text: main text + labelled subagent text; main: main text only; raw: input unchanged (tee); none',
    },
  },
  input: (o) => (o.mode === 'raw' ? 'bytes' : 'records'),
  create: (o, ctx) => createStdoutSink({ ...o, session: ctx.session }),
});

export const pinoSink = definePlugin<{
  destination?: string;
  transport?: Record<string, unknown>;
  maxContentChars?: number;
}>({
  name: 'pino',
  kind: 'sink',
  kit: KIT,
  options: {
    destination: {
      type: 'string',
      minLength: 1,
      default: PINO_SINK_DEFAULTS.destination,
      description: 'also log one pino line per event to this file (appended to; - for stdout)',
    },
    transport: {
      type: 'object',
      description:
        'a pino transport config: { "target": …, "options": … }, { "targets": […] } or { "pipeline": […] }',
    },
    maxContentChars: {
      type: 'integer',
      min: 1,
      default: PINO_SINK_DEFAULTS.maxContentChars,
      description: 'longest content per event',
    },
  },
  create: (o, ctx) => createPinoSink({ ...o, session: ctx.session }),
});

export const otlpSink = definePlugin<Omit<OtlpSinkOptions, 'session' | 'env'>>({
  name: 'otlp',
  kind: 'sink',
  kit: KIT,
  options: {
    url: {
      type: 'string',
      description:
        'OTLP/HTTP collector endpoint (/v1/traces is added to a URL without a path); "env" or absent: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318',
    },
    protocol: {
      type: 'string',
      choices: OTLP_PROTOCOLS,
      description:
        'http/protobuf or http/json (default OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)',
    },
    captureContent: {
      type: 'boolean',
      description: 'prompts, reports, tool arguments and results as span attributes (default off)',
    },
    maxContentChars: {
      type: 'number',
      min: 1,
      description: `longest content attribute (default ${OTLP_SINK_DEFAULTS.maxContentChars})`,
    },
    timeoutMs: {
      type: 'number',
      min: 1,
      description: "one export request's timeout (default OTEL_EXPORTER_OTLP_TIMEOUT, else 10000)",
    },
    retryMs: {
      type: 'number',
      min: 0,
      description: `how long a batch of spans is retried before it counts as not delivered (default ${OTLP_SINK_DEFAULTS.retryMs})`,
    },
    flushTimeoutMs: {
      type: 'number',
      min: 0,
      description: `at the end, how long to wait for the last spans (default ${OTLP_SINK_DEFAULTS.flushTimeoutMs})`,
    },
    maxQueueSpans: {
      type: 'number',
      min: 1,
      description: `finished spans held before input waits (default ${OTLP_SINK_DEFAULTS.maxQueueSpans})`,
    },
    maxBatchSpans: {
      type: 'number',
      min: 1,
      description: `spans per export request (default ${OTLP_SINK_DEFAULTS.maxBatchSpans})`,
    },
  },
  create: (o, ctx) => createOtlpSink({ ...o, session: ctx.session, env: ctx.env }),
});

export const clickhouseSink = definePlugin<
  Omit<ClickHouseSinkOptions, 'session' | 'spoolDir'> & { spoolDir?: string }
>({
  name: 'clickhouse',
  kind: 'sink',
  kit: KIT,
  options: {
    url: {
      type: 'string',
      required: true,
      description: 'the HTTP interface, e.g. http://user:password@host:8123 (a path names the database)',
    },
    eventsTable: {
      type: 'string',
      description: `table of one row per input line, created if missing (default ${CLICKHOUSE_SINK_DEFAULTS.eventsTable})`,
    },
    channelsTable: {
      type: 'string',
      description: `table of index.json's channel rows, created if missing (default ${CLICKHOUSE_SINK_DEFAULTS.channelsTable})`,
    },
    runId: {
      type: 'string',
      description: "the run's key in both tables (default: the uuid of the stream's first line)",
    },
    spoolDir: {
      type: 'string',
      description: "where rows wait while the server is away (default the files sink's out folder)",
    },
    resend: {
      type: 'string',
      description:
        "a folder whose spool files (and its subfolders') are sent first: what earlier runs could not send",
    },
    maxContentChars: {
      type: 'number',
      min: 0,
      description: `content prefix kept per row (default ${CLICKHOUSE_SINK_DEFAULTS.maxContentChars})`,
    },
    batchRows: {
      type: 'number',
      min: 1,
      description: `rows per insert (default ${CLICKHOUSE_SINK_DEFAULTS.batchRows})`,
    },
    flushIntervalMs: {
      type: 'number',
      min: 1,
      description: `a partial batch is inserted after this long (default ${CLICKHOUSE_SINK_DEFAULTS.flushIntervalMs})`,
    },
    maxQueueRows: {
      type: 'number',
      min: 1,
      description: `rows held before input waits (default ${CLICKHOUSE_SINK_DEFAULTS.maxQueueRows})`,
    },
    timeoutMs: {
      type: 'number',
      min: 1,
      description: `one request's timeout (default ${CLICKHOUSE_SINK_DEFAULTS.timeoutMs})`,
    },
    maxRetryDelayMs: {
      type: 'number',
      min: 1,
      description: `longest pause between attempts to reach the server again (default ${CLICKHOUSE_SINK_DEFAULTS.maxRetryDelayMs})`,
    },
    flushTimeoutMs: {
      type: 'number',
      min: 0,
      description: `at the end, how long to wait for the last rows (default ${CLICKHOUSE_SINK_DEFAULTS.flushTimeoutMs})`,
    },
  },
  create: (o, ctx) =>
    createClickHouseSink({
      ...o,
      spoolDir: o.spoolDir ?? (() => ctx.session.channelFiles?.out),
      session: ctx.session,
    }),
});

export const reportSink = definePlugin<Omit<ReportSinkOptions, 'session' | 'stderr'>>({
  name: 'report',
  kind: 'sink',
  kit: KIT,
  options: {
    out: {
      type: 'string',
      description: 'the output folder the static report is built from (set from --out by --html)',
    },
    html: {
      type: 'boolean',
      description:
        'write OUT/report.html when the run ends, stalls or is interrupted (list this sink after files)',
    },
    serve: {
      type: 'string',
      description: '[HOST:]PORT to serve the live report on (host 127.0.0.1 unless given; port 0 picks one)',
    },
    quiet: { type: 'boolean', description: 'no line on stderr about the written report' },
    maxPageBytes: {
      type: 'number',
      min: 262144,
      description: `largest page; transcripts are cut to fit (default ${REPORT_DEFAULTS.maxPageBytes})`,
    },
    channelChars: {
      type: 'number',
      min: 0,
      description: `transcript characters per agent at most (default ${REPORT_DEFAULTS.channelChars})`,
    },
  },
  create: (o, ctx) => createReportSink({ ...o, session: ctx.session, stderr: ctx.stderr }),
});

export const BUILTINS: readonly PluginDefinition[] = [
  lineParser,
  objectSource,
  inputFormat,
  versionGuard,
  channelRouter,
  thinkingTruncator,
  idleWatchdog,
  filesSink,
  stdoutSink,
  pinoSink,
  otlpSink,
  clickhouseSink,
  reportSink,
];

export function builtinRegistry(): Registry {
  const r = new Registry();
  for (const def of BUILTINS) r.add(def);
  return r;
}
