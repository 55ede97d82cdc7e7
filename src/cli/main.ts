import { readFileSync } from 'node:fs';
import { constants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { builtinRegistry } from '../chain/builtins.js';
import { checkChainBeforeStart, runPreparedChain, type ChainSpec } from '../chain/chain.js';
import { prepareWrites } from '../chain/prepare-writes.js';
import type { PreparedRun } from '../chain/sinks/prepared.js';
import { StallError } from '../chain/stages/idle-watchdog.js';
import { checkRequiredVersion } from '../chain/stages/version-guard.js';
import { parseServe } from '../chain/sinks/report-options.js';
import { EXIT, OutputError, SubteeError, unwrittenText } from '../errors.js';
import { Session, type Warning } from '../model/session.js';
import { escapeOneLine } from '../views/escape.js';
import { summaryText } from '../views/summary.js';
import { resolveSpec } from './config.js';
import { checkInputFolders, checkInputs, inputFolderNames, openInput, specForInput } from './inputs.js';
import { checkMistypedCommand, commandHelp, helpCommand, withDashesHint } from './help.js';
import { OPTIONS, parseArgs, type ParsedOptions } from './options.js';
import { drainedWithin, letGoWhenStuck } from './stuck-output.js';
import type { WrappedCommand } from './run-command.js';

export interface CliIO {
  stdin: Readable;
  stdout: Writable;
  stderr: Writable & { isTTY?: boolean; columns?: number };
  env: NodeJS.ProcessEnv;
}

export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
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

/** A failed write's error line also says how many input lines are not in the output folder. */
function withUnwritten(err: unknown, run: Session): unknown {
  if (!(err instanceof OutputError) || run.input.unwritten === 0) return err;
  return new OutputError(err.code, err.path, `${err.message}; ${unwrittenText(run.input)}`, err);
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

/** `--serve`'s address, tried before any input is read (node:http is loaded only then). */
async function checkServe(spec: ChainSpec): Promise<void> {
  const serve = spec.sinks.find((s) => s.use === 'report')?.serve;
  if (typeof serve !== 'string') return;
  const { checkServeAddress } = await import('../chain/sinks/report-server.js');
  await checkServeAddress(parseServe(serve));
}

export async function main(
  argv: string[],
  io: CliIO = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: process.env },
): Promise<number> {
  ignoreClosedReader(io.stdout);
  ignoreClosedReader(io.stderr);
  // A command's code is loaded when it runs: a split loads neither report's nor stats'.
  const report = async (args: string[]) =>
    (await import('./report-command.js')).reportCommand(args, io.stdout, io.stderr);
  const stats = async (args: string[]) =>
    (await import('./stats-command.js')).statsCommand(args, io.stdout, io.stderr);
  if (argv[0] === 'report' || argv[0] === 'stats' || argv[0] === 'help') {
    try {
      if (argv[0] === 'help') return await helpCommand(argv.slice(1), io.stdout, { report, stats });
      return await (argv[0] === 'report' ? report : stats)(argv.slice(1));
    } catch (err) {
      return reportError(io.stderr, err);
    }
  }
  const isRun = argv[0] === 'run';
  let opts: ParsedOptions;
  let spec: ChainSpec;
  let registry;
  let inputs: string[] = [];
  let runCommand: typeof import('./run-command.js') | null = null;
  try {
    opts = parseArgs(isRun ? argv.slice(1) : argv, OPTIONS, isRun ? 'subtee run' : 'subtee');
    if (opts.help) {
      io.stdout.write(commandHelp(isRun ? 'run' : 'main'));
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
    if (!isRun) checkMistypedCommand(opts._);
    else runCommand = await import('./run-command.js');
    ({ spec, registry } = await resolveSpec(opts));
    if (!isRun) inputs = checkInputs(opts._, io.stdin === process.stdin);
    await checkServe(spec);
  } catch (err) {
    return reportError(io.stderr, isRun ? withDashesHint(err, argv.slice(1)) : err);
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
  let command: WrappedCommand | null = null;
  const ac = new AbortController();
  const stop = new AbortController();
  let signalled: NodeJS.Signals | null = null;
  let aborted = false;
  const graceMs = Number(opts['kill-grace-ms']);
  let stdoutWatch: ReturnType<typeof letGoWhenStuck> | null = null;
  const endStdoutWatch = () => stdoutWatch?.end();
  // First signal: stop reading (or, under subtee run, pass it to the command and every process
  // it started, SIGKILL after the grace) and let everything already read reach the sinks; a
  // stdout whose reader takes nothing for STUCK_OUTPUT_MS is let go. A second one stops at
  // once: they are killed, stdout is let go, and subtee exits 129/130/143 waiting for nothing.
  // A first signal once the last input was read to its end interrupts nothing: the run is
  // whole, its sinks finish within their own deadlines (a second signal stops them at once).
  let readWhole = false;
  let lateFirstSignal = false;
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    if (++signals === 1 && readWhole) {
      lateFirstSignal = true;
      const what = 'the input was read to its end; finishing (a second signal stops at once)';
      io.stderr.write(`subtee: ${sig}: ${what}\n`);
      stdoutWatch ??= letGoWhenStuck(io.stdout);
      return;
    }
    // A second signal after a late first one cuts short what was still being finished (the
    // sends, and lines a stage still held): index.json, written as the chain is torn down, says so.
    run.stateInterrupted();
    const first = signalled === null && signals === 1;
    signalled = sig;
    stdoutWatch ??= letGoWhenStuck(io.stdout);
    if (first) {
      if (command) void command.stop(graceMs, sig);
      else stop.abort();
      return;
    }
    aborted = true;
    stdoutWatch.letGo();
    if (!command || !runCommand) return ac.abort();
    // The chain ends once the command's end is known (it takes a moment after SIGKILL), so
    // that index.json records it; a command the kernel cannot end at once is not waited for.
    command.signalAll('SIGKILL');
    void runCommand.within(command.exited, runCommand.REAP_WAIT_MS).then(() => ac.abort());
  };
  for (const sig of STOP_SIGNALS) process.on(sig, onSignal);

  /** The live status line, on a terminal's stderr that neither stdout's text nor a command shares. */
  const startStatus = async (session: Session, chainSpec: ChainSpec) => {
    // Under subtee run the command writes its own stderr to the same terminal, at any moment.
    if (opts.quiet || isRun || io.stderr.isTTY !== true) return null;
    const { startStatusLine, statusLineWanted } = await import('./status-line.js');
    const fd = (stream: object) => (stream as { fd?: number }).fd;
    if (!statusLineWanted(chainSpec, fd(io.stdout), fd(io.stderr) ?? 2)) return null;
    return startStatusLine(session, io.stderr);
  };

  /** Runs one input (or the command) through its chain; returns the exit code. */
  const runOne = async (file: string, chainSpec: ChainSpec, last = true): Promise<number> => {
    run = new Session();
    const status = await startStatus(run, chainSpec);
    // An error line starts a line of its own, not at the end of the status line.
    const tellError = (err: unknown) => (status?.clear(), reportError(io.stderr, err));
    const warnings = tellWarnings(run, (w) => {
      // The run's error line says the same: index.json keeps it for readers of the folder.
      if (w.code === 'OUTPUT_FAILED' || w.code === 'INPUT_CUT_SHORT' || w.code === 'VERSION_REFUSED') return;
      status?.clear();
      io.stderr.write(`subtee: warning ${w.code}: ${escapeOneLine(w.message)}\n`);
    });
    let code: number = EXIT.OK;
    // A throw outside the chain's streams (a plugin's timer or callback): stop the run so
    // index.json is still written, and report it by the chain's plugins instead of a stack.
    let strayFailure: SubteeError | null = null;
    const builtins = builtinRegistry();
    const plugins = [...chainSpec.stages, ...chainSpec.sinks]
      .map((c) => c.use)
      .filter((use) => builtins.get(use) === undefined);
    const onStrayThrow = (err: unknown) => {
      const why = err instanceof Error ? err.message : String(err);
      strayFailure ??=
        plugins.length > 0
          ? new SubteeError('ERR_PLUGIN_FAILED', `plugin ${plugins.join(' or ')} failed: ${why}`, {
              cause: err,
            })
          : new SubteeError('ERR_INTERNAL', `internal error: ${why}`, { cause: err });
      stop.abort();
    };
    process.on('uncaughtException', onStrayThrow);
    let prepared: PreparedRun | null = null;
    try {
      // A sink's optional package that is missing, an environment or an option only a sink's
      // code can judge (the ClickHouse client's URL) fails before the folder is made ready and
      // before the command is started. runPreparedChain runs what it checked, checking nothing
      // again: a plugin's checkEnvironment is called once a run.
      const checked = await checkChainBeforeStart(chainSpec, { registry, env: io.env });
      let input: Readable;
      if (runCommand) {
        const { commandAgentName, commandOutput, commandStarted, commandVersion, spawnCommand } = runCommand;
        const required = chainSpec.stages.find((s) => s.use === 'version-guard')?.requireVersion;
        if (typeof required === 'string') {
          const asked = await commandVersion(opts.rest[0], stop.signal);
          if (signalled) return signalExit(signalled);
          const agent = commandAgentName(opts.rest[0]);
          checkRequiredVersion(asked.version, required, agent, asked.unknownBecause);
          run.stateCheckedCommandVersion(asked.version);
        }
        // Where the run writes is made ready before the command starts: a folder or a log file
        // that cannot be used refuses the run before the agent does anything.
        prepared = prepareWrites(chainSpec);
        if (signalled) return signalExit(signalled);
        command = spawnCommand(opts.rest);
        await commandStarted(command, opts.rest[0]);
        input = commandOutput(command, opts.rest[0], run, stop);
      } else {
        input = await openInput(file, io.stdin);
      }
      readWhole = false;
      if (last) input.once('end', () => (readWhole = true));
      const started = command as WrappedCommand | null;
      const chainOptions = {
        session: run,
        signal: ac.signal,
        stop: stop.signal,
        // The input stopped early (a stall, a failed write, a refused version): the command is
        // stopped now and its end awaited (bounded by the grace), so index.json records it.
        settleInput: started ? () => started.stop(aborted ? 0 : graceMs) : undefined,
        stderr: io.stderr,
        pluginEndTimeoutMs: Number(opts['plugin-end-timeout-ms']),
      };
      await runPreparedChain(input, checked, chainOptions, prepared ?? undefined);
      warnings.catchUp();
      if (strayFailure) throw strayFailure;
      if (command) code = await command.exited;
      // A run that resends spooled ClickHouse rows has work without input of its own.
      const resends = chainSpec.sinks.some((s) => s.use === 'clickhouse' && s.resend !== undefined);
      if (run.input.lines === 0 && signalled === null && !resends) {
        const empty = inputEmpty(isRun ? opts.rest[0] : null, run.input.blankLines);
        code = code === EXIT.OK ? empty.exitCode : code;
        tellError(empty);
      }
    } catch (err) {
      warnings.catchUp();
      if (strayFailure) code = tellError(strayFailure);
      else if (err instanceof StallError) code = EXIT.STALL;
      else if (!aborted || (err as Error)?.name !== 'AbortError')
        code = tellError(withUnwritten(err, run));
    } finally {
      // Nothing the command started outlives the run: whatever of its process group still
      // runs (the command after a stall or a failure, a process that held its stdout) is
      // stopped, at once after a second signal.
      await command?.stop(aborted ? 0 : graceMs);
      // A command that did not start (or a signal before it did) leaves the folder as it was.
      prepared?.release();
      process.off('uncaughtException', onStrayThrow);
      status?.stop();
      command?.child.stdout?.destroy();
      warnings.end();
    }
    const out = String(chainSpec.sinks.find((s) => s.use === 'files')?.out ?? '');
    if (!opts.quiet && run.input.lines > 0) io.stderr.write(summaryText(run, out));
    return code;
  };

  let code: number = EXIT.OK;
  try {
    if (runCommand) code = await runOne('', runCommand.withRunTranscripts(spec, opts.rest[0]));
    // Several inputs run one after another, each into its own folder; the first failure or
    // signal ends the series.
    else {
      for (let i = 0; i < inputs.length && code === EXIT.OK && signalled === null; i++) {
        const chainSpec = names.length > 0 ? specForInput(spec, names[i]) : spec;
        code = await runOne(inputs[i], chainSpec, i === inputs.length - 1);
      }
    }
  } finally {
    for (const sig of STOP_SIGNALS) process.off(sig, onSignal);
    endStdoutWatch();
  }
  if (code === EXIT.STALL) {
    const stopped = isRun ? 'the command was stopped; ' : '';
    const what = `stalled; ${stopped}index.json marks what was still running`;
    reportError(io.stderr, new SubteeError('ERR_STALL', what, { exitCode: EXIT.STALL }));
  }
  // An interrupted run is never a success, whatever the command returned on the signal: a
  // CI step's `&& deploy` must not run.
  if (signalled) {
    code = signalExit(signalled);
    // After the input's end (the first signal let the run finish) the lines are all on disk:
    // what the second cut short is the sending.
    const what = lateFirstSignal
      ? `interrupted by ${signalled} after the input's end; what was still being sent was cut short`
      : `interrupted by ${signalled}; index.json marks what was still running`;
    reportError(io.stderr, new SubteeError('ERR_INTERRUPTED', what, { exitCode: code }));
    // What stays queued for a reader that takes nothing would keep the process alive: after a
    // signal subtee leaves without it (stderr gets the same bound for its last lines). After a
    // second signal it waits for nothing else either: a plugin's timer or socket, or a promise
    // it is still settling, does not hold the process.
    if (aborted || io.stdout.writableLength > 0) {
      await drainedWithin(io.stderr);
      process.exit(code);
    }
  }
  return code;
}

/**
 * The signals that interrupt a run: a terminal closed or an ssh session dropped (SIGHUP) ends
 * it as Ctrl-C and `kill` do, with what was read on disk and index.json written.
 */
const STOP_SIGNALS = ['SIGHUP', 'SIGINT', 'SIGTERM'] as const;

/** An interrupted run's exit code: 128 + the signal's number (129, 130, 143). */
export function signalExit(sig: NodeJS.Signals): number {
  return 128 + (constants.signals[sig] ?? 0);
}

/**
 * Tells each of a run's warnings once, in order, as they are recorded: a cursor into the
 * session's list, caught up at once by `catchUp` (before an error line) and last by `end`.
 */
function tellWarnings(run: Session, tell: (w: Warning) => void): { catchUp(): void; end(): void } {
  let told = 0;
  let following = true;
  const catchUp = () => {
    while (told < run.warnings.length) tell(run.warnings[told++]);
  };
  void (async () => {
    while (following) {
      await run.warningAt(told);
      if (following) catchUp();
    }
  })();
  return {
    catchUp,
    end: () => {
      catchUp();
      following = false;
    },
  };
}

/**
 * An input without a line (or with blank ones only), such as `claude -p … --output-format
 * stream-json` without `--verbose` prints: an empty folder must not pass for a run (exit 3).
 */
export function inputEmpty(command: string | null, blankLines = 0): SubteeError {
  const lines = blankLines > 0 ? 'only blank lines' : 'no lines';
  const what = command === null ? `the input held ${lines}` : `${command} printed ${lines} on stdout`;
  const hint = 'Claude Code prints stream-json only with --output-format stream-json --verbose';
  return new SubteeError('INPUT_EMPTY', `${what}: nothing to split (${hint})`, { exitCode: EXIT.IO });
}
