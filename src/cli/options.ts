import minimist from 'minimist';
import { UsageError } from '../errors.js';
import { BUILTINS } from '../chain/builtins.js';
import { optionProblem, type OptionSpec } from '../chain/plugin.js';
import { shownUrl } from '../shown-url.js';
import { STATS_DEFAULTS } from '../views/stats.js';
import { OTLP_URL_FROM_ENV } from '../chain/sinks/otlp-options.js';

/** A command-line flag as --help, the parser and the config overrides read it. */
export interface OptionDef {
  name: string;
  alias?: string;
  type: 'string' | 'boolean' | 'number';
  /** Placeholder shown in --help. */
  arg?: string;
  /** Shown in --help; set by the parser only when `cliDefault` (a flag's own default). */
  default?: string | number | boolean;
  /** The parser fills the default in when the flag is not given (CLI-only defaults). */
  cliDefault?: boolean;
  choices?: readonly (string | number)[];
  min?: number;
  /** The value may be left out (`--pino` alone); it is then `optionalDefault`. */
  optionalDefault?: string;
  /** The chain option this flag sets: stage or sink name and option key. */
  target?: { use: string; key: string };
  /** The option spec behind a flag with a target: its value is checked against it. */
  spec?: OptionSpec;
  help: string;
}

/**
 * A row of the table below. A flag that sets a stage or sink option names its `target`
 * and carries only what is the command line's own (flag name, alias, placeholder, a default
 * of its own such as `--out subtee-out`, a note for --help): its type, bounds, choices,
 * default and help come from that option's spec, so they are written once.
 */
type Row =
  | (Pick<OptionDef, 'name' | 'alias' | 'arg' | 'optionalDefault'> & {
      target: { use: string; key: string };
      /** A default of the flag's own (applied by the parser), or null for none shown. */
      default?: string | null;
      note?: string;
    })
  | (Omit<OptionDef, 'target' | 'spec' | 'cliDefault'> & { target?: undefined });

const ROWS: readonly Row[] = [
  { name: 'out', alias: 'o', arg: 'DIR', default: 'subtee-out', target: { use: 'files', key: 'out' } },
  { name: 'stdout', arg: 'MODE', target: { use: 'stdout', key: 'mode' } },
  { name: 'force', target: { use: 'files', key: 'force' } },
  { name: 'thinking', arg: 'MODE', target: { use: 'thinking-truncator', key: 'mode' } },
  { name: 'thinking-max-chars', arg: 'N', target: { use: 'thinking-truncator', key: 'maxChars' } },
  { name: 'require-version', arg: 'RANGE', target: { use: 'version-guard', key: 'requireVersion' } },
  { name: 'idle-timeout-ms', arg: 'MS', target: { use: 'idle-watchdog', key: 'idleTimeoutMs' } },
  { name: 'model-timeout-ms', arg: 'MS', target: { use: 'idle-watchdog', key: 'modelTimeoutMs' } },
  { name: 'tool-timeout-ms', arg: 'MS', target: { use: 'idle-watchdog', key: 'toolTimeoutMs' } },
  { name: 'bg-wait-ceiling-ms', arg: 'MS', target: { use: 'idle-watchdog', key: 'bgWaitCeilingMs' } },
  { name: 'stall-grace-ms', arg: 'MS', target: { use: 'idle-watchdog', key: 'graceMs' } },
  { name: 'on-stall', arg: 'ACTION', target: { use: 'idle-watchdog', key: 'onStall' } },
  {
    name: 'pino',
    arg: '[FILE]',
    optionalDefault: 'events.pino.log',
    default: null,
    note: 'alone: OUT/events.pino.log; an input, or a file holding other than a pino log, is refused',
    target: { use: 'pino', key: 'destination' },
  },
  {
    name: 'otlp',
    arg: '[URL]',
    optionalDefault: OTLP_URL_FROM_ENV,
    default: null,
    target: { use: 'otlp', key: 'url' },
  },
  { name: 'clickhouse', arg: 'URL', target: { use: 'clickhouse', key: 'url' } },
  { name: 'clickhouse-resend', arg: 'DIR', target: { use: 'clickhouse', key: 'resend' } },
  { name: 'prices', arg: 'FILE', target: { use: 'channel-router', key: 'prices' } },
  {
    name: 'transcripts',
    arg: 'DIR',
    target: { use: 'channel-router', key: 'transcripts' },
    note: 'subtee run of Claude Code: CLAUDE_CONFIG_DIR, else ~/.claude',
  },
  { name: 'input-format', arg: 'FORMAT', target: { use: 'input-format', key: 'format' } },
  { name: 'max-line-bytes', arg: 'N', target: { use: 'line-parser', key: 'maxLineBytes' } },
  { name: 'max-open-files', arg: 'N', target: { use: 'files', key: 'maxOpenFiles' } },
  {
    name: 'html',
    type: 'boolean',
    default: false,
    help:
      'also write OUT/report.html at the end: tree, timeline, transcripts, search ' +
      '(subtee report OUT does it later)',
  },
  {
    name: 'serve',
    type: 'string',
    arg: '[HOST:]PORT',
    help: 'serve the report live while the run goes (host 127.0.0.1 unless given; port 0 picks a free one)',
  },
  {
    name: 'config',
    alias: 'c',
    type: 'string',
    arg: 'FILE',
    help: 'JSON config: stages, sinks, plugins (flags given here override it)',
  },
  {
    name: 'kill-grace-ms',
    type: 'number',
    arg: 'MS',
    default: 5000,
    min: 0,
    help: 'subtee run: SIGKILL this long after SIGTERM (or the signal passed on) to what the command started',
  },
  {
    name: 'plugin-end-timeout-ms',
    type: 'number',
    arg: 'MS',
    default: 30_000,
    min: 0,
    help: "after the input's end, how long a plugin's promise (its function's or end()'s) may stay pending",
  },
  { name: 'quiet', alias: 'q', type: 'boolean', default: false, help: 'no summary or status line on stderr' },
  { name: 'help', alias: 'h', type: 'boolean', default: false, help: 'show this help' },
  { name: 'version', alias: 'V', type: 'boolean', default: false, help: 'print the version' },
];

