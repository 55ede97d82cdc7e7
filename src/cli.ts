import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  accessSync,
  constants as fsConstants,
  createReadStream,
  fstatSync,
  readdirSync,
  readFileSync,
  statSync,
} from 'node:fs';
import type { Socket } from 'node:net';
import { constants } from 'node:os';
import { basename, isAbsolute, join, relative, resolve } from 'node:path';
import { Readable, type Writable } from 'node:stream';
import { builtinRegistry } from './chain/builtins.js';
import { defaultSpec, runChain, type ChainSpec } from './chain/chain.js';
import { applyFlags, checkSpec, readConfig, registerPlugins } from './chain/config.js';
import { decompressed } from './decompress.js';
import { FILE_READ_BYTES, inputIsFolder, inputUnreadable, openInputFile } from './input-file.js';
import { EXIT, OutputError, SubteeError } from './errors.js';
import { helpText, parseArgs, type ParsedOptions } from './chain/options.js';
import { escapeOneLine } from './views/escape.js';
import { Session } from './model/session.js';
import { checkRequiredVersion } from './chain/stages/version-guard.js';
import { StallError } from './chain/stages/idle-watchdog.js';
import { FileNamer } from './chain/sinks/file-names.js';
import { statusLine, summaryText } from './views/summary.js';
import { reportCommand } from './views/report/command.js';
import { applyReportFlags } from './views/report/flags.js';

export interface CliIO {
  stdin: Readable;
  stdout: Writable;
  stderr: Writable & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
}

const USAGE = `subtee [options] [FILE…]
subtee run [options] -- CMD [ARGS…]
subtee report OUT

Splits Claude Code's stream-json (stdin, FILE, or the stdout of CMD) into one transcript per subagent:
  claude -p "…" --output-format stream-json --verbose --forward-subagent-text | subtee --out logs
  subtee run --out logs -- claude -p "…" --output-format stream-json --verbose --forward-subagent-text
gzip input (zstd too, on Node.js 22.15 or later) is decompressed; several FILEs each get a folder OUT/<name>/.`;

export const EXIT_CODES_HELP = `Exit codes: 0 ok (subtee run: the command's exit code), 1 internal error, 2 bad usage or config,
  3 input or output unusable (disk full, --out not a folder), 4 agent version refused, 124 stalled,
  130 SIGINT, 143 SIGTERM.`;

export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}

/** One line on stderr for an error: its message and code, never a stack trace. */
export function reportError(stderr: Writable, err: unknown): number {
  if (err instanceof SubteeError) {
    stderr.write(`subtee: ${escapeOneLine(err.message)} [${err.code}]\n`);
    return err.exitCode;
  }
  const e = err as NodeJS.ErrnoException;
  stderr.write(
    `subtee: internal error: ${escapeOneLine(e?.message ?? String(err))} [${e?.code ?? 'ERR_INTERNAL'}]\n`,
  );
  return EXIT.INTERNAL;
}

/**
 * Checks every input before anything is written: a missing, unreadable or folder input is
 * exit 3 with no output folder left behind. No FILE means stdin (`subtee < dir` is a folder too).
 */
export function checkInputs(files: string[], stdinIsProcess = true): string[] {
  const inputs = files.length === 0 ? ['-'] : files;
  if (inputs.filter((f) => f === '-').length > 1) {
    throw new SubteeError('ERR_USAGE', 'stdin (-) can be read only once', { exitCode: EXIT.USAGE });
  }
  for (const file of inputs) {
    if (file === '-') {
      if (stdinIsProcess && isFolder(0)) throw inputIsFolder('stdin');
      continue;
    }
    try {
      accessSync(file, fsConstants.R_OK);
      if (statSync(file).isDirectory()) throw inputIsFolder(file);
    } catch (err) {
      throw err instanceof SubteeError ? err : inputUnreadable(file, err);
    }
  }
  return inputs;
}

