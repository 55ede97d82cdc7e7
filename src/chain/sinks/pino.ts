import type { Transform } from 'node:stream';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import type PinoModule from 'pino';
import type { Logger } from 'pino';
import { withDefaults } from '../../defaults.js';
import { UsageError, writeFailed } from '../../errors.js';
import { quarantinedLines, type LineRecord, type RecordBatch } from '../../model/record.js';
import { escapeOneLine, terminalSafeJson } from '../../views/escape.js';
import { channelLabel, inputPreview } from '../../views/text.js';
import { lineContent } from '../../model/content.js';
import { CUT_LENGTHS, cutText, DISPLAY_DEFAULTS, type DisplayPolicy } from '../../model/display.js';
import { viewOf } from '../../model/line-view.js';
import { batchLines, PINO_LEVELS, pinoLine } from './pino-batch.js';
import { openLogFile, type OpenedLog } from '../../safe-open.js';
import { requireSession, type SinkRun } from '../../model/session.js';
import { elapsedBetween, type ChannelPlace, type ChannelSnapshot } from '../../model/tree.js';
import { BatchTransform, type BatchOutcome } from '../batch-transform.js';
import type { ReadonlyChannelCost } from '../../model/cost.js';
import { endFigures } from '../../model/run-model.js';
import { channelUsage } from '../../views/cost.js';
import { PINO_SINK_DEFAULTS, type PinoSinkOptions } from './pino-options.js';
import { transportTargets } from './pino-target.js';

export { checkTransportTargets } from './pino-target.js';

/** pino, loaded when a pino sink is made: most runs have none, and loading it is a tenth of start-up. */
let loadedPino: typeof PinoModule | null = null;
const pino = (): typeof PinoModule =>
  (loadedPino ??= createRequire(import.meta.url)('pino') as typeof PinoModule);

/** Longest `msg` (the one-line headline pino-pretty shows), in characters: a `preview`. */
const MESSAGE_MAX_CHARS = CUT_LENGTHS.preview.chars;

/** How long a pipe's reader may take nothing before the log fails (see whileReaderReads). */
const STOPPED_READER_MS = 10_000;

/**
 * sonic-boom's answer to a full pipe (EAGAIN) in sync mode: sleep and retry, for ever, on the
 * main thread, where no signal is heard. A reader that took nothing for STOPPED_READER_MS has
 * stopped: the write fails (ERR_WRITE) instead of holding the run.
 */
function whileReaderReads(): (err: unknown, writing: number, waiting: number) => boolean {
  let stuckSince: number | null = null;
  let left = -1;
  return (_err, writing, waiting) => {
    const now = Date.now();
    if (writing + waiting !== left) [stuckSince, left] = [now, writing + waiting];
    return now - stuckSince! < STOPPED_READER_MS;
  };
}


type Kind = 'text' | 'thinking' | 'tool_use' | 'tool_result' | 'status' | 'warning' | 'quarantine';

/** Who a channel is, as a line's events name it: its place as the line was routed, or a snapshot. */
type Named = ChannelPlace | ChannelSnapshot;

function where(ch: Named | undefined) {
  return {
    channel: ch?.id ?? 'main',
    parent: ch?.parent ?? null,
    depth: ch?.depth ?? 0,
    agent: ch?.id ? ch.agent : null,
  };
}

export interface PinoEvent {
  level: 'info' | 'warn' | 'error';
  kind: Kind;
  /** One escaped line saying what happened, for `pino-pretty` and log viewers. */
  msg: string;
  fields: Record<string, unknown>;
}

/** The headline of an event: who, what, and the start of the content, on one escaped line. */
export function eventMessage(
  kind: Kind,
  ch: Named | undefined,
  fields: Record<string, unknown>,
): string {
  const who = ch ? channelLabel(ch) : 'main';
  const whole = String(fields.content ?? '');
  // Built from the start of the content only (the headline is cut anyway): joining the whole
  // content first and cutting after cost more than the rest of the event.
  const content = whole.length > MESSAGE_MAX_CHARS ? whole.slice(0, MESSAGE_MAX_CHARS) : whole;
  let msg: string;
  if (kind === 'text') msg = `[${who}] ${content}`;
  else if (kind === 'thinking') msg = `[${who}] thinking: ${content}`;
  else if (kind === 'tool_use') msg = `[${who}] tool ${String(fields.tool)} ${content}`;
  else if (kind === 'tool_result')
    msg = `[${who}] result${fields.is_error === true ? ' (error)' : ''}: ${content}`;
  else if (kind === 'status') msg = `[${who}] ${String(fields.status)}${content ? ` — ${content}` : ''}`;
  else if (kind === 'warning') msg = `warning ${String(fields.code)}: ${content}`;
  else msg = `quarantined line ${String(fields.line)} (${String(fields.reason)}): ${content}`;
  const length = msg.length - content.length + whole.length;
  if (length <= MESSAGE_MAX_CHARS) return escapeOneLine(msg);
  return escapeOneLine(cutText(msg, 'preview', MESSAGE_MAX_CHARS, length).text);
}

