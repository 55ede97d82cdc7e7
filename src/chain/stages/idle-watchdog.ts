import type { Transform } from 'node:stream';
import { withDefaults } from '../../defaults.js';
import { EXIT, SubteeError } from '../../errors.js';
import type { RecordBatch } from '../../model/record.js';
import { escapeOneLine } from '../../views/escape.js';
import { requireSession, type Session } from '../../model/session.js';
import { viewOf } from '../../model/line-view.js';
import { boundedText } from '../../model/bounded-text.js';
import {
  cleanName,
  InFlight,
  STALL_WAITS_LISTED,
  WAIT_LIMIT_DEFAULTS,
  type HeldRecords,
  type Stall,
  type StalledWait,
  type StreamFacts,
  type Wait,
  type WaitLimits,
} from '../../model/in-flight.js';
import { summaryLabels } from '../../views/summary.js';
import { createBatchTransform } from '../batch-transform.js';
import { BUILTIN_KIT, defineBuiltin, type OptionSpec } from '../plugin.js';

/** Characters of a channel label in a stall report (an agent type is the stream's to choose). */
const LABEL_CHARS = 120;

export interface IdleWatchdogSettings extends WaitLimits {
  graceMs: number;
  onStall: 'fail' | 'warn';
  checkIntervalMs: number;
  stallDrainMs: number;
}

export const IDLE_WATCHDOG_DEFAULTS: Readonly<IdleWatchdogSettings> = Object.freeze({
  ...WAIT_LIMIT_DEFAULTS,
  /** Added to every allowance: the agent's own timeout fires first, then it reports. */
  graceMs: 30_000,
  /** `fail` ends the run (exit 124); `warn` only reports. */
  onStall: 'fail',
  /** How often silence is measured. */
  checkIntervalMs: 1000,
  /** After a stall: how long the chain may take to drain what it read before it is torn down. */
  stallDrainMs: 5000,
});

export interface Clock {
  now(): number;
  setInterval(fn: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
  /** Whether the interval keeps the process running (a Node timer's ref and unref). */
  hold?(handle: unknown, held: boolean): void;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  // Held (not unref'd): the watchdog is what ends a run that stopped moving, so a run whose
  // input is read but whose chain has not finished stays alive until it ends or stalls.
  // The timer is cleared when the chain ends or is destroyed.
  setInterval: (fn, ms) => setInterval(fn, ms),
  clearInterval: (h) => clearInterval(h as NodeJS.Timeout),
  hold: (h, held) => void (held ? (h as NodeJS.Timeout).ref() : (h as NodeJS.Timeout).unref()),
};

export interface IdleWatchdogOptions extends Partial<IdleWatchdogSettings> {
  clock?: Clock;
  /**
   * Stops the chain's input (runChain hands it over, see PluginContext.stopInput): a stall
   * then lets what was read reach the sinks before the chain fails. Without it the stream
   * fails at once.
   */
  stopInput?: (reason: Error) => void;
  /**
   * Resolves once the chain's input has ended (runChain's, see BuiltinContext.inputEnded): the
   * time a stall gives the chain to drain (`stallDrainMs`) is counted from then, so the wait
   * for a command to be stopped under `subtee run` is not counted against the stages.
   */
  inputEnded?: Promise<void>;
  /**
   * The plugin calls pending above the watchdog in its chain (see
   * BuiltinContext.pluginCallsAbove): a stall while one holds records names the plugin and
   * fails as ERR_PLUGIN_FAILED, not ERR_STALL.
   */
  pluginCallsAbove?: () => readonly HeldRecords[];
  /** The chain's session, shared by every stage (required). */
  session: Session;
}

export class StallError extends SubteeError {
  constructor(message: string) {
    super('ERR_STALL', message, { exitCode: EXIT.STALL });
    this.name = 'StallError';
  }
}

/**
 * The run's error for a stall: ERR_STALL, or, when a plugin above the watchdog held records,
 * ERR_PLUGIN_FAILED naming the one that held them longest (the silence was its).
 */
function stallError(stall: Stall, message: string): SubteeError {
  const held = stall.heldBy[0];
  if (held === undefined) return new StallError(message);
  return new SubteeError(
    'ERR_PLUGIN_FAILED',
    `plugin ${held.plugin}: ${held.what} held records for ${seconds(held.heldMs)}, ` +
      `past the idle watchdog's allowance (${seconds(stall.allowedMs)} without input)`,
  );
}

/** Names a channel in a stall report. */
export type ChannelLabeler = (channelId: string | null) => string;

const idLabel: ChannelLabeler = (id) => id ?? 'main';

/**
 * Silence accounting, free of streams and timers so tests drive it with plain numbers.
 * The allowed silence is the longest wait in flight (see InFlight) plus the grace, and never
 * less than the idle timeout. Silence grows only between checks while subtee is waiting for
 * input: a check that finds the chain backed up (a slow sink) does not count, and a gap
 * between checks longer than two intervals (the event loop was blocked by a slow synchronous
 * write) counts as two.
 */
export class IdleWatchdog {
  private silence = 0;
  private lastCheck: number;
  private readonly inFlight: InFlight;

