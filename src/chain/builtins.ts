import { definePlugin, Registry, type PluginDefinition } from './plugin.js';
import { createChannelRouter } from './stages/channel-router.js';
import { createIdleWatchdog, IDLE_WATCHDOG_DEFAULTS } from './stages/idle-watchdog.js';
import { createLineParser, LINE_PARSER_DEFAULTS } from './stages/line-parser.js';
import { createInputFormat, INPUT_FORMATS } from './stages/input-format.js';
import { createObjectSource, OBJECT_SOURCE_DEFAULTS } from './stages/object-source.js';
import { createThinkingTruncator, THINKING_MODES, THINKING_TRUNCATOR_DEFAULTS } from './stages/thinking-truncator.js';
import { createVersionGuard } from './stages/version-guard.js';
import { createFilesSink, FILES_SINK_DEFAULTS } from './sinks/files.js';
import { createPinoSink, PINO_SINK_DEFAULTS } from './sinks/pino.js';
import { createOtlpSink, OTLP_PROTOCOLS, OTLP_SINK_DEFAULTS, type OtlpSinkOptions } from './sinks/otlp.js';
import { CLICKHOUSE_SINK_DEFAULTS, createClickHouseSink, type ClickHouseSinkOptions } from './sinks/clickhouse.js';
import { createStdoutSink, STDOUT_MODES } from './sinks/stdout.js';
import { createReportSink, type ReportSinkOptions } from '../views/report/sink.js';
import { REPORT_DEFAULTS } from '../views/report/model.js';

const KIT = '^0.1.0';

export const lineParser = definePlugin<{ maxLineBytes?: number }>({
  name: 'line-parser',
  kind: 'stage',
  kit: KIT,
  options: {
    maxLineBytes: { type: 'number', min: 1024, description: `longest line held in memory; longer ones are quarantined in pieces (default ${LINE_PARSER_DEFAULTS.maxLineBytes})` },
  },
  input: () => 'bytes',
  create: (o, ctx) => createLineParser({ ...o, session: ctx.session }),
});

export const objectSource = definePlugin<{ maxBatch?: number }>({
  name: 'object-source',
  kind: 'stage',
  kit: KIT,
  options: {
    maxBatch: { type: 'number', min: 1, description: `objects handed on together at most when they queue up (default ${OBJECT_SOURCE_DEFAULTS.maxBatch})` },
  },
  input: () => 'objects',
  create: (o, ctx) => createObjectSource({ ...o, session: ctx.session }),
});

export const inputFormat = definePlugin<{ format?: (typeof INPUT_FORMATS)[number]; spawnTools?: string[] }>({
  name: 'input-format',
  kind: 'stage',
  kit: KIT,
  options: {
    format: { type: 'string', choices: INPUT_FORMATS, description: 'claude (stream-json, Agent SDK messages), langgraph (protocol events), or auto: decided from the first line' },
    spawnTools: { type: 'array', description: 'langgraph: tools whose calls start subagents (default ["task"])' },
  },
  create: (o, ctx) => createInputFormat({ ...o, session: ctx.session }),
});

export const versionGuard = definePlugin<{ requireVersion?: string }>({
  name: 'version-guard',
  kind: 'stage',
  kit: KIT,
  options: {
    requireVersion: { type: 'string', description: 'a version range the agent must satisfy, e.g. ">=2.1.219"; otherwise exit 4' },
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
    mode: { type: 'string', choices: THINKING_MODES, description: `keep, truncate, drop or file (default ${THINKING_TRUNCATOR_DEFAULTS.mode})` },
    maxChars: { type: 'number', min: 0, description: `characters kept per thinking block in truncate mode (default ${THINKING_TRUNCATOR_DEFAULTS.maxChars})` },
  },
  create: (o, ctx) => createThinkingTruncator({ ...o, session: ctx.session }),
});

/** CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS as Claude Code reads it, when it is a whole number. */
export function bgCeilingFromEnv(env: NodeJS.ProcessEnv): number | undefined {
  const v = env.CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS;
  return v !== undefined && /^\d+$/.test(v) ? Number(v) : undefined;
}

