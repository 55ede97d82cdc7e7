import { EventEmitter, once } from 'node:events';
import { createRequire } from 'node:module';
import type { Transform } from 'node:stream';
import type * as OtelApi from '@opentelemetry/api';
import type { HrTime } from '@opentelemetry/api';
import type { IdGenerator, ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { withDefaults } from '../../defaults.js';
import { onceLoader } from '../../optional-package.js';
import { shownUrl, withoutUrlSecrets } from '../../shown-url.js';
import type { RecordBatch } from '../../model/record.js';
import { requireSession, type SinkRun } from '../../model/session.js';
import { TraceBuilder, type SpanData } from './otlp-spans.js';
import {
  OtlpHttpSender,
  type OtlpHttpConfig,
  type SendResult,
  type SpanSender,
  type TraceSerializer,
} from './otlp-http.js';
import { randomRunId, spanIdOf, traceIdOf } from './stream-facts.js';
import { timerMs } from '../../timer-ms.js';
import { BatchTransform, type BatchOutcome } from '../batch-transform.js';
import {
  OTLP_SINK_DEFAULTS,
  otlpProtocol,
  otlpTracesUrl,
  type OtlpProtocol,
  type OtlpSinkOptions,
} from './otlp-options.js';


/**
 * The SDK, imported when an OTLP sink is made, not when subtee starts: it takes longer to load
 * than subtee takes to split a small run, most runs never use it, and its packages are
 * optional peer dependencies (a missing one is ERR_OPTIONAL_DEPENDENCY, naming it).
 */
const loadOtlpSdk = onceLoader('otlp', async () => {
  const [api, sdk, resources] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/resources'),
  ]);
  const proto = exporterParts('@opentelemetry/exporter-trace-otlp-proto', 'ProtobufTraceSerializer');
  const json = exporterParts('@opentelemetry/exporter-trace-otlp-http', 'JsonTraceSerializer');
  return { api, sdk, resources, proto, json };
});

type ConvertHttpOptions = (
  config: { url: string; timeoutMillis?: number },
  signal: 'TRACES',
  path: 'v1/traces',
  requiredHeaders: Record<string, string>,
) => OtlpHttpConfig;

/**
 * What an OTLP/HTTP trace exporter package is made of, taken from its own dependencies (the
 * versions it pins): the configuration it reads from OTEL_EXPORTER_OTLP_* and its serializer.
 * subtee sends the requests itself (otlp-http.ts).
 */
function exporterParts(
  name: string,
  serializer: 'ProtobufTraceSerializer' | 'JsonTraceSerializer',
): { convert: ConvertHttpOptions; serializer: TraceSerializer } {
  const fromExporter = createRequire(createRequire(import.meta.url).resolve(name));
  const base = fromExporter('@opentelemetry/otlp-exporter-base/node-http') as {
    convertLegacyHttpOptions: ConvertHttpOptions;
  };
  const transformer = fromExporter('@opentelemetry/otlp-transformer') as Record<string, TraceSerializer>;
  return { convert: base.convertLegacyHttpOptions, serializer: transformer[serializer] };
}

/** Imports the SDK: the chain does before the sink is made, so a missing package stops the run first. */
export async function importOtlpSdk(): Promise<void> {
  await loadOtlpSdk();
}

const hrTime = (ms: number): HrTime => [Math.floor(ms / 1000), Math.round((ms % 1000) * 1e6)];

/**
 * Span ids derived from the run and the span's key rather than drawn at random: a span can
 * then name its parent before the parent exists (children finish first), and a replay of a
 * recording reproduces the trace. The SDK asks for one id per span it starts; `next` is set
 * just before.
 */
class DerivedIds implements IdGenerator {
  traceId = '';
  next = '';
  generateTraceId(): string {
    return this.traceId;
  }
  generateSpanId(): string {
    return this.next;
  }
}

