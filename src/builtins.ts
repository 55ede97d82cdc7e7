import { definePlugin, Registry, type PluginDefinition } from './plugin.js';
import { createChannelRouter } from './stages/channel-router.js';
import { createLineParser, LINE_PARSER_DEFAULTS } from './stages/line-parser.js';
import { createFilesSink, FILES_SINK_DEFAULTS } from './sinks/files.js';
import { createStdoutSink, STDOUT_MODES } from './sinks/stdout.js';

const KIT = '^0.1.0';

export const lineParser = definePlugin<{ maxLineBytes?: number }>({
  name: 'line-parser',
  kind: 'stage',
  kit: KIT,
  options: {
    maxLineBytes: { type: 'number', min: 1024, description: `longest line held in memory (default ${LINE_PARSER_DEFAULTS.maxLineBytes})` },
  },
  input: () => 'bytes',
  create: (o, ctx) => createLineParser({ ...o, run: ctx.run }),
});

export const channelRouter = definePlugin<Record<string, never>>({
  name: 'channel-router',
  kind: 'stage',
  kit: KIT,
  options: {},
  create: (_o, ctx) => createChannelRouter({ run: ctx.run }),
});

export const filesSink = definePlugin<{ out: string; maxOpenFiles?: number; flushBytes?: number; force?: boolean }>({
  name: 'files',
  kind: 'sink',
  kit: KIT,
  options: {
    out: { type: 'string', description: 'output folder' },
    maxOpenFiles: { type: 'number', min: 4, description: `open descriptors kept at most (default ${FILES_SINK_DEFAULTS.maxOpenFiles})` },
    flushBytes: { type: 'number', min: 1, description: `queued bytes that force a write (default ${FILES_SINK_DEFAULTS.flushBytes})` },
    force: { type: 'boolean', description: 'write into a folder that already holds files' },
  },
  create: (o, ctx) => createFilesSink({ ...o, run: ctx.run }),
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

export const BUILTINS: readonly PluginDefinition[] = [lineParser, channelRouter, filesSink, stdoutSink];

export function builtinRegistry(): Registry {
  const r = new Registry();
  for (const def of BUILTINS) r.add(def);
  return r;
}
