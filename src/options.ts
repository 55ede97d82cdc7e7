import minimist from 'minimist';
import { UsageError } from './errors.js';
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
  help: string;
}

/** The one table behind both argument parsing and --help. */
export const OPTIONS: readonly OptionDef[] = Object.freeze([
  { name: 'out', alias: 'o', type: 'string', arg: 'DIR', default: 'subtee-out', help: 'folder for transcripts and index.json (must be new or empty)' },
  { name: 'stdout', type: 'string', arg: 'MODE', default: 'text', choices: STDOUT_MODES, help: 'text: main text + labelled subagent text; main: main text only; raw: input unchanged (tee); none' },
  { name: 'force', type: 'boolean', default: false, help: 'write into an --out folder that already holds files' },
  { name: 'max-line-bytes', type: 'number', arg: 'N', default: 64 * 1024 * 1024, min: 1024, help: 'longest line held in memory; longer lines are quarantined in pieces' },
  { name: 'max-open-files', type: 'number', arg: 'N', default: 128, min: 4, help: 'open file handles kept at most (others are reopened for append)' },
  { name: 'quiet', alias: 'q', type: 'boolean', default: false, help: 'no summary on stderr' },
  { name: 'help', alias: 'h', type: 'boolean', default: false, help: 'show this help' },
  { name: 'version', alias: 'V', type: 'boolean', default: false, help: 'print the version' },
]);

export interface ParsedOptions {
  _: string[];
  [name: string]: string | number | boolean | string[];
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
  const out: ParsedOptions = { _: [...raw._.map(String), ...((raw['--'] as string[] | undefined) ?? [])] };
  for (const o of table) {
    let v = raw[o.name];
    if (Array.isArray(v)) throw new UsageError('ERR_BAD_OPTION', `--${o.name} given more than once`);
    if (v === undefined) v = o.default;
    if (v === undefined) continue;
    if (o.type === 'string') {
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
