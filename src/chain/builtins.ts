import { definePlugin, Registry, type PluginDefinition } from './plugin.js';
import { createChannelRouter } from './stages/channel-router.js';
import { createIdleWatchdog, IDLE_WATCHDOG_DEFAULTS } from './stages/idle-watchdog.js';
import { createLineParser, LINE_PARSER_DEFAULTS } from './stages/line-parser.js';
import { createThinkingTruncator, THINKING_MODES, THINKING_TRUNCATOR_DEFAULTS } from './stages/thinking-truncator.js';
import { createVersionGuard } from './stages/version-guard.js';
import { createFilesSink, FILES_SINK_DEFAULTS } from './sinks/files.js';
import { createPinoSink, PINO_SINK_DEFAULTS } from './sinks/pino.js';
import { createStdoutSink, STDOUT_MODES } from './sinks/stdout.js';

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
  create: (o, ctx) => createStdoutSink({ ...o, session: ctx.session }),
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

export const BUILTINS: readonly PluginDefinition[] = [lineParser, versionGuard, channelRouter, thinkingTruncator, idleWatchdog, filesSink, stdoutSink, pinoSink];

export function builtinRegistry(): Registry {
  const r = new Registry();
  for (const def of BUILTINS) r.add(def);
  return r;
}
