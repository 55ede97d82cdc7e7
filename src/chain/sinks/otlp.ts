import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { Duplex, Transform } from 'node:stream';
import type * as OtelApi from '@opentelemetry/api';
import type { HrTime } from '@opentelemetry/api';
import type { IdGenerator, ReadableSpan, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { withDefaults } from '../../defaults.js';
import { onceLoader } from '../../optional-package.js';
import { shownUrl, withoutUrlSecrets } from '../../shown-url.js';
import type { RecordBatch } from '../../model/record.js';
import { requireSession, type SinkRun } from '../../model/session.js';
import { TraceBuilder, type SpanData } from './otlp-spans.js';
import { lateWarn, randomRunId, spanIdOf, traceIdOf } from './stream-facts.js';
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
  const [api, sdk, resources, proto, json] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/exporter-trace-otlp-proto'),
    import('@opentelemetry/exporter-trace-otlp-http'),
  ]);
  return { api, sdk, resources, proto, json };
});

/** Imports the SDK: the chain does before the sink is made, so a missing package stops the run first. */
export async function importOtlpSdk(): Promise<void> {
  await loadOtlpSdk();
}

/** The error a closed agent fails a new connection with: the exporter does not retry it. */
const exportClosed = () => Object.assign(new Error('the run has ended'), { code: 'SUBTEE_EXPORT_CLOSED' });

/**
 * What an agent tells of its connections: why one failed (refused, reset, a TLS error), or
 * null once one is made again.
 */
type ConnectionState = (error: unknown) => void;

/** A new connection, with its failure and its success told to `onState`. */
function watched<T extends Duplex | null | undefined>(socket: T, onState: ConnectionState): T {
  socket?.on('error', onState).on('connect', () => onState(null));
  return socket;
}

/**
 * HTTP and HTTPS agents that, once closed, destroy their sockets and fail every new
 * connection at once. A custom agent overriding `createConnection` is what Node documents
 * for this (http.Agent), and the exporter takes agents from its `httpAgentOptions` factory.
 * They also say why a connection failed: the exporter retries a refused connection by itself
 * until its timeout and says nothing of it before, which may be after the run's end.
 */
