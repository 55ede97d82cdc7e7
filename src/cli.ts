import { open } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { DEFAULT_STAGES, runChain, type ChainSpec } from './chain.js';
import { EXIT, SubteeError } from './errors.js';
import { helpText, parseArgs, type ParsedOptions } from './options.js';
import { escapeOneLine } from './render.js';
import { Run } from './run.js';
import { summaryText } from './summary.js';

export interface CliIO {
  stdin: Readable;
  stdout: Writable;
  stderr: Writable;
  env: NodeJS.ProcessEnv;
}

const USAGE = `subtee [options] [FILE]

Splits Claude Code's stream-json (stdin, or FILE) into one transcript per subagent:
  claude -p "…" --output-format stream-json --verbose --forward-subagent-text | subtee --out logs`;

export const EXIT_CODES_HELP = `Exit codes: 0 ok, 1 internal error, 2 bad usage or config, 3 output or input unusable (disk full, --out not a folder),
  4 agent version refused, 124 stalled, 130 SIGINT, 143 SIGTERM.`;

export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/** One line on stderr for an error: its message and code, never a stack trace. */
export function reportError(stderr: Writable, err: unknown): number {
  if (err instanceof SubteeError) {
    stderr.write(`subtee: ${escapeOneLine(err.message)} [${err.code}]\n`);
    return err.exitCode;
  }
  const e = err as NodeJS.ErrnoException;
  stderr.write(`subtee: internal error: ${escapeOneLine(e?.message ?? String(err))} [${e?.code ?? 'ERR_INTERNAL'}]\n`);
  return EXIT.INTERNAL;
}

export function specFromOptions(o: ParsedOptions): ChainSpec {
  return {
    stages: [{ use: 'line-parser', maxLineBytes: o['max-line-bytes'] }, ...DEFAULT_STAGES.slice(1)],
    sinks: [
      { use: 'files', out: o.out, force: o.force, maxOpenFiles: o['max-open-files'] },
      { use: 'stdout', mode: o.stdout },
    ],
  };
}

async function openInput(file: string | undefined, stdin: Readable): Promise<Readable> {
  if (file === undefined || file === '-') return stdin;
  try {
    const fh = await open(file, 'r');
    return fh.createReadStream({ highWaterMark: 1024 * 1024 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new SubteeError('ERR_INPUT', `cannot read ${file}: ${code === 'ENOENT' ? 'no such file' : code ?? String(err)}`, { exitCode: EXIT.IO, cause: err });
  }
}

export async function main(argv: string[], io: CliIO = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: process.env }): Promise<number> {
  let opts: ParsedOptions;
  try {
    opts = parseArgs(argv);
    if (opts._.length > 1) throw new SubteeError('ERR_USAGE', `expected at most one input FILE, got ${opts._.length}`, { exitCode: EXIT.USAGE });
  } catch (err) {
    return reportError(io.stderr, err);
  }
  if (opts.help) {
    io.stdout.write(`${helpText(USAGE)}\n${EXIT_CODES_HELP}\n`);
    return EXIT.OK;
  }
  if (opts.version) {
    io.stdout.write(`subtee ${packageVersion()}\n`);
    return EXIT.OK;
  }

  const run = new Run();
  const ac = new AbortController();
  let signalled: NodeJS.Signals | null = null;
  const onSignal = (sig: NodeJS.Signals) => {
    signalled = sig;
    run.interrupted = true;
    ac.abort();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const input = await openInput(opts._[0], io.stdin);
    const spec = specFromOptions(opts);
    await runChain(input, spec, { run, signal: ac.signal, env: io.env, stderr: io.stderr });
  } catch (err) {
    if (signalled === null) {
      if (!opts.quiet && run.input.lines > 0) io.stderr.write(summaryText(run, String(opts.out)));
      return reportError(io.stderr, err);
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  if (!opts.quiet) io.stderr.write(summaryText(run, String(opts.out)));
  if (signalled) {
    io.stderr.write(`subtee: interrupted by ${signalled}; index.json marks what was still running\n`);
    return signalled === 'SIGINT' ? EXIT.SIGINT : EXIT.SIGTERM;
  }
  return EXIT.OK;
}