  constructor(
    private readonly opts: IdleWatchdogSettings,
    now: number,
    private readonly labelOf: ChannelLabeler = idLabel,
    /** The run's facts about its stream (its producer, its transcripts), read as lines come. */
    stream?: StreamFacts,
  ) {
    this.lastCheck = now;
    this.inFlight = new InFlight(opts, stream);
  }

  activity(now: number): void {
    this.silence = 0;
    this.lastCheck = now;
  }

  /** Reads one line arriving at `now`: what it starts or ends. */
  observe(value: Record<string, unknown>, now: number): void {
    this.inFlight.observe(value, now);
  }

  waits(): Wait[] {
    return this.inFlight.waits();
  }

  allowedSilenceMs(): number {
    let allowed = this.opts.idleTimeoutMs;
    for (const wait of this.inFlight.waits()) {
      if (wait.allowedMs === null) return Infinity;
      allowed = Math.max(allowed, wait.allowedMs + (wait.graced ? this.opts.graceMs : 0));
    }
    return allowed;
  }

  /**
   * One periodic check. Returns a Stall when the allowed silence is exceeded; `heldBy` are the
   * plugin calls above the watchdog pending then (asked for only when it fires).
   */
  check(now: number, backedUp: boolean, heldBy: () => readonly HeldRecords[] = () => []): Stall | null {
    const gap = Math.min(now - this.lastCheck, 2 * this.opts.checkIntervalMs);
    this.lastCheck = now;
    if (backedUp) return null;
    this.silence += Math.max(0, gap);
    const allowed = this.allowedSilenceMs();
    // In whole milliseconds, as the allowances are: the silence a stall reports exceeds its
    // allowance by one at least, and its figures can show it.
    const silenceMs = Math.floor(this.silence);
    if (silenceMs <= allowed) return null;
    const waits = this.waits();
    return Object.freeze({
      silenceMs,
      allowedMs: allowed,
      waitingOn: Object.freeze(
        waits.slice(0, STALL_WAITS_LISTED).map((wait) =>
          Object.freeze({
            kind: wait.kind,
            what: cleanName(wait.what),
            channel: this.labelOf(wait.channelId),
            channelId: wait.channelId,
            inFlightMs: Math.max(0, now - wait.sinceMs),
            allowedMs: wait.allowedMs,
            declared: wait.declared,
          }),
        ),
      ),
      moreWaiting: Math.max(0, waits.length - STALL_WAITS_LISTED),
      heldBy: Object.freeze(
        [...heldBy()]
          .sort((a, b) => b.heldMs - a.heldMs)
          .map((held) => Object.freeze({ plugin: held.plugin, what: held.what, heldMs: held.heldMs })),
      ),
    });
  }
}

/** Whole seconds, or tenths below ten seconds: a short allowance must not read as its own silence. */
const seconds = (ms: number) => (ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`);

/**
 * A stall's silence and its allowance in seconds, with as many decimals as it takes (up to
 * milliseconds) for the silence to read above the allowance: the silence is cut, never
 * rounded up (`631 s (allowed 630 s)`, `630.4 s (allowed 630.0 s)`, `2.3 s (allowed 2.0 s)`).
 * Whole seconds from ten seconds on, tenths below, as `seconds` shows the rest.
 */
export function silenceFigures(silenceMs: number, allowedMs: number): { silence: string; allowed: string } {
  let decimals = allowedMs < 10_000 ? 1 : 0;
  for (; decimals < 3; decimals++) {
    const unit = 10 ** (3 - decimals);
    if (Math.floor(silenceMs / unit) > Math.round(allowedMs / unit)) break;
  }
  const unit = 10 ** (3 - decimals);
  const cut = Math.floor(silenceMs / unit) * unit;
  return {
    silence: `${(cut / 1000).toFixed(decimals)} s`,
    allowed: `${((Math.round(allowedMs / unit) * unit) / 1000).toFixed(decimals)} s`,
  };
}

/** One wait in words: `Bash "npm test" silent 212 s of its declared 600 s in part 4`. */
function describeWait(wait: StalledWait, silence: string, silenceMs: number): string {
  const whose = wait.kind === 'background' ? 'the ceiling' : wait.declared ? 'its declared' : 'its allowed';
  const limit = wait.allowedMs === null ? 'with no limit' : `of ${whose} ${seconds(wait.allowedMs)}`;
  const longer = wait.inFlightMs > silenceMs + 1000 ? ` (in flight ${seconds(wait.inFlightMs)})` : '';
  const where = wait.kind === 'background' ? '' : ` in ${wait.channel}`;
  return `${wait.what} silent ${silence} ${limit}${where}${longer}`;
}

/** How many waits the one-line message names. */
const WAITS_IN_MESSAGE = 5;

export function stallMessage(stall: Stall): string {
  const { silence, allowed } = silenceFigures(stall.silenceMs, stall.allowedMs);
  // What the agent was waiting on is as of the last line the watchdog saw: not said, lest it
  // be blamed for a silence the plugin made (index.json's stall still lists it).
  if (stall.heldBy.length > 0) {
    const held = stall.heldBy.map(
      (h) => `plugin ${h.plugin} held records for ${seconds(h.heldMs)} (${h.what} had not settled)`,
    );
    return `${held.join('; ')}: nothing reached the idle watchdog for ${silence} (allowed ${allowed})`;
  }
  const head = `no input for ${silence} (allowed ${allowed})`;
  if (stall.waitingOn.length === 0) return `${head}; nothing was in flight`;
  const named = stall.waitingOn
    .slice(0, WAITS_IN_MESSAGE)
    .map((w) => describeWait(w, silence, stall.silenceMs));
  const more = stall.waitingOn.length - named.length + stall.moreWaiting;
  const tail = more > 0 ? `; and ${more} more` : '';
  return `${head}: ${named.map(escapeOneLine).join('; ')}${tail}`;
}

/**
 * Idle watchdog: records in, the same records out (object mode). Fires when no input arrived
 * for longer than allowed (see IdleWatchdog): records a `STALL` warning, marks the run
 * stalled, and with `onStall: 'fail'` fails with StallError (exit 124). Input bytes count as
 * activity, not only whole lines: the run's byte counter (kept by the line parser) is read at
 * each check, so one long line arriving slowly is not silence. Inside a chain a stall stops
 * the input as SIGINT does (what was read, a partial last line included, reaches the sinks)
 * and the chain then fails; used alone the stream fails at once.
 */
export function createIdleWatchdog(options: IdleWatchdogOptions): Transform {
  const run = requireSession(options, 'createIdleWatchdog');
  const opts = withDefaults(IDLE_WATCHDOG_DEFAULTS, options);
  const clock = options.clock ?? systemClock;
  // Named as the summary's tree names them, once a stall: labels stand while no line arrives.
  let labels: { lines: number; of: Map<string | null, string> } | null = null;
  const labelOf: ChannelLabeler = (id) => {
    if (labels === null || labels.lines !== run.input.lines) {
      labels = { lines: run.input.lines, of: summaryLabels(run.tree) };
    }
    return boundedText(labels.of.get(id) ?? id ?? 'main', LABEL_CHARS);
  };
  const dog = new IdleWatchdog(opts, clock.now(), labelOf, run);
  let timer: unknown = null;
  let drainTimer: NodeJS.Timeout | null = null;
  let bytesSeen = run.input.bytes;
  // The stream finished (flushed or torn down): no drain deadline is set after that.
  let finished = false;
  const stop = () => {
    if (timer !== null) clock.clearInterval(timer);
    timer = null;
    if (drainTimer !== null) clearTimeout(drainTimer);
    drainTimer = null;
  };
  const stream = createBatchTransform({
    transformBatch(batch: RecordBatch) {
      const now = clock.now();
      dog.activity(now);
      // The bytes of these lines are activity at `now`, not again at the next check: silence
      // is timed from the last line, not from the check after it.
      bytesSeen = run.input.bytes;
      for (const rec of batch) {
        if (rec.kind === 'line') dog.observe(viewOf(rec), now);
        // A line too long to hold: its routing members and the tool calls and results it names.
        else if (rec.kind === 'spooled' && rec.value !== null) dog.observe(rec.value, now);
      }
      return batch;
    },
    flushAtEnd: () => {
      finished = true;
      stop();
    },
    teardown: () => {
      finished = true;
      stop();
    },
  });
  timer = clock.setInterval(() => {
    if (run.input.bytes !== bytesSeen) {
      bytesSeen = run.input.bytes;
      dog.activity(clock.now());
    }
    const backedUp = stream.readableLength >= stream.readableHighWaterMark;
    // A chain backed up below the watchdog is a slow sink, not silence: nothing is timed then, so
    // the timer holds nothing open. A sink that waits on something (a pipe, a socket, a timer)
    // keeps the run alive by itself; one that never settles, with nothing else left running,
    // is found by runChain and fails the run naming it instead of holding it forever.
    clock.hold?.(timer, !backedUp);
    const stall = dog.check(clock.now(), backedUp, options.pluginCallsAbove);
    if (!stall) return;
    const message = stallMessage(stall);
    run.recordStall(stall, message);
    if (opts.onStall === 'fail') {
      stop();
      const err = stallError(stall, message);
      if (options.stopInput) {
        options.stopInput(err);
        // A stage above that never finishes must not turn a stall into a hang.
        const drain = () => {
          if (!finished) drainTimer = setTimeout(() => stream.destroy(err), opts.stallDrainMs);
        };
        if (options.inputEnded) void options.inputEnded.then(drain);
        else drain();
      } else {
        stream.destroy(err);
      }
    } else {
      dog.activity(clock.now());
    }
  }, opts.checkIntervalMs);
  return stream;
}

/** A whole number of milliseconds from the environment, as Claude Code reads it. */
function envMs(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const value = env[name];
  return value !== undefined && /^\d+$/.test(value) && Number.isSafeInteger(Number(value))
    ? Number(value)
    : undefined;
}

/**
 * The agent's own time limits from its environment (the one subtee shares with it under
 * `subtee run`, and usually on a pipe): options given explicitly win over these.
 */
export function waitLimitsFromEnv(env: NodeJS.ProcessEnv): Partial<IdleWatchdogSettings> {
  return {
    modelTimeoutMs: envMs(env, 'API_TIMEOUT_MS'),
    bashDefaultTimeoutMs: envMs(env, 'BASH_DEFAULT_TIMEOUT_MS'),
    bashMaxTimeoutMs: envMs(env, 'BASH_MAX_TIMEOUT_MS'),
    mcpToolTimeoutMs: envMs(env, 'MCP_TOOL_TIMEOUT'),
    bgWaitCeilingMs: envMs(env, 'CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS'),
  };
}

/** The options that were given: an option left undefined must not hide the environment's value. */
function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>;
}

const STALL_ACTIONS = ['fail', 'warn'] as const;

const msOption = (min: number, fallback: number, description: string) =>
  ({ type: 'integer', min, default: fallback, description }) satisfies OptionSpec;

type IdleWatchdogConfig = Omit<
  IdleWatchdogOptions,
  'session' | 'clock' | 'stopInput' | 'inputEnded' | 'pluginCallsAbove'
>;

export const idleWatchdogPlugin = defineBuiltin<IdleWatchdogConfig>({
  name: 'idle-watchdog',
  kind: 'stage',
  kit: BUILTIN_KIT,
  options: {
    idleTimeoutMs: msOption(
      1,
      IDLE_WATCHDOG_DEFAULTS.idleTimeoutMs,
      'silence that is a hang when nothing is in flight, and between the events of a streamed message',
    ),
    modelTimeoutMs: msOption(
      1,
      IDLE_WATCHDOG_DEFAULTS.modelTimeoutMs,
      'silence allowed while a model request is in flight; $API_TIMEOUT_MS replaces the default',
    ),
    toolTimeoutMs: msOption(
      1,
      IDLE_WATCHDOG_DEFAULTS.toolTimeoutMs,
      'silence allowed while a tool call other than Bash (and MCP with $MCP_TOOL_TIMEOUT) runs, ' +
        'and any call of a CLI other than Claude Code; a subagent of Codex, Gemini CLI or opencode ' +
        'gets the larger of this and modelTimeoutMs',
    ),
    bashDefaultTimeoutMs: msOption(
      1,
      IDLE_WATCHDOG_DEFAULTS.bashDefaultTimeoutMs,
      'a Bash call without a timeout input; $BASH_DEFAULT_TIMEOUT_MS replaces the default',
    ),
    bashMaxTimeoutMs: msOption(
      1,
      IDLE_WATCHDOG_DEFAULTS.bashMaxTimeoutMs,
      "the most a Bash call's timeout input counts for; $BASH_MAX_TIMEOUT_MS replaces the default",
    ),
    mcpToolTimeoutMs: {
      type: 'integer',
      min: 1,
      description: 'an MCP tool call; default $MCP_TOOL_TIMEOUT, else toolTimeoutMs',
    },
    bgWaitCeilingMs: msOption(
      0,
      IDLE_WATCHDOG_DEFAULTS.bgWaitCeilingMs,
      'silence allowed while background tasks run (0 = no limit); ' +
        '$CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS replaces the default',
    ),
    graceMs: msOption(
      0,
      IDLE_WATCHDOG_DEFAULTS.graceMs,
      "added to every allowance in flight: the agent's own timeout fires first, then it reports",
    ),
    onStall: {
      type: 'string',
      choices: STALL_ACTIONS,
      default: IDLE_WATCHDOG_DEFAULTS.onStall,
      description: 'fail: stop (exit 124, and stop the agent under subtee run); warn: report only',
    },
    checkIntervalMs: msOption(1, IDLE_WATCHDOG_DEFAULTS.checkIntervalMs, 'how often silence is measured'),
    stallDrainMs: msOption(
      0,
      IDLE_WATCHDOG_DEFAULTS.stallDrainMs,
      'after a stall, how long the chain may take to pass on what it read before it is torn down',
    ),
  },
  create: (o, ctx) =>
    createIdleWatchdog({
      ...waitLimitsFromEnv(ctx.env),
      ...definedOnly(o),
      session: ctx.session,
      stopInput: ctx.stopInput,
      inputEnded: ctx.inputEnded,
      pluginCallsAbove: ctx.pluginCallsAbove,
    }),
});