/** Hands each ended SDK span to the delivery queue (a BatchSpanProcessor would drop when full). */
class HandOver implements SpanProcessor {
  constructor(private readonly take: (span: ReadableSpan) => void) {}
  onStart(): void {}
  onEnd(span: ReadableSpan): void {
    this.take(span);
  }
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * The most reasons SpanDelivery tells spans were lost for; later ones are OTHER_LOSSES.
 *
 * @internal
 */
export const MAX_LOSS_REASONS = 8;
/**
 * What spans lost for a reason past the first MAX_LOSS_REASONS count under.
 *
 * @internal
 */
export const OTHER_LOSSES = 'other failures';

interface DeliveryOptions {
  retryMs: number;
  maxQueueSpans: number;
  maxBatchSpans: number;
}

/**
 * Sends finished spans one batch at a time. While the collector accepts them, a full queue
 * holds the input back (backpressure). A batch that still fails after `retryMs` of retries is
 * given up and the collector counts as unavailable: from then on the queue never holds the
 * run back; it keeps the newest spans up to its bound, gives up the oldest, and keeps trying
 * one batch at a time, so a collector that comes back gets everything still queued. Spans a
 * collector rejects in an answer of success (OTLP partial success) are lost, not retried, as
 * the OTLP specification asks; the collector's message is the reason.
 *
 * @internal Its types are the SDK's, an optional package: left out of the declarations.
 */
export class SpanDelivery {
  delivered = 0;
  lost = 0;
  total = 0;
  available = true;
  /** Why spans were last not delivered: the collector's answer or the connection's failure. */
  lastError: string | null = null;
  /** Whether `lastError` is a connection's failure (no answer at all), which a new connection ends. */
  private lastErrorUnanswered = false;
  /**
   * Spans not delivered by why each was lost, in the order the reasons first lost one; null for
   * spans still waiting when the end's wait was over with no failure holding them (the deadline).
   * At most MAX_LOSS_REASONS reasons; the spans of any later one count under OTHER_LOSSES.
   */
  readonly lostFor = new Map<string | null, number>();
  /**
   * What holds the waiting spans back: the failure of the latest attempt, until an attempt
   * succeeds (or, a connection's failure, until a new connection is made).
   */
  private holdUp: string | null = null;
  private readonly queue: ReadableSpan[] = [];
  private inFlight: ReadableSpan[] | null = null;
  /** Cancels the wait before the next try (a backoff or a collector's Retry-After), if any. */
  private retryTimer: (() => void) | null = null;
  /** Cancels the end's deadline, once one is set (`endBy`). */
  private endTimer: (() => void) | null = null;
  private endAtMs = Infinity;
  /** Cancels the input's deadline, once one is set (`endWhenHeldFrom`). */
  private inputTimer: (() => void) | null = null;
  /** Past the input's deadline: delivery stops as soon as the collector holds it up. */
  pastInputDeadline = false;
  /** Since when the queue has been full (epoch ms); Infinity while it has room. */
  private fullSinceMs = Infinity;
  /**
   * No request before this (epoch ms): a collector's Retry-After holds every batch, not only
   * the one it answered, so the queue waits for the collector rather than being refused.
   */
  private notBeforeMs = 0;
  private stopped = false;
  /**
   * Emits `change` when a batch ends, delivery stops or the input's deadline passes: the waits
   * for room (`whenRoom`) and for the end (`drain`) look again then.
   */
  private readonly changes = new EventEmitter();

  constructor(
    private readonly exporter: SpanSender,
    private readonly opts: DeliveryOptions,
    private readonly onUnavailable: (error: string) => void,
  ) {}

  push(span: ReadableSpan): void {
    this.total++;
    if (this.stopped) {
      // Made after the end's deadline: lost to what held the others back, else to the deadline.
      this.lose(1, this.holdUp);
      return;
    }
    this.queue.push(span);
    if (!this.available && this.queue.length > this.opts.maxQueueSpans) {
      this.queue.shift();
      // The collector is away: the failure that keeps it so loses the oldest span.
      this.lose(1, this.holdUp ?? this.lastError);
    }
    this.pump();
    this.noteFull();
  }

