import { existsSync } from 'node:fs';
import type { Writable } from 'node:stream';
import { UsageError } from '../errors.js';
import { helpText, runLineWithDashes } from './options.js';

/** The commands of the command line, as `subtee help` names them. */
export const COMMANDS = Object.freeze(['run', 'report', 'stats', 'help'] as const);

export const MAIN_USAGE = `subtee [options] [FILE…]             split a recording, or stdin
subtee run [options] -- CMD [ARGS…]  start an agent and split its stdout (subtee help run)
subtee report [options] OUT          write OUT/report.html (subtee help report)
subtee stats [options] DIR…          figures over many runs (subtee help stats)
subtee help [COMMAND]                this help, or a command's

Splits a coding agent's JSON stream (stdin, FILE, or the stdout of CMD) into one transcript per
subagent:
  claude -p "…" --output-format stream-json --verbose --forward-subagent-text | subtee --out logs
gzip input (zstd too, on Node.js 22.15 or later) is decompressed; several FILEs each get a folder
OUT/<name>/.`;

export const RUN_USAGE = `subtee run [options] -- CMD [ARGS…]

Starts CMD in a process group of its own and splits its stdout; its stderr passes through.
Everything after -- is the command's:
  subtee run --out logs -- \\
    claude -p "…" --output-format stream-json --verbose --forward-subagent-text
SIGHUP, SIGINT and SIGTERM are passed to CMD and every process it started (SIGKILL after
--kill-grace-ms); nothing it started outlives subtee run.`;

export const EXIT_CODES_HELP =
  `Exit codes: 0 ok, 1 internal error or a plugin failed (a stage plugin holding records when
  the watchdog fires too), 2 bad usage or config, 3 input or output unusable (an input with no
  lines, disk full, --out not a folder or being written by another run), 4 agent version
  refused, 124 stalled, 129 SIGHUP, 130 SIGINT, 143 SIGTERM.`;

export const RUN_EXIT_CODES_HELP =
  `Exit codes: the command's own; 1 a plugin failed; 2 bad usage or config, or CMD cannot start;
  3 output unusable (or being written by another run), or CMD exited 0 printing no line;
  4 agent version refused; 124 stalled (CMD was stopped);
  129 SIGHUP, 130 SIGINT, 143 SIGTERM, whatever CMD returned.`;

/** The main command's help, or `subtee run`'s. */
export function commandHelp(command: 'main' | 'run'): string {
  return command === 'run'
    ? `${helpText(RUN_USAGE)}\n${RUN_EXIT_CODES_HELP}\n`
    : `${helpText(MAIN_USAGE)}\n${EXIT_CODES_HELP}\n`;
}

/**
 * Edits between two words (insert, delete, replace, or swap two neighbours): `reprot` is one
 * from `report`. Words are short, a command line's.
 */
export function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/** The command a word looks like a typo of (at most 1 edit, 2 from 5 letters), or null. */
export function closestCommand(word: string): string | null {
  if (!/^[a-z][a-z-]{0,19}$/i.test(word)) return null;
  const allowed = word.length >= 5 ? 2 : 1;
  let best: string | null = null;
  let bestDistance = allowed + 1;
  for (const c of COMMANDS) {
    const distance = editDistance(word.toLowerCase(), c);
    if (distance < bestDistance) [best, bestDistance] = [c, distance];
  }
  return best;
}

/**
 * `subtee reprot`: the first FILE is no file, and reads as a mistyped command. Thrown as bad
 * usage (exit 2) naming the command, before anything is read or written.
 */
export function checkMistypedCommand(files: readonly string[]): void {
  const word = files[0];
  if (word === undefined || existsSync(word)) return;
  const command = closestCommand(word);
  if (command === null) return;
  throw new UsageError('ERR_USAGE', `no file or command ${word}: did you mean subtee ${command}?`);
}

/**
 * `subtee run` with its command given without `--`: the error says where `--` goes, on the
 * line the user typed. Other errors are returned as they are.
 */
export function withDashesHint(err: unknown, runArgs: readonly string[]): unknown {
  const code = (err as UsageError)?.code;
  if (code !== 'ERR_UNKNOWN_OPTION' && code !== 'ERR_USAGE') return err;
  const line = runLineWithDashes(runArgs);
  if (line === null) return err;
  const what =
    code === 'ERR_USAGE'
      ? 'subtee run needs the command after --'
      : `${(err as Error).message.replace(/ \(see subtee run --help\)$/, '')}; the command goes after --`;
  return new UsageError(code, `${what}, as in: ${line}`);
}

/** `subtee help [COMMAND]`: the command's help on stdout. */
export async function helpCommand(
  args: readonly string[],
  stdout: Writable,
  commands: {
    report: (argv: string[]) => number | Promise<number>;
    stats: (argv: string[]) => Promise<number>;
  },
): Promise<number> {
  if (args.length > 1)
    throw new UsageError('ERR_USAGE', 'subtee help takes one command: subtee help [COMMAND]');
  const name = args[0] ?? 'help';
  if (name === 'report') return commands.report(['--help']);
  if (name === 'stats') return commands.stats(['--help']);
  if (name === 'run' || name === 'help') {
    stdout.write(commandHelp(name === 'run' ? 'run' : 'main'));
    return 0;
  }
  const close = closestCommand(name);
  const guess = close === null ? '' : `did you mean ${close}? `;
  throw new UsageError('ERR_USAGE', `no command ${name}: ${guess}the commands are ${COMMANDS.join(', ')}`);
}
