import { definePlugin, Registry, type PluginDefinition } from './plugin.js';
import { createChannelRouter } from './stages/channel-router.js';
import { createIdleWatchdog, IDLE_WATCHDOG_DEFAULTS } from './stages/idle-watchdog.js';
import { createLineParser, LINE_PARSER_DEFAULTS } from './stages/line-parser.js';
import { createThinkingTruncator, THINKING_MODES, THINKING_TRUNCATOR_DEFAULTS } from './stages/thinking-truncator.js';
import { createVersionGuard } from './stages/version-guard.js';
import { createFilesSink, FILES_SINK_DEFAULTS } from './sinks/files.js';
import { createPinoSink, PINO_SINK_DEFAULTS } from './sinks/pino.js';
import { createStdoutSink, STDOUT_MODES, STDOUT_SINK_DEFAULTS } from './sinks/stdout.js';
import { isValidRange } from '../semver.js';

const KIT = '^0.1.0';

const STALL_ACTIONS = ['fail', 'warn'] as const;

export const lineParser = definePlugin<{ maxLineBytes?: number }>({
  name: 'line-parser',
  kind: 'stage',
  kit: KIT,
  options: {
    maxLineBytes: {
      type: 'integer',
      min: 1024,
      default: LINE_PARSER_DEFAULTS.maxLineBytes,
      description: 'longest line held in memory; longer lines are quarantined in pieces',
    },
  },
  input: () => 'bytes',
  create: (o, ctx) => createLineParser({ ...o, session: ctx.session }),
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
      description: 'thinking in transcripts: keep, truncate, drop, or file (full text in <channel>.thinking.log)',
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
    idleTimeoutMs: {
      type: 'integer',
      min: 1,
      default: IDLE_WATCHDOG_DEFAULTS.idleTimeoutMs,
      description: 'silence that counts as a hang while no background task is in flight',
    },
    bgWaitCeilingMs: {
      type: 'integer',
      min: 0,
      default: IDLE_WATCHDOG_DEFAULTS.bgWaitCeilingMs,
      description: 'silence allowed while background tasks run (0 = no limit); $CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS replaces the default',
    },
    drainGraceMs: {
      type: 'integer',
      min: 0,
      default: IDLE_WATCHDOG_DEFAULTS.drainGraceMs,
      description: "added to that ceiling for the agent's exit drain",
    },
    onStall: {
      type: 'string',
      choices: STALL_ACTIONS,
      default: IDLE_WATCHDOG_DEFAULTS.onStall,
      description: 'fail: stop (exit 124, and stop the agent under subtee run); warn: report only',
    },
    checkIntervalMs: {
      type: 'integer',
      min: 1,
      default: IDLE_WATCHDOG_DEFAULTS.checkIntervalMs,
      description: 'how often silence is measured',
    },
  },
  create: (o, ctx) => createIdleWatchdog({ bgWaitCeilingMs: bgCeilingFromEnv(ctx.env), ...o, session: ctx.session }),
});

export const filesSink = definePlugin<{ out: string; maxOpenFiles?: number; flushBytes?: number; force?: boolean }>({
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
      description: 'open file handles kept at most (others are reopened for append; the default fits under ulimit -n)',
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
      description: 'write into an output folder that already holds files (entries of the same names are replaced)',
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
      description: 'text: main text + labelled subagent text; main: main text only; raw: input unchanged (tee); none',
    },
  },
  input: (o) => (o.mode === 'raw' ? 'bytes' : 'records'),
  create: (o, ctx) => createStdoutSink({ ...o, session: ctx.session }),
});

export const pinoSink = definePlugin<{ destination?: string; transport?: Record<string, unknown>; maxContentChars?: number }>({
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
      description: 'a pino transport config: { "target": …, "options": … }, { "targets": […] } or { "pipeline": […] }',
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

export const BUILTINS: readonly PluginDefinition[] = [lineParser, versionGuard, channelRouter, thinkingTruncator, idleWatchdog, filesSink, stdoutSink, pinoSink];

export function builtinRegistry(): Registry {
  const r = new Registry();
  for (const def of BUILTINS) r.add(def);
  return r;
}