async function openInput(file: string, stdin: Readable): Promise<Readable> {
  if (file === '-') {
    // `subtee < recorded.jsonl`: read the file behind stdin in large reads.
    const fileBehind = stdin === process.stdin && isRegularFile(0);
    return decompressed(
      fileBehind ? createReadStream('', { fd: 0, highWaterMark: FILE_READ_BYTES }) : stdin,
      'stdin',
    );
  }
  return openInputFile(file);
}

/** Folder names under OUT for several inputs: the file names without extensions, made safe and unique. */
export function inputFolderNames(inputs: string[]): string[] {
  const namer = new FileNamer();
  return inputs.map((f) => {
    if (f === '-') return namer.stemFor('stdin');
    const name = basename(f)
      .replace(/\.(gz|zst)$/i, '')
      .replace(/\.(jsonl|ndjson|json|log|txt)$/i, '');
    return namer.stemFor(name || 'input');
  });
}

const isInside = (dir: string, p: string) => {
  const rel = relative(resolve(dir), resolve(p));
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
};

/**
 * The chain for one of several inputs: each files sink writes to OUT/<name>/, and a pino file
 * inside OUT moves along (one event log per input); anything outside OUT is shared in order.
 */
export function specForInput(spec: ChainSpec, name: string): ChainSpec {
  const outs = spec.sinks
    .filter((c) => c.use === 'files' && typeof c.out === 'string')
    .map((c) => String(c.out));
  const rebase = (p: unknown) => {
    const out = typeof p === 'string' ? outs.find((o) => isInside(o, p)) : undefined;
    return out === undefined ? p : join(out, name, relative(resolve(out), resolve(String(p))));
  };
  return {
    stages: spec.stages.map((c) => ({ ...c })),
    sinks: spec.sinks.map((c) => {
      if (c.use === 'files' && typeof c.out === 'string') return { ...c, out: join(c.out, name) };
      if (c.use === 'pino' && c.destination !== undefined)
        return { ...c, destination: rebase(c.destination) };
      return { ...c };
    }),
  };
}

/** Every per-input folder is checked before the first input is read, so a refusal leaves nothing half done. */
function checkInputFolders(spec: ChainSpec, names: string[]): void {
  for (const files of spec.sinks.filter((c) => c.use === 'files' && typeof c.out === 'string')) {
    const out = String(files.out);
    const top = statOrNull(out);
    if (top && !top.isDirectory()) {
      throw new OutputError('ERR_OUT_NOT_DIR', out, `--out ${out} exists and is not a folder`);
    }
    for (const name of names) {
      const dir = join(out, name);
      const st = statOrNull(dir);
      if (st && !st.isDirectory())
        throw new OutputError('ERR_OUT_NOT_DIR', dir, `${dir} exists and is not a folder`);
      if (st && files.force !== true && readdirSync(dir).length > 0) {
        const why = 'already holds files (a previous run?); choose a new folder or pass --force';
        throw new OutputError('ERR_OUT_NOT_EMPTY', dir, `${dir} ${why}`);
      }
    }
  }
}

function statOrNull(p: string) {
  try {
    return statSync(p);
  } catch {
    return null;
  }
}

function isRegularFile(fd: number): boolean {
  try {
    return fstatSync(fd).isFile();
  } catch {
    return false;
  }
}