export const idleWatchdog = definePlugin<{ idleTimeoutMs?: number; bgWaitCeilingMs?: number; drainGraceMs?: number; onStall?: 'fail' | 'warn'; checkIntervalMs?: number }>({
  name: 'idle-watchdog',
  kind: 'stage',
  kit: KIT,
  options: {
    idleTimeoutMs: { type: 'number', min: 1, description: `silence allowed with nothing in flight (default ${IDLE_WATCHDOG_DEFAULTS.idleTimeoutMs})` },
    bgWaitCeilingMs: { type: 'number', min: 0, description: 'silence allowed while background tasks run; 0 = no limit (default CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS or 600000)' },
    drainGraceMs: { type: 'number', min: 0, description: `added to the ceiling for the CLI's exit drain (default ${IDLE_WATCHDOG_DEFAULTS.drainGraceMs})` },
    onStall: { type: 'string', choices: ['fail', 'warn'], description: 'fail: end the run with exit 124; warn: report only' },
    checkIntervalMs: { type: 'number', min: 1, description: `how often silence is measured (default ${IDLE_WATCHDOG_DEFAULTS.checkIntervalMs})` },
  },
  create: (o, ctx) => createIdleWatchdog({ bgWaitCeilingMs: bgCeilingFromEnv(ctx.env), ...o, session: ctx.session }),
});

export const filesSink = definePlugin<{ out: string; maxOpenFiles?: number; flushBytes?: number; force?: boolean }>({
  name: 'files',
  kind: 'sink',
  kit: KIT,
  options: {
    out: { type: 'string', required: true, description: 'output folder (new or empty)' },
    maxOpenFiles: { type: 'number', min: 4, description: `open descriptors kept at most (default ${FILES_SINK_DEFAULTS.maxOpenFiles})` },
    flushBytes: { type: 'number', min: 1, description: `queued bytes that force a write (default ${FILES_SINK_DEFAULTS.flushBytes})` },
    force: { type: 'boolean', description: 'write into a folder that already holds files' },
  },
  create: (o, ctx) => createFilesSink({ ...o, session: ctx.session }),
});

export const stdoutSink = definePlugin<{ mode?: (typeof STDOUT_MODES)[number] }>({
  name: 'stdout',
  kind: 'sink',
  kit: KIT,
  options: {
    mode: { type: 'string', choices: STDOUT_MODES, description: 'text, main, raw or none' },
  },
  input: (o) => (o.mode === 'raw' ? 'bytes' : 'records'),
  create: (o) => createStdoutSink(o),
});

export const pinoSink = definePlugin<{ destination?: string; transport?: Record<string, unknown>; maxContentChars?: number }>({
  name: 'pino',
  kind: 'sink',
  kit: KIT,
  options: {
    destination: { type: 'string', description: `a file, or - for stdout (default ${PINO_SINK_DEFAULTS.destination})` },
    transport: { type: 'object', description: 'a pino transport config: { "target": …, "options": … }, { "targets": […] } or { "pipeline": […] }' },
    maxContentChars: { type: 'number', min: 1, description: `longest content per event (default ${PINO_SINK_DEFAULTS.maxContentChars})` },
  },
  create: (o, ctx) => createPinoSink({ ...o, session: ctx.session }),
});

export const otlpSink = definePlugin<Omit<OtlpSinkOptions, 'session' | 'env'>>({
  name: 'otlp',
  kind: 'sink',
  kit: KIT,
  options: {
    url: { type: 'string', description: 'OTLP/HTTP collector endpoint (/v1/traces is added to a URL without a path); "env" or absent: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318' },
    protocol: { type: 'string', choices: OTLP_PROTOCOLS, description: 'http/protobuf or http/json (default OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)' },
    captureContent: { type: 'boolean', description: 'prompts, reports, tool arguments and results as span attributes (default off)' },
    maxContentChars: { type: 'number', min: 1, description: `longest content attribute (default ${OTLP_SINK_DEFAULTS.maxContentChars})` },
    timeoutMs: { type: 'number', min: 1, description: 'one export request\'s timeout (default OTEL_EXPORTER_OTLP_TIMEOUT, else 10000)' },
    retryMs: { type: 'number', min: 0, description: `how long a batch of spans is retried before it counts as not delivered (default ${OTLP_SINK_DEFAULTS.retryMs})` },
    flushTimeoutMs: { type: 'number', min: 0, description: `at the end, how long to wait for the last spans (default ${OTLP_SINK_DEFAULTS.flushTimeoutMs})` },
    maxQueueSpans: { type: 'number', min: 1, description: `finished spans held before input waits (default ${OTLP_SINK_DEFAULTS.maxQueueSpans})` },
    maxBatchSpans: { type: 'number', min: 1, description: `spans per export request (default ${OTLP_SINK_DEFAULTS.maxBatchSpans})` },
  },
  create: (o, ctx) => createOtlpSink({ ...o, session: ctx.session, env: ctx.env }),
});