/**
 * A stage's or sink's option description in the command line's terms: an option key of that
 * stage or sink that a flag of `table` sets (`modelTimeoutMs`) is named as the flag
 * (`--model-timeout-ms`), as a config's keys are not what a command line takes.
 */
export function namedAsFlags(text: string, use: string, table: readonly OptionDef[] = OPTIONS): string {
  return text.replace(/\b[a-z]+(?:[A-Z][a-z]*)+\b/g, (key) => {
    const flag = table.find((d) => d.target?.use === use && d.target.key === key);
    return flag === undefined ? key : `--${flag.name}`;
  });
}

/** The table's rows resolved, each help in the command line's terms (see namedAsFlags). */
function resolveRows(rows: readonly Row[]): readonly OptionDef[] {
  const defs = rows.map(resolveRow);
  return Object.freeze(
    defs.map((d) => (d.target ? { ...d, help: namedAsFlags(d.help, d.target.use, defs) } : d)),
  );
}

/** A row with its target's facts filled in from the built-in option specs. */
function resolveRow(row: Row): OptionDef {
  if (row.target === undefined) return { ...row, cliDefault: row.default !== undefined };
  const { use, key } = row.target;
  const spec = BUILTINS.find((d) => d.name === use)?.options[key];
  if (!spec) throw new Error(`option table: ${use} has no option ${key}`);
  if (spec.description === undefined) throw new Error(`option table: ${use}.${key} has no description`);
  const numeric = spec.type === 'integer' || spec.type === 'number';
  const type = numeric ? 'number' : spec.type === 'boolean' ? 'boolean' : 'string';
  const own = row.default !== undefined;
  return {
    name: row.name,
    alias: row.alias,
    type,
    arg: row.arg,
    default: own ? (row.default ?? undefined) : (spec.default as OptionDef['default']),
    cliDefault: own && row.default !== null,
    choices: spec.choices,
    min: spec.min,
    optionalDefault: row.optionalDefault,
    target: row.target,
    spec,
    help: row.note ? `${spec.description}; ${row.note}` : spec.description,
  };
}