function isFolder(fd: number): boolean {
  try {
    return fstatSync(fd).isDirectory();
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
  return 128 + (signal ? (constants.signals[signal] ?? 0) : 0);
}

/** Silence on the agent's stdout, after the agent exited, that means another process holds it. */
const HELD_PIPE_QUIET_MS = 1000;
/** Time caught up with a pipe that another process keeps writing to, after the agent exited. */
const HELD_PIPE_MAX_MS = 5000;
const HELD_PIPE_CHECK_MS = 100;

/**
 * Once the agent has exited, its stdout ends as soon as what it wrote has been read, unless a
 * process it started inherited the pipe: then the end comes when that process exits, maybe
 * never. Calls `onHeld` when the pipe has stayed empty for HELD_PIPE_QUIET_MS, or when subtee
 * has been caught up with it (nothing buffered: what the agent wrote before it exited has been
 * read) for HELD_PIPE_MAX_MS while that process still writes. Time is counted per check and
 * capped, as the watchdog does, so an event loop blocked with bytes waiting in the pipe is not
 * mistaken for silence; a backlog behind a slow sink keeps the buffer full and is not counted.
 */
function watchHeldPipe(pipe: Socket, onHeld: () => void): void {
  let bytes = pipe.bytesRead;
  let quietMs = 0;
  let caughtUpMs = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    if (pipe.readableEnded || pipe.destroyed) return clearInterval(timer);
    const now = performance.now();
    const gap = Math.min(now - last, 2 * HELD_PIPE_CHECK_MS);
    last = now;
    if (pipe.readableLength > 0) {
      quietMs = 0;
    } else {
      caughtUpMs += gap;
      quietMs = pipe.bytesRead === bytes ? quietMs + gap : 0;
    }
    bytes = pipe.bytesRead;
    if (quietMs >= HELD_PIPE_QUIET_MS || caughtUpMs >= HELD_PIPE_MAX_MS) {
      clearInterval(timer);
      onHeld();
    }
  }, HELD_PIPE_CHECK_MS);
  timer.unref();
}

/**
 * The agent's output, ending only once the agent has exited: an agent that closes its stdout
 * and then hangs is still timed by the watchdog (and stopped when it fires).
 */
async function* untilExit(stdout: Readable, exited: Promise<number>): AsyncGenerator<Buffer> {
  yield* stdout as AsyncIterable<Buffer>;
  await exited;
}

const guarded = new WeakSet<Writable>();

/**
 * A reader that goes away (`subtee 2>&1 | head -1`) ends that output only. Without a listener
 * the EPIPE of a later write (a warning, the summary) would end the process with exit 1; the
 * stdout sink notices a closed stdout by itself, and nothing can be told on a closed stderr.
 */
function ignoreClosedReader(stream: Writable): void {
  if (guarded.has(stream)) return;
  guarded.add(stream);
  stream.on('error', () => {});
}

