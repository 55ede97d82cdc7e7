import minimist from 'minimist';
import { UsageError } from '../errors.js';
import { THINKING_MODES } from './stages/thinking-truncator.js';
import { INPUT_FORMATS } from './stages/input-format.js';
import { STDOUT_MODES } from './sinks/stdout.js';

export interface OptionDef {
  name: string;
  alias?: string;
  type: 'string' | 'boolean' | 'number';
  /** Placeholder shown in --help. */
  arg?: string;
  default?: string | number | boolean;
  choices?: readonly string[];
  min?: number;
  /** The value may be left out (`--pino` alone); it is then `optionalDefault`. */
  optionalDefault?: string;
  /** The chain option this flag sets: stage or sink name and option key. */
  target?: { use: string; key: string };
  help: string;
}

/** The one table behind argument parsing, --help and the flags that override a config. */
export const OPTIONS: readonly OptionDef[] = Object.freeze([
  { name: 'out', alias: 'o', type: 'string', arg: 'DIR', default: 'subtee-out', target: { use: 'files', key: 'out' }, help: 'folder for transcripts and index.json (must be new or empty)' },
  { name: 'stdout', type: 'string', arg: 'MODE', default: 'text', choices: STDOUT_MODES, target: { use: 'stdout', key: 'mode' }, help: 'text: main text + labelled subagent text; main: main text only; raw: input unchanged (tee); none' },
  { name: 'force', type: 'boolean', default: false, target: { use: 'files', key: 'force' }, help: 'write into an --out folder that already holds files' },
  { name: 'thinking', type: 'string', arg: 'MODE', default: 'truncate', choices: THINKING_MODES, target: { use: 'thinking-truncator', key: 'mode' }, help: 'thinking in transcripts: keep, truncate, drop, or file (full text in <channel>.thinking.log)' },
  { name: 'thinking-max-chars', type: 'number', arg: 'N', default: 2000, min: 0, target: { use: 'thinking-truncator', key: 'maxChars' }, help: 'characters of each thinking block kept by --thinking truncate' },
  { name: 'require-version', type: 'string', arg: 'RANGE', target: { use: 'version-guard', key: 'requireVersion' }, help: 'refuse an agent whose version is not in RANGE, e.g. ">=2.1.219" (exit 4)' },
  { name: 'idle-timeout-ms', type: 'number', arg: 'MS', default: 120_000, min: 1, target: { use: 'idle-watchdog', key: 'idleTimeoutMs' }, help: 'silence that counts as a hang while no background task is in flight' },
  { name: 'bg-wait-ceiling-ms', type: 'number', arg: 'MS', min: 0, target: { use: 'idle-watchdog', key: 'bgWaitCeilingMs' }, help: 'silence allowed while background tasks run (default $CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS or 600000; 0 = no limit)' },
  { name: 'on-stall', type: 'string', arg: 'ACTION', default: 'fail', choices: ['fail', 'warn'], target: { use: 'idle-watchdog', key: 'onStall' }, help: 'fail: stop (exit 124, and stop the agent under subtee run); warn: report only' },
  { name: 'pino', type: 'string', arg: '[FILE]', optionalDefault: 'events.pino.log', target: { use: 'pino', key: 'destination' }, help: 'also log one pino line per event to FILE (- for stdout; alone: OUT/events.pino.log)' },
  { name: 'otlp', type: 'string', arg: '[URL]', optionalDefault: 'env', target: { use: 'otlp', key: 'url' }, help: 'also send the run as OpenTelemetry traces to the OTLP/HTTP collector at URL (alone: from OTEL_EXPORTER_OTLP_*, else localhost:4318)' },
  { name: 'clickhouse', type: 'string', arg: 'URL', target: { use: 'clickhouse', key: 'url' }, help: 'also insert one row per line and the channel rows into ClickHouse at URL (rows wait in OUT when it is away)' },
  { name: 'clickhouse-resend', type: 'string', arg: 'DIR', target: { use: 'clickhouse', key: 'resend' }, help: 'first send what earlier runs spooled in DIR and its subfolders (with --clickhouse)' },
  { name: 'input-format', type: 'string', arg: 'FORMAT', default: 'auto', choices: INPUT_FORMATS, target: { use: 'input-format', key: 'format' }, help: 'claude: stream-json (CLI or Agent SDK); langgraph: recorded LangGraph protocol events; auto: from the first line' },
  { name: 'max-line-bytes', type: 'number', arg: 'N', default: 64 * 1024 * 1024, min: 1024, target: { use: 'line-parser', key: 'maxLineBytes' }, help: 'longest line held in memory; longer lines are quarantined in pieces' },
  { name: 'max-open-files', type: 'number', arg: 'N', default: 128, min: 4, target: { use: 'files', key: 'maxOpenFiles' }, help: 'open file handles kept at most (others are reopened for append)' },
  { name: 'html', type: 'boolean', default: false, help: 'also write OUT/report.html at the end: tree, timeline, transcripts, search (subtee report OUT does it later)' },
  { name: 'serve', type: 'string', arg: '[HOST:]PORT', help: 'serve the report live while the run goes (host 127.0.0.1 unless given; port 0 picks a free one)' },
  { name: 'config', alias: 'c', type: 'string', arg: 'FILE', help: 'JSON config: stages, sinks, plugins (flags given here override it)' },
  { name: 'kill-grace-ms', type: 'number', arg: 'MS', default: 5000, min: 0, help: 'subtee run: wait this long after SIGTERM before SIGKILL' },
  { name: 'quiet', alias: 'q', type: 'boolean', default: false, help: 'no summary or status line on stderr' },
  { name: 'help', alias: 'h', type: 'boolean', default: false, help: 'show this help' },
  { name: 'version', alias: 'V', type: 'boolean', default: false, help: 'print the version' },
]);