class ClosableHttpAgent extends HttpAgent {
  #closed = false;
  constructor(private readonly onState: ConnectionState) {
    super({ keepAlive: true });
  }
  override createConnection(...args: Parameters<HttpAgent['createConnection']>) {
    if (!this.#closed) return watched(super.createConnection(...args), this.onState);
    process.nextTick(() => args[1]?.(exportClosed(), undefined as never));
    return undefined;
  }
  close(): void {
    this.#closed = true;
    this.destroy();
  }
}

class ClosableHttpsAgent extends HttpsAgent {
  #closed = false;
  constructor(private readonly onState: ConnectionState) {
    super({ keepAlive: true });
  }
  override createConnection(...args: Parameters<HttpsAgent['createConnection']>) {
    if (!this.#closed) return watched(super.createConnection(...args), this.onState);
    process.nextTick(() => args[1]?.(exportClosed(), undefined as never));
    return undefined;
  }
  close(): void {
    this.#closed = true;
    this.destroy();
  }
}

function closableAgent(proto: string, onState: ConnectionState): ClosableHttpAgent | ClosableHttpsAgent {
  return proto === 'https:' ? new ClosableHttpsAgent(onState) : new ClosableHttpAgent(onState);
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
 * one batch at a time, so a collector that comes back gets everything still queued.
 *
 * @internal Its types are the SDK's, an optional package: left out of the declarations.
 */
export class SpanDelivery {
  delivered = 0;
  lost = 0;
  total = 0;
  available = true;
  lastError: string | null = null;
  private readonly queue: ReadableSpan[] = [];
  private inFlight: ReadableSpan[] | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private stopped = false;
  private readonly waiters: Array<() => void> = [];

  constructor(
    private readonly exporter: SpanExporter,
    private readonly opts: DeliveryOptions,
    private readonly onUnavailable: (error: string) => void,
  ) {}

  push(span: ReadableSpan): void {
    this.total++;
    if (this.stopped) {
      this.lost++;
      return;
    }
    this.queue.push(span);
    if (!this.available && this.queue.length > this.opts.maxQueueSpans) {
      this.queue.shift();
      this.lost++;
    }
    this.pump();
  }

  get pending(): number {
    return this.queue.length + (this.inFlight?.length ?? 0);
  }

  hasRoom(): boolean {
    return !this.available || this.queue.length < this.opts.maxQueueSpans;
  }

  /** Resolves when the input may go on (room in the queue, or the collector given up on). */
  async whenRoom(): Promise<void> {
    while (!this.hasRoom()) await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  /** Waits for everything queued to be sent, at most `timeoutMs`; what is left counts as lost. */
  async drain(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.pending > 0 && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(50, Math.max(1, deadline - Date.now())));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    this.stop();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.lost += this.pending;
    this.queue.length = 0;
    this.inFlight = null;
    this.wake();
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  private pump(): void {
    if (this.stopped || this.inFlight || this.queue.length === 0) return;
    const batch = this.queue.splice(0, this.opts.maxBatchSpans);
    this.inFlight = batch;
    this.attempt(batch, Date.now(), 0);
  }

  private attempt(batch: ReadableSpan[], firstTry: number, tries: number): void {
    this.exporter.export(batch, (result) => {
      if (this.stopped || this.inFlight !== batch) return;
      if (result.code === 0 /* ExportResultCode.SUCCESS */) {
        this.delivered += batch.length;
        this.available = true;
        this.finishBatch();
        return;
      }
      this.lastError = describeError(result.error);
      const backoffMs = Math.min(2000, 100 * 2 ** tries);
      if (Date.now() + backoffMs < firstTry + this.opts.retryMs) {
        this.retryTimer = setTimeout(() => {
          this.retryTimer = null;
          if (!this.stopped) this.attempt(batch, firstTry, tries + 1);
        }, backoffMs);
        return;
      }
      this.lost += batch.length;
      if (this.available) {
        this.available = false;
        this.onUnavailable(this.lastError);
      }
      this.finishBatch();
    });
  }

  private finishBatch(): void {
    this.inFlight = null;
    this.wake();
    this.pump();
  }
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
 * (see TraceBuilder) — and sends it with the OpenTelemetry SDK's OTLP/HTTP exporter, which
 * reads the OTEL_EXPORTER_OTLP_* variables (headers, timeout, compression, certificates);
 * OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME describe the resource.
 *
 * A collector that is down, slow or failing never holds up the run for long and never costs
 * the files: see SpanDelivery. What was not delivered is reported once, with its count.
 */
export function createOtlpSink(options: OtlpSinkOptions): Transform {
  return new OtlpSink(options);
}

type Sdk = Awaited<ReturnType<typeof loadOtlpSdk>>;
/** What the SDK makes for a sink, once it is imported. */
type Live = { api: Sdk['api']; exporter: SpanExporter; delivery: SpanDelivery; tracer: OtelApi.Tracer };

class OtlpSink extends BatchTransform {
  readonly #opts: typeof OTLP_SINK_DEFAULTS & OtlpSinkOptions;
  readonly #run: SinkRun;
  readonly #url: string;
  /** The endpoint may carry credentials; messages show it redacted (see shownUrl). */
  readonly #where: string;
  readonly #builder: TraceBuilder;
  readonly #agents: Array<{ close(): void }> = [];
  #agentsClosed = false;
  readonly #protocol: OtlpProtocol;
  /** Set once the SDK is imported (`_construct`). */
  #live: Live | null = null;
  readonly #ids = new DerivedIds();
  #fallbackRunId: string | null = null;
  #finished: Promise<void> | null = null;
  /** Why the latest connection to the collector failed, as the agents saw it; null once one is made. */
  #connectionError: string | null = null;

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
    const config = this.#exporterConfig(this.#opts.timeoutMs);
    const { OTLPTraceExporter } = this.#protocol === 'http/json' ? json : proto;
    const exporter = new OTLPTraceExporter(config);
    const delivery = new SpanDelivery(exporter, this.#opts, (error) => this.#warnUnavailable(error));
    this.#live = { api, exporter, delivery, tracer: this.#tracerOf(sdk, resources, delivery) };
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

  #exporterConfig(timeoutMs: number | undefined) {
    return {
      url: this.#url,
      ...(timeoutMs !== undefined ? { timeoutMillis: timeoutMs } : {}),
      // Our own agents, so that the end of the run can cut a request to a collector that hangs
      // (and the exporter's own retries of it): the process must not outlive the flush deadline.
      httpAgentOptions: (proto: string) => {
        const a = closableAgent(proto, (err) => {
          this.#connectionError = err === null ? null : describeError(err);
        });
        this.#agents.push(a);
        if (this.#agentsClosed) a.close();
        return a;
      },
    };
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
    lateWarn(this.#run, 'OTLP_UNAVAILABLE', `${what}; the run goes on and spans are retried`);
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

  async #end({ delivery, exporter }: Live): Promise<void> {
    this.#emit(this.#builder.finish(this.#run.tree.channels(), this.#run));
    await delivery.drain(this.#opts.flushTimeoutMs);
    this.#agentsClosed = true;
    for (const a of this.#agents) a.close();
    void exporter.shutdown().catch(() => {});
    if (delivery.lost > 0) {
      // The exporter's own reason, else the failed connection it was still retrying, else the
      // deadline that cut it short.
      const why =
        delivery.lastError ??
        this.#connectionError ??
        `not sent within flushTimeoutMs, ${this.#opts.flushTimeoutMs} ms`;
      lateWarn(
        this.#run,
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