export async function main(
  argv: string[],
  io: CliIO = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: process.env },
): Promise<number> {
  ignoreClosedReader(io.stdout);
  ignoreClosedReader(io.stderr);
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
  let inputs: string[] = [];
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
    if (isRun && (opts.rest.length === 0 || opts._.length > 0))
      throw new SubteeError(
        'ERR_USAGE',
        'subtee run needs the command after --: subtee run [options] -- CMD [ARGS…]',
        { exitCode: EXIT.USAGE },
      );
    if (!isRun && opts.rest.length > 0)
      throw new SubteeError(
        'ERR_USAGE',
        'a command after -- needs subtee run: subtee run [options] -- CMD [ARGS…]',
        { exitCode: EXIT.USAGE },
      );
    ({ spec, registry } = await resolveSpec(opts));
    if (!isRun) inputs = checkInputs(opts._, io.stdin === process.stdin);
  } catch (err) {
    return reportError(io.stderr, err);
  }
  const names = inputs.length > 1 ? inputFolderNames(inputs) : [];
  if (names.length > 0) {
    try {
      checkInputFolders(spec, names);
    } catch (err) {
      return reportError(io.stderr, err);
    }
  }

  let run = new Session();
  let child: ChildProcess | null = null;
  let childExit: Promise<number> | null = null;
  const ac = new AbortController();
  const stop = new AbortController();
  let signalled: NodeJS.Signals | null = null;
  let aborted = false;
  // First signal: stop reading (or, under subtee run, pass it to the agent, which then ends
  // its output) and let everything already read reach the sinks. A second one stops at once:
  // the agent is killed and subtee exits 130/143 without waiting for anything.
  const onSignal = (sig: NodeJS.Signals) => {
    run.interrupted = true;
    const first = signalled === null;
    signalled = sig;
    if (first) {
      if (child) child.kill(sig);
      else stop.abort();
      return;
    }
    aborted = true;
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    ac.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // SIGTERM, then SIGKILL after the grace; resolves once the command is gone.
  const stopChild = async () => {
    if (!child || !childExit) return;
    if (child.exitCode === null && child.signalCode === null) {
      child.kill(aborted ? 'SIGKILL' : 'SIGTERM');
      const kill = setTimeout(() => child!.kill('SIGKILL'), Number(opts['kill-grace-ms']));
      await childExit;
      clearTimeout(kill);
    }
  };

  /** Runs one input (or the command) through its chain; returns the exit code. */
  const runOne = async (file: string, chainSpec: ChainSpec): Promise<number> => {
    run = new Session();
    const status = !opts.quiet && io.stderr.isTTY === true ? startStatusLine(run, io.stderr) : null;
    run.onWarning((w) => {
      status?.clear();
      io.stderr.write(`subtee: warning ${w.code}: ${escapeOneLine(w.message)}\n`);
    });
    let code: number = EXIT.OK;
    try {
      let input: Readable;
      if (isRun) {
        const required = chainSpec.stages.find((s) => s.use === 'version-guard')?.requireVersion;
        if (typeof required === 'string') checkRequiredVersion(commandVersion(opts.rest[0]), required);
        if (signalled) return signalled === 'SIGINT' ? EXIT.SIGINT : EXIT.SIGTERM;
        child = spawn(opts.rest[0], opts.rest.slice(1), { stdio: ['inherit', 'pipe', 'inherit'] });
        const c = child;
        childExit = new Promise((resolve) => c.on('exit', (code, sig) => resolve(exitCodeOf(code, sig))));
        const started = await new Promise<Error | null>((resolve) => {
          c.once('spawn', () => resolve(null));
          c.once('error', resolve);
        });
        if (started) {
          const why = (started as NodeJS.ErrnoException).code ?? started.message;
          const message = `cannot start ${opts.rest[0]}: ${why}`;
          throw new SubteeError('ERR_COMMAND', message, { exitCode: EXIT.USAGE, cause: started });
        }
        c.once('exit', (exitCode, sig) =>
          watchHeldPipe(c.stdout as Socket, () => {
            const what = `${opts.rest[0]} exited with code ${exitCodeOf(exitCode, sig)}`;
            const held = 'but a process it started still holds its stdout open; subtee stopped reading it';
            run.warn('PIPE_HELD', `${what}, ${held}`);
            stop.abort();
          }),
        );
        input = Readable.from(untilExit(c.stdout!, childExit), { objectMode: false });
      } else {
        input = await openInput(file, io.stdin);
      }
      const chainOptions = {
        session: run,
        registry,
        signal: ac.signal,
        stop: stop.signal,
        env: io.env,
        stderr: io.stderr,
      };
      await runChain(input, chainSpec, chainOptions);
      if (childExit) code = await childExit;
    } catch (err) {
      if (err instanceof StallError) code = EXIT.STALL;
      else if (!aborted || (err as Error)?.name !== 'AbortError') code = reportError(io.stderr, err);
      await stopChild();
    } finally {
      status?.stop();
      // A process the agent started may hold the pipe open; it must not keep subtee alive.
      child?.stdout?.destroy();
    }
    const out = String(chainSpec.sinks.find((s) => s.use === 'files')?.out ?? '');
    if (!opts.quiet && run.input.lines > 0) io.stderr.write(summaryText(run, out));
    return code;
  };

  let code: number = EXIT.OK;
  try {
    if (isRun) code = await runOne('', spec);
    // Several inputs run one after another, each into its own folder; the first failure or
    // signal ends the series.
    else {
      for (let i = 0; i < inputs.length && code === EXIT.OK && signalled === null; i++) {
        code = await runOne(inputs[i], names.length > 0 ? specForInput(spec, names[i]) : spec);
      }
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  if (code === EXIT.STALL)
    io.stderr.write(
      `subtee: stalled; ${isRun ? 'the command was stopped; ' : ''}index.json marks what was still running\n`,
    );
  if (signalled && (code === EXIT.OK || !isRun || aborted)) {
    io.stderr.write(`subtee: interrupted by ${signalled}; index.json marks what was still running\n`);
    if (!isRun || aborted) code = signalled === 'SIGINT' ? EXIT.SIGINT : EXIT.SIGTERM;
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