/** The one table behind argument parsing, --help and the flags that override a config. */
export const OPTIONS: readonly OptionDef[] = resolveRows(ROWS);

/** `subtee stats`: its own flags, and the ClickHouse sink's URL and table name for `--clickhouse`. */
const STATS_ROWS: readonly Row[] = [
  {
    name: 'since',
    type: 'string',
    arg: 'DATE',
    help: 'only runs that started at or after DATE (UTC: 2026-11-30 or 2026-11-30T12:00:00Z)',
  },
  {
    name: 'by',
    type: 'string',
    arg: 'WHAT',
    choices: ['agent', 'model', 'day'],
    help: 'one table, per agent type, model or day (UTC) the run started (default: agent and model)',
  },
  { name: 'json', type: 'boolean', default: false, help: 'print the figures as one JSON document' },
  { name: 'csv', type: 'boolean', default: false, help: 'print the tables as CSV (one row per group)' },
  {
    name: 'top',
    type: 'number',
    arg: 'N',
    default: STATS_DEFAULTS.top,
    min: 0,
    help: 'entries in the costliest and the failed subagents lists',
  },
  {
    name: 'clickhouse',
    arg: 'URL',
    note: "read the ClickHouse sink's tables instead of run folders",
    target: { use: 'clickhouse', key: 'url' },
  },
  {
    name: 'clickhouse-channels-table',
    arg: 'NAME',
    note: 'read by --clickhouse',
    target: { use: 'clickhouse', key: 'channelsTable' },
  },
  { name: 'help', alias: 'h', type: 'boolean', default: false, help: 'show this help' },
];

/** The flags of `subtee stats`, from the same table machinery as the main command's. */
export const STATS_OPTIONS: readonly OptionDef[] = resolveRows(STATS_ROWS);

export interface ParsedOptions {
  /** Positional arguments before `--`. */
  _: string[];
  /** Arguments after `--` (the command of `subtee run`). */
  rest: string[];
  /** Options given on the command line (not defaults). */
  given: Set<string>;
  [name: string]: string | number | boolean | string[] | Set<string>;
}

/**
 * `--top -1` as `--top=-1`: minimist takes a value that starts with `-` for another flag, so
 * a negative number was refused as the unknown option `-1` instead of as a bad value.
 */
function withNegativeValues(argv: string[], table: readonly OptionDef[]): string[] {
  const end = argv.includes('--') ? argv.indexOf('--') : argv.length;
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const name = i < end ? /^--?([^=]+)$/.exec(argv[i])?.[1] : undefined;
    const def = name === undefined ? undefined : table.find((o) => o.name === name || o.alias === name);
    const next = argv[i + 1];
    if (def && def.type !== 'boolean' && i + 1 < end && /^-\d/.test(next)) {
      out.push(`${argv[i]}=${next}`);
      i++;
    } else {
      out.push(argv[i]);
    }
  }
  return out;
}

/**
 * A flag without a value takes `--flag`, `--no-flag`, `--flag=true` and `--flag=false`; any
 * other value is refused (`--force=no` would read as on).
 */
function checkFlagValues(argv: string[], table: readonly OptionDef[]): void {
  const end = argv.includes('--') ? argv.indexOf('--') : argv.length;
  for (const arg of argv.slice(0, end)) {
    const m = /^--?([^=]+)=([\s\S]*)$/.exec(arg);
    const def = m && table.find((o) => o.name === m[1] || o.alias === m[1]);
    if (!m || !def || def.type !== 'boolean' || m[2] === 'true' || m[2] === 'false') continue;
    throw new UsageError(
      'ERR_BAD_OPTION',
      `--${def.name} takes no value (--${def.name}, --no-${def.name}, --${def.name}=true or ` +
        `--${def.name}=false), not "${m[2]}"`,
    );
  }
}

/**
 * Parses argv against OPTIONS. Throws a UsageError (one line, naming `command`'s help) for
 * anything it does not know.
 */
