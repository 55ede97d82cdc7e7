import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createReadStream, fstatSync, readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { constants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { builtinRegistry } from './chain/builtins.js';
import { defaultSpec, runChain, type ChainSpec } from './chain/chain.js';
import { applyFlags, checkSpec, readConfig, registerPlugins } from './chain/config.js';
import { EXIT, SubteeError } from './errors.js';
import { helpText, parseArgs, type ParsedOptions } from './chain/options.js';
import { escapeOneLine } from './views/escape.js';
import { Session } from './model/session.js';
import { checkRequiredVersion } from './chain/stages/version-guard.js';
import { StallError } from './chain/stages/idle-watchdog.js';
import { statusLine, summaryText } from './views/summary.js';
import { reportCommand } from './views/report/command.js';
import { applyReportFlags } from './views/report/flags.js';

export interface CliIO {
  stdin: Readable;
  stdout: Writable;
  stderr: Writable & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
}

const USAGE = `subtee [options] [FILE]
subtee run [options] -- CMD [ARGS…]
subtee report OUT

Splits Claude Code's stream-json (stdin, FILE, or the stdout of CMD) into one transcript per subagent:
  claude -p "…" --output-format stream-json --verbose --forward-subagent-text | subtee --out logs
  subtee run --out logs -- claude -p "…" --output-format stream-json --verbose --forward-subagent-text`;

export const EXIT_CODES_HELP = `Exit codes: 0 ok (subtee run: the command's exit code), 1 internal error, 2 bad usage or config,
  3 input or output unusable (disk full, --out not a folder), 4 agent version refused, 124 stalled,
  130 SIGINT, 143 SIGTERM.`;

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

/** Reads of 256 KiB when the input is a file (a pipe gives at most 64 KiB a read anyway); larger reads were faster but pushed peak memory with 2,000 subagents to 150 MB. */
const FILE_READ_BYTES = 256 * 1024;

async function openInput(file: string | undefined, stdin: Readable): Promise<Readable> {
  if (file === undefined || file === '-') {
    // `subtee < recorded.jsonl`: read the file behind stdin in large reads.
    if (stdin === process.stdin && isRegularFile(0)) return createReadStream('', { fd: 0, highWaterMark: FILE_READ_BYTES });
    return stdin;
  }
  try {
    const fh = await open(file, 'r');
    return fh.createReadStream({ highWaterMark: FILE_READ_BYTES });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new SubteeError('ERR_INPUT', `cannot read ${file}: ${code === 'ENOENT' ? 'no such file' : code ?? String(err)}`, { exitCode: EXIT.IO, cause: err });
  }
}

function isRegularFile(fd: number): boolean {
  try {
    return fstatSync(fd).isFile();
  } catch {
    return false;
  }
}

/** Builds the chain spec from the config file (if any) and the flags, and the registry with its plugins. */
export async function resolveSpec(o: ParsedOptions) {
  const registry = builtinRegistry();
  let spec: ChainSpec;
  if (typeof o.config === 'string') {
    const { config, baseDir } = readConfig(o.config);
    await registerPlugins(registry, config.plugins, baseDir);
    spec = applyFlags(config, o, true);
  } else {
    spec = applyFlags(defaultSpec(String(o.out)), o, false);
  }
  spec = applyReportFlags(spec, o);
  checkSpec(spec, registry, typeof o.config === 'string' ? `config ${o.config}` : 'options');
  return { spec, registry };
}

/** Asks the agent command for its version, as `claude --version` prints it (`2.1.220 (Claude Code)`). */
export function commandVersion(cmd: string): string | null {
  const r = spawnSync(cmd, ['--version'], { encoding: 'utf8', timeout: 20_000 });
  if (r.error || r.status !== 0) return null;
  return r.stdout.trim().split(/\s+/)[0] || null;
}

function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  return 128 + (signal ? constants.signals[signal] ?? 0 : 0);
}