  get pending(): number {
    return this.queue.length + (this.inFlight?.length ?? 0);
  }

  hasRoom(): boolean {
    return !this.available || this.queue.length < this.opts.maxQueueSpans;
  }

  /**
   * Resolves when the input may go on (room in the queue, or the collector given up on); past
   * the input's deadline a full queue is not waited on: delivery stops (`endWhenHeldFrom`).
   */
  async whenRoom(): Promise<void> {
    while (!this.hasRoom()) {
      if (this.pastInputDeadline) return this.stop();
      await once(this.changes, 'change');
    }
  }

  /**
   * The input's deadline (epoch ms): from then on, delivery stops (`stop`) as soon as it waits
   * on the collector — a full queue (a request that does not end), a failure no try has
   * succeeded since, the collector given up on. While the collector takes spans, the spans
   * still being made go on being sent, to the end's deadline (`drain`).
   */
  endWhenHeldFrom(atMs: number): void {
    if (this.stopped || this.inputTimer) return;
    this.inputTimer = callAt(atMs, () => {
      this.pastInputDeadline = true;
      if (this.heldUpAt(atMs)) this.stop();
      // A wait for room is not kept past the deadline (whenRoom): it looks again.
      else this.changes.emit('change');
    });
  }

  /**
   * Whether the collector held the spans back at `atMs`: a queue full since before then, a
   * failure, the collector away. The timer runs after `atMs`, maybe after a burst of spans
   * made in between (the end's last spans) filled the queue: the collector has not held those.
   */
  private heldUpAt(atMs: number): boolean {
    return !this.available || this.holdUp !== null || this.fullSinceMs < atMs;
  }

  /** Keeps `fullSinceMs` after the queue changed. */
  private noteFull(): void {
    if (this.queue.length < this.opts.maxQueueSpans) this.fullSinceMs = Infinity;
    else if (this.fullSinceMs === Infinity) this.fullSinceMs = Date.now();
  }

  /**
   * The end's deadline (epoch ms): delivery stops then (`stop`) at the latest, a wait for room
   * ends, and what is still queued, or made after, counts as lost. An earlier deadline wins.
   */
  endBy(atMs: number): void {
    if (this.stopped || atMs >= this.endAtMs) return;
    this.endAtMs = atMs;
    this.endTimer?.();
    this.endTimer = callAt(atMs, () => this.stop());
  }

  /**
   * Waits for everything queued to be sent, at most `timeoutMs` (or to an earlier deadline
   * set by `endBy`); what is left counts as lost.
   */
  async drain(timeoutMs: number): Promise<void> {
    this.endBy(Date.now() + timeoutMs);
    while (this.pending > 0 && !this.stopped) await once(this.changes, 'change');
    this.stop();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.retryTimer?.();
    this.endTimer?.();
    this.inputTimer?.();
    this.lose(this.pending, this.holdUp);
    this.queue.length = 0;
    this.noteFull();
    this.inFlight = null;
    this.changes.emit('change');
  }

  /**
   * A connection to the collector was made: a connection failure before it no longer says why
   * the spans in flight are not delivered (at the end, nothing heard is the deadline's fault).
   */
  connected(): void {
    if (this.lastErrorUnanswered) this.lastError = this.holdUp = null;
    this.lastErrorUnanswered = false;
  }

  private pump(): void {
    if (this.stopped || this.inFlight || this.retryTimer || this.queue.length === 0) return;
    if (this.notBeforeMs > Date.now()) {
      this.retryTimer = callAt(this.notBeforeMs, () => {
        this.retryTimer = null;
        this.pump();
      });
      return;
    }
    const batch = this.queue.splice(0, this.opts.maxBatchSpans);
    this.noteFull();
    this.inFlight = batch;
    this.attempt(batch, Date.now(), 0);
  }