function spanFields(ch: { startedAt: string | null; endedAt: string | null }) {
  return {
    started_at: ch.startedAt,
    ended_at: ch.endedAt,
    elapsed_ms: elapsedBetween(ch.startedAt, ch.endedAt),
  };
}

/**
 * The pino events of one line record: one per content block, plus tree changes. With
 * `withCosts`, a status event carries the channel's figures as of its own line, as the run
 * model froze them into the event (EndFigures): its dollars (`cost_usd`, null when a model is
 * unpriced or no usage is known), its output tokens (`output_tokens`, as index.json's `usage`)
 * and how they were found (`cost_basis`, as index.json's `cost.basis`). An event the model did
 * not make has none.
 */
export function pinoEvents(
  rec: LineRecord,
  maxChars: number,
  withCosts = false,
  display: DisplayPolicy = DISPLAY_DEFAULTS,
): PinoEvent[] {
  const out: PinoEvent[] = [];
  // Where the channel was as the line was routed, not as the tree has it by now.
  const ch = rec.place ?? rec.channel;
  const v = viewOf(rec);
  const push = (
    level: PinoEvent['level'],
    kind: Kind,
    fields: Record<string, unknown>,
    about: Named | undefined = ch,
  ) => out.push({ level, kind, fields, msg: eventMessage(kind, about, fields) });
  const content = (text: Parameters<typeof cutText>[0]) => cutText(text, 'content', maxChars).text;
  for (const item of lineContent(v, display)) {
    switch (item.kind) {
      case 'prompt':
      case 'text':
        push('info', 'text', {
          role: item.kind === 'prompt' ? 'user' : 'assistant',
          content: content(item.text),
        });
        break;
      case 'thinking':
        if (!item.redacted) push('info', 'thinking', { content: content(item.text) });
        break;
      case 'tool_use': {
        const preview = inputPreview(item.input, maxChars);
        push('info', 'tool_use', { tool: item.name, id: item.id, content: preview });
        break;
      }
      case 'tool_result':
        push(item.isError ? 'warn' : 'info', 'tool_result', {
          id: item.id,
          is_error: item.isError,
          content: content(item.text),
        });
        break;
    }
  }
  for (const ev of rec.events ?? []) {
    if (ev.type !== 'status') continue;
    const figures = withCosts ? endFigures(ev) : null;
    const fields = {
      ...where(ev.channel),
      status: ev.channel.status,
      content: content(ev.summary ?? ''),
      // The subagent's span, spawn to report (index.json's started_at, ended_at, elapsed_ms).
      ...(ev.channel.id !== null && ev.channel.status !== 'running' ? spanFields(ev.channel) : {}),
      ...(figures ? costFields(ev.channel, figures.cost) : {}),
    };
    push(ev.channel.status === 'failed' ? 'error' : 'info', 'status', fields, ev.channel);
  }
  return out;
}

/**
 * A channel's dollars (null when no usage of it is known yet, or a model is unpriced), its
 * output tokens and their basis as index.json shows them.
 */
const costFields = (ch: ChannelSnapshot, cost: ReadonlyChannelCost | null) => ({
  cost_usd: cost === null ? null : cost.usd,
  output_tokens: channelUsage(ch.usage, cost).output_tokens ?? null,
  cost_basis: cost === null ? 'unknown' : cost.basis,
});

/**
 * A timestamp already written as `toISOString` writes it, on a day of its month: it is its
 * own ISO time. Claude Code writes them so; testing this skips a `Date.parse` and a
 * `toISOString`, which cost the pino log a third of a second per 400,000 lines.
 */
const PLAIN_ISO_TIME = new RegExp(
  String.raw`^\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])` +
    String.raw`T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}Z$`,
);