export function parseArgs(
  args: string[],
  table: readonly OptionDef[] = OPTIONS,
  command = 'subtee',
): ParsedOptions {
  const argv = withNegativeValues(args, table);
  checkFlagValues(argv, table);
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
  if (unknown.length > 0)
    throw new UsageError(
      'ERR_UNKNOWN_OPTION',
      `unknown option ${unknown[0].split('=')[0]} (see ${command} --help)`,
    );
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
    if (v === undefined && o.cliDefault) v = o.default;
    if (v === undefined) continue;
    if (o.type === 'string') {
      if (v === '' && o.optionalDefault !== undefined) v = o.optionalDefault;
      if (typeof v !== 'string' || v === '')
        throw new UsageError('ERR_BAD_OPTION', `--${o.name} needs a value${o.arg ? ` (${o.arg})` : ''}`);
    } else if (o.type === 'number') {
      const n = typeof v === 'number' ? v : /^\d+$/.test(String(v)) ? Number(v) : NaN;
      if (!Number.isSafeInteger(n)) {
        const least = o.min !== undefined ? ` of at least ${o.min}` : '';
        throw new UsageError('ERR_BAD_OPTION', `--${o.name} must be a whole number${least}, not "${v}"`);
      }
      v = n;
    } else if (o.type === 'boolean') {
      // `-q=false`: minimist leaves a short flag's value a string.
      v = v === true || v === 'true';
    }
    // The same check a config's value gets (choices, bounds, ranges…).
    const tooSmall = typeof v === 'number' && o.min !== undefined && v < o.min;
    const notAChoice = o.choices !== undefined && !o.choices.includes(v as string | number);
    const problem = o.spec
      ? optionProblem(o.spec, v)
      : tooSmall
        ? `must be at least ${o.min}`
        : notAChoice
          ? `must be one of ${o.choices!.join(', ')}`
          : null;
    // Shown as a URL is: a value may be an endpoint with credentials in it.
    if (problem) {
      throw new UsageError('ERR_BAD_OPTION', `--${o.name} ${problem}, not "${shownUrl(String(v))}"`);
    }
    out[o.name] = v;
  }
  return out;
}

/** Help is written to fit a terminal this wide. */
export const HELP_COLUMNS = 100;

/** Words put on lines of at most `width` characters (a longer word stands alone). */
export function wrapWords(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  return line === '' ? lines : [...lines, line];
}

/** The usage text, then one row per option, its description wrapped under itself. */
export function helpText(
  usage: string,
  table: readonly OptionDef[] = OPTIONS,
  columns = HELP_COLUMNS,
): string {
  const rows = table.map((o) => {
    const flag = `${o.alias ? `-${o.alias}, ` : '    '}--${o.name}${o.arg ? ` ${o.arg}` : ''}`;
    const def = o.type !== 'boolean' && o.default !== undefined ? ` (default: ${o.default})` : '';
    return [flag, o.help + def] as const;
  });
  const width = Math.max(...rows.map(([f]) => f.length)) + 2;
  const text = rows.map(([f, h]) => {
    const [first, ...more] = wrapWords(h, columns - 2 - width);
    return [`  ${f.padEnd(width)}${first}`, ...more.map((l) => `${' '.repeat(2 + width)}${l}`)].join('\n');
  });
  return `${usage}\n\nOptions:\n${text.join('\n')}\n`;
}

/** Where the command of `subtee run` starts when it was given without `--`, or -1. */
export function commandStart(args: readonly string[], table: readonly OptionDef[] = OPTIONS): number {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--') return -1;
    if (!arg.startsWith('-') || arg === '-') return i;
    const [name, value] = arg.replace(/^--?/, '').split('=', 2);
    const def = table.find((o) => o.name === name || o.alias === name);
    // An option subtee does not know, before any command: that is the mistake to report.
    if (!def) return -1;
    const next = args[i + 1];
    if (def.type !== 'boolean' && value === undefined && next !== undefined && !next.startsWith('-')) i++;
  }
  return -1;
}

/** A word as a POSIX shell reads it back: quoted when it holds anything but plain characters. */
export function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * `subtee run --out x claude -p` (no `--`): the same line with `--` where the command starts,
 * to show in the error; null when no command can be told apart.
 */
export function runLineWithDashes(args: readonly string[]): string | null {
  const at = commandStart(args);
  if (at < 0) return null;
  return ['subtee', 'run', ...args.slice(0, at), '--', ...args.slice(at)].map(shellWord).join(' ');
}