  private attempt(batch: ReadableSpan[], firstTry: number, tries: number): void {
    this.exporter.export(batch, (result) => {
      if (this.stopped || this.inFlight !== batch) return;
      if (result.code === 0 /* ExportResultCode.SUCCESS */) {
        const rejected = Math.min(batch.length, Math.max(0, result.rejected?.count ?? 0));
        this.delivered += batch.length - rejected;
        this.holdUp = null;
        if (rejected > 0) {
          this.lose(rejected, result.rejected!.reason);
          this.lastError = result.rejected!.reason;
          this.lastErrorUnanswered = false;
        }
        this.available = true;
        this.finishBatch();
        return;
      }
      const reason = describeError(result.error);
      this.failed(reason, unanswered(result));
      // Past the input's deadline a failing collector is not waited on.
      if (this.pastInputDeadline) return this.stop();
      // A collector's Retry-After is honoured; one beyond retryMs gives the batch up now, and
      // the batches after it wait for it too.
      const backoffMs = Math.max(Math.min(2000, 100 * 2 ** tries), result.retryAfterMs ?? 0);
      if (result.retryAfterMs) this.notBeforeMs = Date.now() + result.retryAfterMs;
      if (Date.now() + backoffMs < firstTry + this.opts.retryMs) {
        this.retryTimer = callAt(Date.now() + backoffMs, () => {
          this.retryTimer = null;
          if (!this.stopped) this.attempt(batch, firstTry, tries + 1);
        });
        return;
      }
      this.lose(batch.length, reason);
      if (this.available) {
        this.available = false;
        this.onUnavailable(reason);
      }
      this.finishBatch();
    });
  }

  private failed(reason: string, unanswered: boolean): void {
    this.lastError = this.holdUp = reason;
    this.lastErrorUnanswered = unanswered;
  }

  private lose(spans: number, reason: string | null): void {
    if (spans <= 0) return;
    this.lost += spans;
    // A collector's messages may differ for every batch: the reasons kept are bounded.
    const key = this.lostFor.has(reason) || this.lostFor.size < MAX_LOSS_REASONS ? reason : OTHER_LOSSES;
    this.lostFor.set(key, (this.lostFor.get(key) ?? 0) + spans);
  }