export const clickhouseSink = definePlugin<Omit<ClickHouseSinkOptions, 'session' | 'spoolDir'> & { spoolDir?: string }>({
  name: 'clickhouse',
  kind: 'sink',
  kit: KIT,
  options: {
    url: { type: 'string', required: true, description: 'the HTTP interface, e.g. http://user:password@host:8123 (a path names the database)' },
    eventsTable: { type: 'string', description: `table of one row per input line, created if missing (default ${CLICKHOUSE_SINK_DEFAULTS.eventsTable})` },
    channelsTable: { type: 'string', description: `table of index.json's channel rows, created if missing (default ${CLICKHOUSE_SINK_DEFAULTS.channelsTable})` },
    runId: { type: 'string', description: 'the run\'s key in both tables (default: the uuid of the stream\'s first line)' },
    spoolDir: { type: 'string', description: 'where rows wait while the server is away (default the files sink\'s out folder)' },
    resend: { type: 'string', description: 'a folder whose spool files (and its subfolders\') are sent first: what earlier runs could not send' },
    maxContentChars: { type: 'number', min: 0, description: `content prefix kept per row (default ${CLICKHOUSE_SINK_DEFAULTS.maxContentChars})` },
    batchRows: { type: 'number', min: 1, description: `rows per insert (default ${CLICKHOUSE_SINK_DEFAULTS.batchRows})` },
    flushIntervalMs: { type: 'number', min: 1, description: `a partial batch is inserted after this long (default ${CLICKHOUSE_SINK_DEFAULTS.flushIntervalMs})` },
    maxQueueRows: { type: 'number', min: 1, description: `rows held before input waits (default ${CLICKHOUSE_SINK_DEFAULTS.maxQueueRows})` },
    timeoutMs: { type: 'number', min: 1, description: `one request's timeout (default ${CLICKHOUSE_SINK_DEFAULTS.timeoutMs})` },
    maxRetryDelayMs: { type: 'number', min: 1, description: `longest pause between attempts to reach the server again (default ${CLICKHOUSE_SINK_DEFAULTS.maxRetryDelayMs})` },
    flushTimeoutMs: { type: 'number', min: 0, description: `at the end, how long to wait for the last rows (default ${CLICKHOUSE_SINK_DEFAULTS.flushTimeoutMs})` },
  },
  create: (o, ctx) =>
    createClickHouseSink({ ...o, spoolDir: o.spoolDir ?? (() => ctx.session.channelFiles?.out), session: ctx.session }),
});

export const reportSink = definePlugin<Omit<ReportSinkOptions, 'session' | 'stderr'>>({
  name: 'report',
  kind: 'sink',
  kit: KIT,
  options: {
    out: { type: 'string', description: 'the output folder the static report is built from (set from --out by --html)' },
    html: { type: 'boolean', description: 'write OUT/report.html when the run ends, stalls or is interrupted (list this sink after files)' },
    serve: { type: 'string', description: '[HOST:]PORT to serve the live report on (host 127.0.0.1 unless given; port 0 picks one)' },
    quiet: { type: 'boolean', description: 'no line on stderr about the written report' },
    maxPageBytes: { type: 'number', min: 262144, description: `largest page; transcripts are cut to fit (default ${REPORT_DEFAULTS.maxPageBytes})` },
    channelChars: { type: 'number', min: 0, description: `transcript characters per agent at most (default ${REPORT_DEFAULTS.channelChars})` },
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