export interface ParsedOptions {
  /** Positional arguments before `--`. */
  _: string[];
  /** Arguments after `--` (the command of `subtee run`). */
  rest: string[];
  /** Options given on the command line (not defaults). */
  given: Set<string>;
  [name: string]: string | number | boolean | string[] | Set<string>;
}

/** Parses argv against OPTIONS. Throws a UsageError (one line) for anything it does not know. */
export function parseArgs(argv: string[], table: readonly OptionDef[] = OPTIONS): ParsedOptions {
  const unknown: string[] = [];
  const raw = minimist(argv, {
    string: table.filter((o) => o.type !== 'boolean').map((o) => o.name),
    boolean: table.filter((o) => o.type === 'boolean').map((o) => o.name),
    alias: Object.fromEntries(table.filter((o) => o.alias).map((o) => [o.name, o.alias!])),
    '--': true,
    unknown: (arg) => {
      if (arg.startsWith('-') && arg !== '-') {
        unknown.push(arg);
        return false;
      }
      return true;
    },
  });
  if (unknown.length > 0) throw new UsageError('ERR_UNKNOWN_OPTION', `unknown option ${unknown[0].split('=')[0]} (see subtee --help)`);
  const given = new Set(
    argv
      .slice(0, argv.includes('--') ? argv.indexOf('--') : argv.length)
      .filter((a) => a.startsWith('-') && a !== '-')
      .map((a) => a.replace(/^--?(no-)?/, '').split('=')[0])
      .map((n) => table.find((o) => o.name === n || o.alias === n)?.name ?? n),
  );
  const out: ParsedOptions = { _: raw._.map(String), rest: (raw['--'] as string[] | undefined) ?? [], given };
  for (const o of table) {
    let v = raw[o.name];
    if (Array.isArray(v)) throw new UsageError('ERR_BAD_OPTION', `--${o.name} given more than once`);
    if (v === undefined) v = o.default;
    if (v === undefined) continue;
    if (o.type === 'string') {
      if (v === '' && o.optionalDefault !== undefined) v = o.optionalDefault;
      if (typeof v !== 'string' || v === '') throw new UsageError('ERR_BAD_OPTION', `--${o.name} needs a value${o.arg ? ` (${o.arg})` : ''}`);
      if (o.choices && !o.choices.includes(v)) throw new UsageError('ERR_BAD_OPTION', `--${o.name} must be one of ${o.choices.join(', ')}, not "${v}"`);
    } else if (o.type === 'number') {
      const n = typeof v === 'number' ? v : /^\d+$/.test(String(v)) ? Number(v) : NaN;
      if (!Number.isSafeInteger(n) || (o.min !== undefined && n < o.min)) {
        throw new UsageError('ERR_BAD_OPTION', `--${o.name} must be a whole number${o.min !== undefined ? ` of at least ${o.min}` : ''}, not "${v}"`);
      }
      v = n;
    }
    out[o.name] = v;
  }
  return out;
}

export function helpText(usage: string, table: readonly OptionDef[] = OPTIONS): string {
  const rows = table.map((o) => {
    const flag = `${o.alias ? `-${o.alias}, ` : '    '}--${o.name}${o.arg ? ` ${o.arg}` : ''}`;
    const def = o.type !== 'boolean' && o.default !== undefined ? ` (default: ${o.default})` : '';
    return [flag, o.help + def] as const;
  });
  const width = Math.max(...rows.map(([f]) => f.length)) + 2;
  return `${usage}\n\nOptions:\n${rows.map(([f, h]) => `  ${f.padEnd(width)}${h}`).join('\n')}\n`;
}