/** Days of each month (February of a leap year has one more). */
const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** Whether `time`, of PLAIN_ISO_TIME's form, names a day its month has (not 2026-02-30). */
function onDayOfMonth(time: string): boolean {
  const digit = (at: number) => time.charCodeAt(at) - 48;
  const day = digit(8) * 10 + digit(9);
  if (day <= 28) return true;
  const month = digit(5) * 10 + digit(6);
  if (day <= MONTH_DAYS[month - 1]) return true;
  const year = digit(0) * 1000 + digit(1) * 100 + digit(2) * 10 + digit(3);
  return month === 2 && day === 29 && year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

/** The line's own `timestamp` as an ISO time, when it has a valid one. */
export function streamTime(value: Record<string, unknown>): string | null {
  if (typeof value.timestamp !== 'string') return null;
  if (PLAIN_ISO_TIME.test(value.timestamp) && onDayOfMonth(value.timestamp)) return value.timestamp;
  // Consecutive lines often share a timestamp (one per API message): parse it once.
  if (value.timestamp === lastTimestamp.given) return lastTimestamp.iso;
  const ms = Date.parse(value.timestamp);
  const iso = Number.isNaN(ms) ? null : new Date(ms).toISOString();
  lastTimestamp = { given: value.timestamp, iso };
  return iso;
}

let lastTimestamp: { given: string | null; iso: string | null } = { given: null, iso: null };

/**
 * Pino sink: a pass-through stage (object mode) that logs one structured line per routed
 * event, with a one-line `msg` and, where the line has one, its `timestamp` as `time`.
 * Written through `pino.destination` synchronously: an async destination buffers without
 * bound behind a slow reader, a sync one is the backpressure. Flushed on end and on destroy.
 * With `transport`, any pino transport target receives the events instead; with `logger`, a
 * host's own logger does. A reader that goes away (EPIPE: `--pino - | head -1`) ends this
 * output only; the other sinks go on.
 */
export function createPinoSink(options: PinoSinkOptions): Transform {
  return new PinoSink(options);
}

/** createPinoSink logging to `log`, its destination opened already (see PreparedWrites). */
export function createPreparedPinoSink(options: PinoSinkOptions, log: OpenedLog | undefined): Transform {
  return new PinoSink(options, log);
}

type Destination = ReturnType<typeof PinoModule.destination>;
type PinoTransport = ReturnType<typeof PinoModule.transport>;

class PinoSink extends BatchTransform {
  readonly #opts: typeof PINO_SINK_DEFAULTS & PinoSinkOptions;
  readonly #run: SinkRun;
  readonly #hostLogger: Logger | null;
  /** What the events go to, as errors name it. */
  readonly #what: string;
  #dest: Destination | null = null;
  #transport: PinoTransport | null = null;
  /** A transport whose worker fails before it is ready is a bad target (a config error). */
  #transportReady = false;
  #failed: Error | null = null;
  #readerGone = false;
  /** Lines to a file or stdout, gathered per batch (see batchLines). */
  readonly #lines: ReturnType<typeof batchLines> | null;
  /** The time of the event being logged: the line's own timestamp, else now. */
  #eventTime: string | null = null;
  /** The logger of a transport or a host; lines to a file or stdout are rendered here (pinoLine). */
  readonly #logger: Logger | null;
  /** How many of the run's warnings are logged (a cursor into `session.warnings`). */
  #warned = 0;
  /** Set at the end: warnings recorded later (by sinks after this one) are not logged. */
  #warningsDone = false;

  constructor(options: PinoSinkOptions, log?: OpenedLog) {
    super({ sink: true });
    const opts = (this.#opts = withDefaults(PINO_SINK_DEFAULTS, options));
    this.#run = requireSession(options, 'createPinoSink');
    this.#hostLogger = options.logger ?? null;
    this.#what = opts.transport
      ? `pino transport ${transportTargets(opts.transport)}`
      : String(opts.destination);
    if (!this.#hostLogger) this.#openOutput(log);
    this.#transport?.once('ready', () => (this.#transportReady = true));
    (this.#dest ?? this.#transport)?.on('error', (err: unknown) => this.#onFail(err));
    // In contentMode 'buffer' sonic-boom takes Buffers, which its typings do not say.
    const bytesDest = this.#dest as unknown as { write(data: Buffer): boolean } | null;
    this.#lines = bytesDest ? batchLines(bytesDest) : null;
    this.#logger = this.#lines
      ? null
      : (this.#hostLogger ??
        pino()(
          {
            base: null,
            timestamp: () => `,"time":"${this.#eventTime ?? new Date().toISOString()}"`,
            messageKey: 'msg',
            // pino's own serialisation lets C1 and bidi controls, U+2028 and U+2029 stand raw,
            // as JSON allows, and a `##[` a job log would run.
            hooks: { streamWrite: terminalSafeJson },
          },
          this.#transport!,
        ));
    // Warnings recorded before this sink was made are not the log's (as before a listener).
    this.#warned = this.#run.warnings.length;
    void this.#followWarnings();
  }

  /**
   * The run's warnings as they are recorded, each once and in order: a cursor into the
   * session's list, read at each batch, at the end, and when a warning comes while no line
   * does (a stall under `--on-stall warn`).
   */
  async #followWarnings(): Promise<void> {
    while (!this.#warningsDone) {
      await this.#run.warningAt(this.#warned);
      if (this.#warningsDone) return;
      this.#logWarnings();
      this.#lines?.flush();
    }
  }

  #logWarnings(): void {
    const warnings = this.#run.warnings;
    while (this.#warned < warnings.length) {
      const w = warnings[this.#warned++];
      // A warning after this log failed (the OUTPUT_FAILED the files sink records for that very
      // failure) is not written: index.json keeps it.
      if (this.#failed || this.#readerGone || this.destroyed) continue;
      const fields = { code: w.code, content: w.message };
      this.#log('warn', 'warning', fields, eventMessage('warning', undefined, fields));
    }
  }

  protected override transformBatch(batch: RecordBatch): BatchOutcome {
    if (this.#failed) throw this.#failed;
    try {
      this.#logWarnings();
      for (const rec of batch) {
        if (rec.kind === 'quarantine') {
          if (!rec.final) continue;
          for (const line of quarantinedLines(rec))
            this.#logQuarantined(
              line.lineNo,
              rec.reason,
              line.raw.subarray(0, this.#opts.maxContentChars * 4),
              line.raw.length > this.#opts.maxContentChars * 4,
            );
        } else if (rec.kind === 'spooled') {
          // A line too long to hold: only its start is known here (see SpooledRecord).
          if (rec.reason) this.#logQuarantined(rec.lineNo, rec.reason, rec.head, true);
        } else {
          this.#logLine(rec);
        }
      }
      this.#logWarnings();
      this.#lines?.flush();
    } catch (err) {
      this.#eventTime = null;
      throw this.#failed ?? writeFailed(this.#what, err);
    }
    return batch;
  }

  protected override flushAtEnd(): BatchOutcome {
    this.#logWarnings();
    this.#warningsDone = true;
    const isWriteError = (err: unknown) => (err as { code?: unknown } | null)?.code === 'ERR_WRITE';
    return this.#close().catch((err) => {
      throw this.#failed ?? (isWriteError(err) ? err : writeFailed(this.#what, err));
    });
  }

  protected override teardown(): void {
    this.#warningsDone = true;
    const dest = this.#dest;
    if (dest && !this.#failed && !this.#readerGone) {
      try {
        this.#lines?.flush();
        dest.flushSync();
      } catch {
        // The original error is the one to report.
      }
    }
    if (this.#failed || this.#readerGone) dest?.destroy();
    this.#transport?.end();
  }

  /**
   * A transport, or a destination opened here (or before the run: `log`), not by pino (no link
   * followed; see safe-open).
   */
  #openOutput(log: OpenedLog | undefined): void {
    const opts = this.#opts;
    if (opts.transport) {
      try {
        this.#transport = pino().transport(
          opts.transport as unknown as Parameters<typeof PinoModule.transport>[0],
        );
      } catch (err) {
        const why = (err as Error)?.message ?? String(err);
        throw new UsageError('ERR_CONFIG', `${this.#what}: cannot load (${why})`, err);
      }
      return;
    }
    const target = opts.destination === '-' ? 1 : opts.destination;
    try {
      // No blocking on a pipe either.
      const dest = target === 1 ? 1 : (log?.fd ?? openLogFile(target));
      this.#dest = pino().destination({
        dest,
        sync: true,
        contentMode: 'buffer',
        retryEAGAIN: whileReaderReads(),
      });
    } catch (err) {
      throw writeFailed(String(opts.destination), err);
    }
  }

  /**
   * sonic-boom reports a failed write as an event (and its flushSync then retries forever):
   * stop at the first failure and fail the chain with it, unless the reader just went away.
   * A transport failing before it is ready is a bad target; afterwards, a failed write.
   */
  #onFail(err: unknown): void {
    if (this.#failed || this.#readerGone) return;
    if ((err as NodeJS.ErrnoException)?.code === 'EPIPE') {
      this.#readerGone = true;
      return;
    }
    this.#failed =
      this.#transport && !this.#transportReady
        ? new UsageError(
            'ERR_CONFIG',
            `${this.#what}: cannot start (${(err as Error)?.message ?? String(err)})`,
            err,
          )
        : writeFailed(this.#what, err);
    this.destroy(this.#failed);
  }

  #log(level: 'info' | 'warn' | 'error', kind: Kind, fields: Record<string, unknown>, msg: string): void {
    if (!this.#readerGone) this.#emit(level, { kind, ...fields }, msg);
  }

  /** One event to the log: a rendered line to a file or stdout, else through the logger. */
  #emit(level: 'info' | 'warn' | 'error', fields: Record<string, unknown>, msg: string): void {
    if (this.#lines)
      this.#lines.stream.write(
        pinoLine(PINO_LEVELS[level], this.#eventTime ?? new Date().toISOString(), fields, msg),
      );
    else this.#logger![level](fields, msg);
  }

  /** `partial`: `start` is only the start of the line (the rest was never read here). */
  #logQuarantined(lineNo: number, reason: string, start: Buffer, partial: boolean): void {
    const text = start.toString('utf8');
    const content = cutText(text, 'content', this.#opts.maxContentChars, partial ? null : text.length).text;
    const fields = { channel: null, line: lineNo, reason, content };
    this.#log('warn', 'quarantine', fields, eventMessage('quarantine', undefined, fields));
  }

  #logLine(rec: LineRecord): void {
    let events: PinoEvent[];
    try {
      events = pinoEvents(rec, this.#opts.maxContentChars, true, this.#run.display);
    } catch (err) {
      // A line the sink cannot read (a plugin stage made it unreadable) costs only its own
      // events: it is counted and reported once, and every other line is still logged.
      this.#run.recordFailed('pino', rec.lineNo, err);
      return;
    }
    if (events.length === 0 || this.#readerGone) return;
    const base = where(rec.place ?? rec.channel);
    const time = streamTime(viewOf(rec));
    this.#eventTime = time;
    for (const e of events) {
      // One object in the order the keys are logged, not spreads of spreads: an
      // event's own fields (a status event's channel) replace the line's in place.
      const fields: Record<string, unknown> = { kind: e.kind, ...base, line: rec.lineNo };
      if (this.#hostLogger && time) fields.timestamp = time;
      for (const key in e.fields) fields[key] = e.fields[key];
      this.#emit(e.level, fields, e.msg);
    }
    this.#eventTime = null;
  }

  async #close(): Promise<void> {
    if (this.#failed) throw this.#failed;
    const dest = this.#dest;
    if (this.#hostLogger) {
      this.#hostLogger.flush?.();
    } else if (this.#readerGone) {
      dest?.destroy();
      this.#transport?.end();
    } else if (dest) {
      this.#lines?.flush();
      dest.flushSync();
      dest.end();
    } else if (this.#transport) {
      await this.#closeTransport(this.#transport);
    }
    if (this.#failed) throw this.#failed;
  }

  async #closeTransport(transport: PinoTransport): Promise<void> {
    if (!this.#transportReady) {
      // A worker that fails to load can close without an error once ended: nothing would
      // have been written. Wait until it is ready (or has failed) before ending it; the
      // worker holds the process until then.
      const events = ['ready', 'error', 'close'];
      await new Promise((resolve) => events.forEach((ev) => transport.once(ev, resolve)));
      if (!this.#transportReady)
        this.#failed ??= new UsageError('ERR_CONFIG', `${this.#what}: cannot start (its worker exited)`);
      if (this.#failed) throw this.#failed;
    }
    // pino lets go of the worker once it is ready (`unref`); it holds the process again
    // (thread-stream's own `ref()`, which its typings leave out) until it has written
    // everything and closed.
    (transport as PinoTransport & { ref(): void }).ref();
    const closed = once(transport, 'close');
    transport.end();
    await closed;
  }
}

export { PINO_SINK_DEFAULTS, type PinoSinkOptions } from './pino-options.js';
