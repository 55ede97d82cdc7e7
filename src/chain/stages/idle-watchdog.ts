import { Transform, type TransformCallback } from 'node:stream';
import { withDefaults } from '../../defaults.js';
import { EXIT, SubteeError } from '../../errors.js';
import { BATCH_HIGH_WATER_MARK, type RecordBatch } from '../../model/record.js';
import { escapeOneLine } from '../../views/escape.js';
import { requireSession, type Session } from '../../model/session.js';
import { viewOf } from '../../model/line-view.js';

export interface IdleWatchdogSettings {
  idleTimeoutMs: number;
  bgWaitCeilingMs: number;
  drainGraceMs: number;
  onStall: 'fail' | 'warn';
  checkIntervalMs: number;
}

export const IDLE_WATCHDOG_DEFAULTS: Readonly<IdleWatchdogSettings> = Object.freeze({
  /** Silence allowed while nothing is known to be legitimately quiet. */
  idleTimeoutMs: 120_000,
  /**
   * Silence allowed while background tasks are in flight: Claude Code waits for them up to
   * CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS (10 minutes by default; 0 = no ceiling).
   */
  bgWaitCeilingMs: 600_000,
  /** Added to the ceiling: the CLI drains its output after the wait. */
  drainGraceMs: 30_000,
  /** `fail` ends the run (exit 124); `warn` only reports. */
  onStall: 'fail',
  /** How often silence is measured. */
  checkIntervalMs: 1000,
});

export interface Clock {
  now(): number;
  setInterval(fn: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  // Unref'd: the input (stdin, a child process) keeps a live run alive, not the watchdog.
  setInterval: (fn, ms) => setInterval(fn, ms).unref(),
  clearInterval: (h) => clearInterval(h as NodeJS.Timeout),
};

export interface IdleWatchdogOptions {
  idleTimeoutMs?: number;
  bgWaitCeilingMs?: number;
  drainGraceMs?: number;
  onStall?: 'fail' | 'warn';
  checkIntervalMs?: number;
  clock?: Clock;
  /** The chain's session, shared by every stage (required). */
  session: Session;
}

export class StallError extends SubteeError {
  constructor(message: string) {
    super('ERR_STALL', message, { exitCode: EXIT.STALL });
    this.name = 'StallError';
  }
}

export interface Stall {
  silenceMs: number;
  allowedMs: number;
  inFlight: string[];
}

/**
 * Silence accounting, free of streams and timers so tests drive it with plain numbers.
 * Silence grows only between checks while subtee is waiting for input: a check that finds
 * the chain backed up (a slow sink) does not count, and a gap between checks longer than
 * two intervals (the event loop was blocked by a slow synchronous write) counts as two.
 */
export class IdleWatchdog {
  private silence = 0;
  private lastCheck: number;
  private readonly background = new Map<string, string>();

  constructor(
    private readonly opts: IdleWatchdogSettings,
    now: number,
  ) {
    this.lastCheck = now;
  }

  activity(now: number): void {
    this.silence = 0;
    this.lastCheck = now;
  }

  observe(v: Record<string, unknown>): void {
    if (v.type !== 'system') return;
    const taskId = typeof v.task_id === 'string' ? v.task_id : null;
    if (v.subtype === 'task_started' && taskId && v.is_backgrounded === true) {
      this.background.set(taskId, describe(v));
    } else if (v.subtype === 'task_notification' && taskId) {
      this.background.delete(taskId);
    } else if (v.subtype === 'background_tasks_changed' && Array.isArray(v.tasks)) {
      // The list replaces what was known: it names every background task still alive.
      this.background.clear();
      for (const t of v.tasks) {
        if (t && typeof t === 'object' && typeof (t as Record<string, unknown>).task_id === 'string') {
          this.background.set(
            (t as Record<string, unknown>).task_id as string,
            describe(t as Record<string, unknown>),
          );
        }
      }
    }
  }

  inFlight(): string[] {
    return [...this.background.values()];
  }

  allowedSilenceMs(): number {
    if (this.background.size === 0) return this.opts.idleTimeoutMs;
    if (this.opts.bgWaitCeilingMs === 0) return Infinity;
    return Math.max(this.opts.idleTimeoutMs, this.opts.bgWaitCeilingMs + this.opts.drainGraceMs);
  }

  /** One periodic check. Returns a Stall when the allowed silence is exceeded. */
  check(now: number, backedUp: boolean): Stall | null {
    const gap = Math.min(now - this.lastCheck, 2 * this.opts.checkIntervalMs);
    this.lastCheck = now;
    if (backedUp) return null;
    this.silence += Math.max(0, gap);
    const allowed = this.allowedSilenceMs();
    if (this.silence <= allowed) return null;
    return { silenceMs: this.silence, allowedMs: allowed, inFlight: this.inFlight() };
  }
}

function describe(t: Record<string, unknown>): string {
  const kind =
    typeof t.subagent_type === 'string'
      ? t.subagent_type
      : typeof t.task_type === 'string'
        ? t.task_type
        : 'task';
  const d = typeof t.description === 'string' ? ` "${t.description}"` : '';
  return `${kind}${d} (${String(t.task_id)})`;
}

export function stallMessage(s: Stall): string {
  const what =
    s.inFlight.length > 0
      ? `; still in flight: ${s.inFlight.map(escapeOneLine).join(', ')}`
      : '; no background task was in flight';
  return `no input for ${Math.round(s.silenceMs / 1000)}s (allowed ${Math.round(s.allowedMs / 1000)}s)${what}`;
}

/** How long a stalled chain may take to drain what it read before it is torn down. */
const STALL_DRAIN_MS = 5000;

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
  const dog = new IdleWatchdog(opts, clock.now());
  let timer: unknown = null;
  let drainTimer: NodeJS.Timeout | null = null;
  let bytesSeen = run.input.bytes;
  const stop = () => {
    if (timer !== null) clock.clearInterval(timer);
    timer = null;
    if (drainTimer !== null) clearTimeout(drainTimer);
    drainTimer = null;
  };
  const stream = new Transform({
    objectMode: true,
    highWaterMark: BATCH_HIGH_WATER_MARK,
    transform(batch: RecordBatch, _enc, cb: TransformCallback) {
      dog.activity(clock.now());
      for (const rec of batch) if (rec.kind === 'line') dog.observe(viewOf(rec));
      cb(null, batch);
    },
    flush(cb: TransformCallback) {
      stop();
      cb();
    },
    destroy(err, cb) {
      stop();
      cb(err);
    },
  });
  timer = clock.setInterval(() => {
    if (run.input.bytes !== bytesSeen) {
      bytesSeen = run.input.bytes;
      dog.activity(clock.now());
    }
    const backedUp = stream.readableLength >= stream.readableHighWaterMark;
    const stall = dog.check(clock.now(), backedUp);
    if (!stall) return;
    run.stalled = true;
    const message = stallMessage(stall);
    run.warn('STALL', message);
    if (opts.onStall === 'fail') {
      stop();
      const err = new StallError(message);
      if (run.stopInput) {
        run.stopInput(err);
        // A stage above that never finishes must not turn a stall into a hang.
        drainTimer = setTimeout(() => stream.destroy(err), STALL_DRAIN_MS);
      } else {
        stream.destroy(err);
      }
    } else {
      dog.activity(clock.now());
    }
  }, opts.checkIntervalMs);
  return stream;
}
