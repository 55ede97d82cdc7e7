import { spawn, type ChildProcess, type ChildProcessByStdio } from 'node:child_process';
import { once } from 'node:events';
import type { Socket } from 'node:net';
import { constants, homedir } from 'node:os';
import { basename, join } from 'node:path';
import type { ChainSpec } from '../chain/chain.js';
import { Readable } from 'node:stream';
import { EXIT, SubteeError, systemReason } from '../errors.js';
import { agentNameOf, type CommandEnd, type Session } from '../model/session.js';
import { cutText } from '../model/display.js';
import { findVersion } from '../semver.js';
import { escapeOneLine } from '../views/escape.js';
import { AFTER_KILL_MS, endGroup, signalGroup } from './process-group.js';

/** How long `CMD --version` may take, and how much of what it prints is read. */
export const VERSION_QUESTION = Object.freeze({
  timeoutMs: 20_000,
  maxOutputBytes: 64 * 1024,
  /** How long its output is read after it ended: a process it set free may hold the pipe open. */
  outputAfterEndMs: 200,
  /** Characters of an answer without a version shown in the error, at most. */
  shownChars: 80,
});

export interface CommandVersion {
  version: string | null;
  /** Why there is no version, when there is none. */
  unknownBecause: string | null;
}

/**
 * Asks the agent command for its version (`CMD --version`). The question runs in a process
 * group of its own, ended when the answer is in, the time is up or `signal` aborts: nothing it
 * starts outlives it.
 */
export async function commandVersion(
  cmd: string,
  signal?: AbortSignal,
  timeoutMs: number = VERSION_QUESTION.timeoutMs,
): Promise<CommandVersion> {
  const asked = `${cmd} --version`;
  let child: ChildProcessByStdio<null, Readable, null>;
  try {
    child = spawn(cmd, ['--version'], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
  } catch (err) {
    // Some failures (a part of the path that is a file) are thrown, not emitted.
    return { version: null, unknownBecause: `cannot run ${asked}: ${systemReason(err)}` };
  }
  let because: string | null = null;
  let letGo: NodeJS.Timeout | null = null;
  const endGroup = () => {
    if (child.pid !== undefined) signalGroup(child.pid, 'SIGKILL');
    letGo ??= setTimeout(() => child.stdout.destroy(), VERSION_QUESTION.outputAfterEndMs);
  };
  const stop = (why: string) => {
    because ??= why;
    child.kill('SIGKILL');
    endGroup();
  };
  const timer = setTimeout(() => stop(`${asked} gave no answer within ${timeoutMs / 1000} s`), timeoutMs);
  const onAbort = () => stop(`${asked} was interrupted`);
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted) onAbort();
  const chunks: Buffer[] = [];
  let held = 0;
  child.stdout.on('data', (chunk: Buffer) => {
    if (held >= VERSION_QUESTION.maxOutputBytes) return;
    chunks.push(chunk);
    held += chunk.length;
  });
  // What the command started may hold its output open: the group goes with the command, and
  // what left the group is not waited for.
  child.on('exit', endGroup);
  try {
    const [code, endSignal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
    if (!because && code !== 0) because = `${asked} ended with ${code ?? endSignal}`;
  } catch (err) {
    because ??= `cannot run ${asked}: ${systemReason(err)}`;
  } finally {
    clearTimeout(timer);
    if (letGo) clearTimeout(letGo);
    signal?.removeEventListener('abort', onAbort);
  }
  if (because) return { version: null, unknownBecause: because };
  const printed = Buffer.concat(chunks).toString('utf8');
  // Claude Code prints `2.1.328 (Claude Code)`, opencode `1.18.33`, GitHub Copilot CLI
  // `GitHub Copilot CLI 1.0.102.` and a second line.
  const version = findVersion(printed);
  return { version, unknownBecause: version ? null : noVersionIn(asked, printed) };
}

/**
 * Why an answer holds no version: what it printed (quoted, escaped, cut to `shownChars`),
 * `claude 2.1` or `true (GNU coreutils) 9.1`, has no word of the whole form x.y.z.
 */
function noVersionIn(asked: string, printed: string): string {
  const answer = printed.trim();
  if (answer === '') return `${asked} printed nothing`;
  const shown = cutText(answer, 'preview', VERSION_QUESTION.shownChars).text;
  const quoted = escapeOneLine(JSON.stringify(shown));
  return `${asked} printed ${quoted}: no word of it is a whole version x.y.z`;
}

/** The agent a command names (`…/copilot` → GitHub Copilot CLI); Claude Code otherwise. */
export function commandAgentName(cmd: string): string {
  return agentNameOf(basename(cmd).replace(/\.(exe|cmd|js)$/i, '')) ?? 'Claude Code';
}

/**
 * Under `subtee run` of Claude Code, where its transcripts are: `CLAUDE_CONFIG_DIR`, else
 * `~/.claude`, and the command's working directory. The channel router reads them at the end
 * (exact output tokens per agent); a `transcripts` given in the flags or config stands. A
 * command of no known agent's name (a wrapper: a script, `npx`, `env`) may be Claude Code: the
 * router reads the transcripts only if the stream turns out to be Claude Code's.
 */
export function withRunTranscripts(
  spec: ChainSpec,
  cmd: string,
  env: NodeJS.ProcessEnv = process.env,
  cwd: string = process.cwd(),
): ChainSpec {
  if (commandAgentName(cmd) !== 'Claude Code') return spec;
  const router = spec.stages.find((c) => c.use === 'channel-router');
  if (!router || router.transcripts !== undefined) return spec;
  const dir = env.CLAUDE_CONFIG_DIR || join(homedir(), '.claude');
  return {
    ...spec,
    stages: spec.stages.map((c) => (c === router ? { ...c, transcripts: dir, transcriptsCwd: cwd } : c)),
  };
}

export function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  return 128 + (signal ? (constants.signals[signal] ?? 0) : 0);
}