export async function main(argv: string[], io: CliIO = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: process.env }): Promise<number> {
  if (argv[0] === 'report') {
    try {
      return reportCommand(argv.slice(1), io.stdout, io.stderr);
    } catch (err) {
      return reportError(io.stderr, err);
    }
  }
  const isRun = argv[0] === 'run';
  let opts: ParsedOptions;
  let spec: ChainSpec;
  let registry;
  try {
    opts = parseArgs(isRun ? argv.slice(1) : argv);
    if (opts.help) {
      io.stdout.write(`${helpText(USAGE)}\n${EXIT_CODES_HELP}\n`);
      return EXIT.OK;
    }
    if (opts.version) {
      io.stdout.write(`subtee ${packageVersion()}\n`);
      return EXIT.OK;
    }
    if (isRun && (opts.rest.length === 0 || opts._.length > 0)) throw new SubteeError('ERR_USAGE', 'subtee run needs the command after --: subtee run [options] -- CMD [ARGS…]', { exitCode: EXIT.USAGE });
    if (!isRun && opts.rest.length > 0) throw new SubteeError('ERR_USAGE', 'a command after -- needs subtee run: subtee run [options] -- CMD [ARGS…]', { exitCode: EXIT.USAGE });
    if (opts._.length > 1) throw new SubteeError('ERR_USAGE', `expected at most one input FILE, got ${opts._.length}`, { exitCode: EXIT.USAGE });
    ({ spec, registry } = await resolveSpec(opts));
  } catch (err) {
    return reportError(io.stderr, err);
  }

  const run = new Session();
  const status = !opts.quiet && io.stderr.isTTY === true ? startStatusLine(run, io.stderr) : null;
  run.onWarning((w) => {
    status?.clear();
    io.stderr.write(`subtee: warning ${w.code}: ${escapeOneLine(w.message)}\n`);
  });

  let child: ChildProcess | null = null;
  let childExit: Promise<number> | null = null;
  const ac = new AbortController();
  const stop = new AbortController();
  let signalled: NodeJS.Signals | null = null;
  // First signal: stop reading (or, under subtee run, pass it to the agent, which then ends
  // its output) and let everything already read reach the sinks. A second one aborts.
  const onSignal = (sig: NodeJS.Signals) => {
    run.interrupted = true;
    const first = signalled === null;
    signalled = sig;
    if (!first) ac.abort();
    else if (child) child.kill(sig);
    else stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // SIGTERM, then SIGKILL after the grace; resolves once the command is gone.
  const stopChild = async () => {
    if (!child || !childExit) return;
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const kill = setTimeout(() => child!.kill('SIGKILL'), Number(opts['kill-grace-ms']));
      await childExit;
      clearTimeout(kill);
    }
  };

  let code: number = EXIT.OK;
  try {
    let input: Readable;
    if (isRun) {
      const required = spec.stages.find((s) => s.use === 'version-guard')?.requireVersion;
      if (typeof required === 'string') checkRequiredVersion(commandVersion(opts.rest[0]), required);
      child = spawn(opts.rest[0], opts.rest.slice(1), { stdio: ['inherit', 'pipe', 'inherit'] });
      const c = child;
      childExit = new Promise((resolve) => c.on('exit', (code, sig) => resolve(exitCodeOf(code, sig))));
      const started = await new Promise<Error | null>((resolve) => {
        c.once('spawn', () => resolve(null));
        c.once('error', resolve);
      });
      if (started) throw new SubteeError('ERR_COMMAND', `cannot start ${opts.rest[0]}: ${(started as NodeJS.ErrnoException).code ?? started.message}`, { exitCode: EXIT.USAGE, cause: started });
      input = c.stdout!;
    } else {
      input = await openInput(opts._[0], io.stdin);
    }
    await runChain(input, spec, { session: run, registry, signal: ac.signal, stop: isRun ? undefined : stop.signal, env: io.env, stderr: io.stderr });
    if (childExit) code = await childExit;
  } catch (err) {
    if (err instanceof StallError) code = EXIT.STALL;
    else if (signalled === null || (err as Error)?.name !== 'AbortError') code = reportError(io.stderr, err);
    await stopChild();
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    status?.stop();
  }
  if (!opts.quiet && run.input.lines > 0) io.stderr.write(summaryText(run, String(spec.sinks.find((s) => s.use === 'files')?.out ?? '')));
  if (code === EXIT.STALL) io.stderr.write(`subtee: stalled; ${isRun ? 'the command was stopped; ' : ''}index.json marks what was still running\n`);
  if (signalled && (code === EXIT.OK || !isRun)) {
    io.stderr.write(`subtee: interrupted by ${signalled}; index.json marks what was still running\n`);
    if (!isRun) code = signalled === 'SIGINT' ? EXIT.SIGINT : EXIT.SIGTERM;
  }
  return code;
}

function startStatusLine(run: Session, stderr: Writable) {
  let shown = false;
  let lastLines = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const rate = ((run.input.lines - lastLines) * 1000) / Math.max(1, now - last);
    lastLines = run.input.lines;
    last = now;
    stderr.write(`\r\x1b[2K${statusLine(run, rate)}`);
    shown = true;
  }, 250);
  timer.unref();
  const clear = () => {
    if (shown) stderr.write('\r\x1b[2K');
    shown = false;
  };
  return { clear, stop: () => (clearInterval(timer), clear()) };
}