  private finishBatch(): void {
    this.inFlight = null;
    this.changes.emit('change');
    this.pump();
  }
}

/**
 * Calls `fire` once at `atMs` (epoch ms), however far ahead (a `Retry-After` of months): a Node
 * timer waits at most MAX_TIMER_MS, so a longer wait is made of several. Returns the cancel.
 */
function callAt(atMs: number, fire: () => void): () => void {
  let timer: NodeJS.Timeout;
  const arm = () => {
    const waitMs = atMs - Date.now();
    if (waitMs > 0) timer = setTimeout(arm, timerMs(waitMs));
    else fire();
  };
  timer = setTimeout(arm, timerMs(atMs - Date.now()));
  return () => clearTimeout(timer);
}

/**
 * Why spans were not delivered, from the failures that lost them: a failure's reason alone when
 * one lost them all, else each reason after its count (`3: HTTP 400 Bad Request; 2: too big`),
 * in the order they first lost a span. Spans lost with no failure holding them were still
 * waiting when the end's wait was over.
 */
function undeliveredReason(lostFor: ReadonlyMap<string | null, number>, flushTimeoutMs: number): string {
  const named = [...lostFor].map(
    ([reason, spans]) => [reason ?? `not sent within flushTimeoutMs, ${flushTimeoutMs} ms`, spans] as const,
  );
  if (named.length === 1) return named[0][0];
  return named.map(([reason, spans]) => `${spans}: ${reason}`).join('; ');
}

/** An export that failed without an answer from the collector (no HTTP status). */
function unanswered(result: SendResult): boolean {
  return typeof (result.error as { code?: unknown } | undefined)?.code !== 'number';
}

function describeError(err: unknown): string {
  if (!err) return 'export failed';
  const e = err as { message?: string; code?: number | string };
  const code = typeof e.code === 'number' ? `HTTP ${e.code}` : typeof e.code === 'string' ? e.code : null;
  const msg = e.message && e.message !== 'undefined' ? e.message : null;
  if (code && msg?.includes(code)) return msg;
  return [code, msg].filter(Boolean).join(' ') || String(err);
}

/**
 * OTLP traces sink: a pass-through stage (record batches in, the same out) that turns the run
 * into one trace — GenAI `invoke_agent` and `execute_tool` spans with the stream's own times
 * (see TraceBuilder) — built by the OpenTelemetry SDK and sent over OTLP/HTTP with the
 * configuration of its exporter, which reads the OTEL_EXPORTER_OTLP_* variables (headers,
 * timeout, compression, certificates); OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME describe
 * the resource.
 *
 * A collector that is down, slow or failing never holds up the run for long and never costs
 * the files: see SpanDelivery. What was not delivered is reported once, with its count.
 */
export function createOtlpSink(options: OtlpSinkOptions): Transform {
  return new OtlpSink(options);
}

type Sdk = Awaited<ReturnType<typeof loadOtlpSdk>>;
/** What the SDK makes for a sink, once it is imported. */
type Live = { api: Sdk['api']; sender: OtlpHttpSender; delivery: SpanDelivery; tracer: OtelApi.Tracer };

class OtlpSink extends BatchTransform {
  readonly #opts: typeof OTLP_SINK_DEFAULTS & OtlpSinkOptions;
  readonly #run: SinkRun;
  readonly #url: string;
  /** The endpoint may carry credentials; messages show it redacted (see shownUrl). */
  readonly #where: string;
  readonly #builder: TraceBuilder;
  readonly #protocol: OtlpProtocol;
  /** Set once the SDK is imported (`_construct`). */
  #live: Live | null = null;
  readonly #ids = new DerivedIds();
  #fallbackRunId: string | null = null;
  #finished: Promise<void> | null = null;

  constructor(options: OtlpSinkOptions) {
    super();
    const opts = (this.#opts = withDefaults(OTLP_SINK_DEFAULTS, options));
    this.#run = requireSession(options, 'createOtlpSink');
    const env = options.env ?? process.env;
    this.#url = otlpTracesUrl(options.url, env);
    this.#where = shownUrl(this.#url);
    this.#protocol = otlpProtocol(options.protocol, env);
    this.#builder = new TraceBuilder({
      captureContent: opts.captureContent,
      maxContentChars: opts.maxContentChars,
      fallbackMs: Date.now(),
      costs: this.#run.cost,
    });
  }

  /** Node holds every write until the SDK is imported (an optional peer dependency). */
  override _construct(callback: (error?: Error | null) => void): void {
    loadOtlpSdk().then(
      (loaded) => {
        this.#start(loaded);
        callback();
      },
      (err: Error) => callback(err),
    );
  }