/** How the command ended, as index.json records it. */
export function commandEnd(name: string, code: number | null, signal: NodeJS.Signals | null): CommandEnd {
  return { name, exit_code: exitCodeOf(code, signal), signal: code === null ? signal : null };
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

/** The agent command of `subtee run`, started with its stdout piped to subtee. */
export interface WrappedCommand {
  child: ChildProcess;
  /** The command's exit code (128 + the signal's number when a signal ended it). */
  exited: Promise<number>;
  /** The signal that ended the command, once it has exited; null for an exit of its own. */
  readonly signal: NodeJS.Signals | null;
  /** Whether subtee signalled the command (stop, signalAll): a signal's death is then its doing. */
  readonly stopping: boolean;
  /** Sends a signal to the command and every process it started (its process group). */
  signalAll(signal: NodeJS.Signals): void;
  /**
   * Ends the command and every process it started: `first` (SIGTERM unless told), then
   * SIGKILL to what still runs after `graceMs`. Resolves once they are gone, or once SIGKILL
   * was sent and `REAP_WAIT_MS` passed (a process the kernel cannot end at once, in an
   * uninterruptible wait, is not waited for): never later than `graceMs` and a few seconds.
   */
  stop(graceMs: number, first?: NodeJS.Signals): Promise<void>;
}

/** After SIGKILL: how long the command's exit is waited for before subtee goes on without it. */
export const REAP_WAIT_MS = AFTER_KILL_MS;

/** Resolves with `promise`, or with undefined after `ms`, whichever comes first. */
export function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let done: (value: undefined) => void = () => {};
  const timeout = new Promise<undefined>((resolve) => (done = resolve));
  const timer = setTimeout(() => done(undefined), ms);
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Starts the command in a process group of its own, so that every process it starts (a Node
 * CLI's workers, a native binary, a shell's children) can be signalled together and none
 * outlives subtee. stdin and stderr stay the terminal's. Returns at once so a signal that
 * arrives while it starts is passed on to it; `commandStarted` says whether it did start.
 */
export function spawnCommand(argv: string[]): WrappedCommand {
  // Windows has no process groups to signal: there the command alone is.
  const groups = process.platform !== 'win32';
  let child: ChildProcessByStdio<null, Readable, null>;
  try {
    child = spawn(argv[0], argv.slice(1), { stdio: ['inherit', 'pipe', 'inherit'], detached: groups });
  } catch (err) {
    // Some failures (a part of the path that is a file) are thrown, not emitted.
    throw cannotStart(argv[0], err as NodeJS.ErrnoException);
  }
  let signal: NodeJS.Signals | null = null;
  let stopping = false;
  const exited = new Promise<number>((resolve) =>
    child.on('exit', (code, sig) => {
      signal = code === null ? sig : null;
      resolve(exitCodeOf(code, sig));
    }),
  );
  // The group's id is the command's pid; a command that never started has none.
  const pgid = () => child.pid;
  return {
    child,
    exited,
    get signal() {
      return signal;
    },
    get stopping() {
      return stopping;
    },
    signalAll(sig) {
      const id = pgid();
      if (id === undefined) return;
      stopping = true;
      if (groups) signalGroup(id, sig);
      else child.kill(sig);
    },
    async stop(graceMs, first = 'SIGTERM') {
      const id = pgid();
      if (id === undefined) return;
      stopping = true;
      if (!groups && child.exitCode === null && child.signalCode === null) {
        child.kill(graceMs > 0 ? first : 'SIGKILL');
        const kill = setTimeout(() => child.kill('SIGKILL'), graceMs);
        await within(exited, graceMs + REAP_WAIT_MS);
        clearTimeout(kill);
        return;
      }
      if (groups) await endGroup(id, graceMs, first);
      // The group is gone (or given up on), or the command had ended: its exit is taken now.
      await within(exited, REAP_WAIT_MS);
    },
  };
}

/** Why a command could not start, in words (`not found on PATH` rather than ENOENT). */
export function startFailure(cmd: string, err: NodeJS.ErrnoException): string {
  const where = cmd.includes('/') ? 'no such file' : 'not found on PATH';
  return systemReason(err, { ENOENT: where, EACCES: 'not executable (permission denied)' });
}

/** Resolves once the command runs; a command that cannot start is ERR_COMMAND (exit 2). */
export async function commandStarted({ child }: WrappedCommand, name: string): Promise<void> {
  const started = await new Promise<Error | null>((resolve) => {
    child.once('spawn', () => resolve(null));
    child.once('error', resolve);
  });
  if (started) throw cannotStart(name, started as NodeJS.ErrnoException);
}

/** A command that cannot start: ERR_COMMAND (exit 2), saying why. */
function cannotStart(name: string, err: NodeJS.ErrnoException): SubteeError {
  const message = `cannot start ${name}: ${startFailure(name, err)}`;
  return new SubteeError('ERR_COMMAND', message, { exitCode: EXIT.USAGE, cause: err });
}

/**
 * The command's output as the chain's input. When a process the command started still holds
 * the pipe after the command exited, the run is told (PIPE_HELD) and `stop` ends the reading.
 */
export function commandOutput(
  command: WrappedCommand,
  name: string,
  run: Session,
  stop: AbortController,
): Readable {
  const { child, exited } = command;
  child.once('exit', (exitCode, sig) => {
    const end = commandEnd(name, exitCode, sig);
    run.stateCommandEnd(end);
    // Killed from outside (the out-of-memory killer, a kill of the agent alone): cut short.
    // Stopped by subtee (a stall, a signal, a run that ended early), it is that run's end.
    if (sig !== null && exitCode === null && !command.stopping && !run.interrupted && !run.stalled) {
      run.stateInterrupted();
      run.warn('COMMAND_KILLED', `${name} was ended by ${sig} (exit ${end.exit_code})`);
    }
    watchHeldPipe(child.stdout as Socket, () => {
      const what = `${name} exited with code ${exitCodeOf(exitCode, sig)}`;
      const held = 'but a process it started still holds its stdout open; subtee stopped reading it';
      run.warn('PIPE_HELD', `${what}, ${held}`);
      stop.abort();
    });
  });
  return Readable.from(untilExit(child.stdout!, exited), { objectMode: false });
}