  #start({ api, sdk, resources, proto, json }: Sdk): void {
    const { convert, serializer } = this.#protocol === 'http/json' ? json : proto;
    const timeoutMs = this.#opts.timeoutMs;
    const contentType = this.#protocol === 'http/json' ? 'application/json' : 'application/x-protobuf';
    const config = convert(
      { url: this.#url, ...(timeoutMs !== undefined ? { timeoutMillis: timeoutMs } : {}) },
      'TRACES',
      'v1/traces',
      { 'Content-Type': contentType },
    );
    const sender = new OtlpHttpSender(config, serializer, () => delivery.connected());
    const delivery = new SpanDelivery(sender, this.#opts, (error) => this.#warnUnavailable(error));
    this.#live = { api, sender, delivery, tracer: this.#tracerOf(sdk, resources, delivery) };
    // Waits on the collector count from the input's end too: a batch still waiting for room in
    // the queue then (a slow collector) waits no longer than the last spans do. Spans the chain
    // makes later, while the collector takes them, are sent (see endWhenHeldFrom).
    const inputDeadline = () => delivery.endWhenHeldFrom(Date.now() + this.#opts.flushTimeoutMs);
    void this.#opts.inputEnded?.then(inputDeadline);
  }

  protected override transformBatch(batch: RecordBatch): BatchOutcome {
    for (const rec of batch) this.#emit(this.#builder.add(rec));
    const { delivery } = this.#live!;
    if (delivery.hasRoom()) return batch;
    return delivery.whenRoom().then(() => batch);
  }

  protected override flushAtEnd(): BatchOutcome {
    return this.#finish();
  }

  /** Interrupted or stalled: the trace still says what was running, within the same deadline. */
  protected override teardown(): PromiseLike<void> {
    return this.#finish();
  }

  #tracerOf(sdk: Sdk['sdk'], resources: Sdk['resources'], delivery: SpanDelivery): OtelApi.Tracer {
    const resource = resources
      .defaultResource()
      .merge(resources.resourceFromAttributes({ 'service.name': 'subtee' }))
      .merge(resources.detectResources({ detectors: [resources.envDetector] }));
    // Always on: a sampled part of a tree is no tree.
    const provider = new sdk.BasicTracerProvider({
      resource,
      idGenerator: this.#ids,
      sampler: new sdk.AlwaysOnSampler(),
      spanProcessors: [new HandOver((span) => delivery.push(span))],
    });
    return provider.getTracer('subtee');
  }

  #warnUnavailable(error: string): void {
    const why = withoutUrlSecrets(error, this.#url);
    const what = `collector ${this.#where} is not accepting spans (${why})`;
    this.#run.warn('OTLP_UNAVAILABLE', `${what}; the run goes on and spans are retried`);
  }

  #emit(spans: SpanData[]): void {
    const { api, tracer } = this.#live!;
    const ids = this.#ids;
    for (const sd of spans) {
      ids.traceId ||= traceIdOf(this.#builder.runId ?? (this.#fallbackRunId ??= randomRunId()));
      ids.next = spanIdOf(ids.traceId, sd.key);
      const parent =
        sd.parentKey === null
          ? api.ROOT_CONTEXT
          : api.trace.setSpanContext(api.ROOT_CONTEXT, {
              traceId: ids.traceId,
              spanId: spanIdOf(ids.traceId, sd.parentKey),
              traceFlags: api.TraceFlags.SAMPLED,
            });
      const start = { kind: api.SpanKind.INTERNAL, startTime: hrTime(sd.startMs), attributes: sd.attributes };
      const span = tracer.startSpan(sd.name, start, parent);
      if (sd.error !== null) span.setStatus({ code: api.SpanStatusCode.ERROR, message: sd.error });
      span.end(hrTime(sd.endMs));
    }
  }

  #finish(): Promise<void> {
    // Never started (the SDK could not be imported): nothing was sent, nothing to end.
    if (this.#live === null) return Promise.resolve();
    this.#finished ??= this.#end(this.#live);
    return this.#finished;
  }

  async #end({ delivery, sender }: Live): Promise<void> {
    this.#emit(this.#builder.finish(this.#run.tree.channels(), this.#run));
    await delivery.drain(this.#opts.flushTimeoutMs);
    // A request still waiting is cut: the process does not outlive the deadline.
    sender.close();
    if (delivery.lost > 0) {
      const why = undeliveredReason(delivery.lostFor, this.#opts.flushTimeoutMs);
      this.#run.warn(
        'OTLP_UNDELIVERED',
        `${delivery.lost} of ${delivery.total} spans not delivered to ${this.#where} ` +
          `(${withoutUrlSecrets(why, this.#url)})`,
      );
    }
  }
}

export {
  OTLP_PROTOCOLS,
  OTLP_SINK_DEFAULTS,
  OTLP_URL_FROM_ENV,
  otlpProtocol,
  otlpTracesUrl,
  type OtlpProtocol,
  type OtlpSinkOptions,
} from './otlp-options.js';
