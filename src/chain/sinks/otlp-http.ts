import type { Agent, ClientRequest, IncomingMessage } from 'node:http';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { timerMs } from '../../timer-ms.js';

/**
 * OTLP/HTTP requests of the OTLP sink, one attempt each: the exporter packages' configuration
 * (the endpoint, OTEL_EXPORTER_OTLP_* headers, timeout, compression, certificates) and
 * serializers, and subtee's own request, so that it hears every answer — a status the SDK's
 * exporter retries by itself, and the spans a collector rejects in a 200 ("partial success",
 * which the SDK's exporter only logs) — and can end every request at the run's deadline.
 * SpanDelivery does the retrying.
 */

/** What `convertLegacyHttpOptions` of `@opentelemetry/otlp-exporter-base/node-http` makes of the env. */
export interface OtlpHttpConfig {
  url: string;
  headers(): Promise<Record<string, string>>;
  compression: 'gzip' | 'none';
  timeoutMillis: number;
  agentFactory(protocol: string): Agent | Promise<Agent>;
  userAgent?: string;
}

/** `ProtobufTraceSerializer` or `JsonTraceSerializer` of `@opentelemetry/otlp-transformer`. */
export interface TraceSerializer {
  serializeRequest(spans: ReadableSpan[]): Uint8Array | undefined;
  deserializeResponse(data: Uint8Array): unknown;
}

/**
 * One export's outcome; `rejected` counts spans a collector refused in an answer of success,
 * `retryAfterMs` is how long a refusing collector asked to be left alone (`Retry-After`).
 */
export interface SendResult {
  code: number;
  error?: unknown;
  rejected?: { count: number; reason: string };
  retryAfterMs?: number;
}

/** What SpanDelivery sends through: this sender, or any SDK SpanExporter. */
export interface SpanSender {
  export(spans: ReadableSpan[], done: (result: SendResult) => void): void;
  shutdown(): Promise<void>;
}

/** The most of an answer read: the SDK's exporter reads as much. */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024;
/** Collector text inside a warning: printable ASCII, at most this long. */
const MAX_REASON_CHARS = 200;

const gzipped = promisify(gzip);


/** A collector's words inside a warning line: printable ASCII (others `?`), `...` when cut. */
function collectorText(s: string): string {
  const printable = s.replace(/[^\x20-\x7e]/g, '?');
  return printable.length > MAX_REASON_CHARS ? `${printable.slice(0, MAX_REASON_CHARS - 3)}...` : printable;
}

/**
 * A `Retry-After` header in milliseconds from `nowMs`: delay-seconds or an HTTP date; null when
 * absent or unreadable.
 */
export function retryAfterMsOf(header: string | string[] | undefined, nowMs: number): number | null {
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!value) return null;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  // An HTTP date ends in GMT; Date.parse alone would take "1.5" for a day in 2001.
  const at = / GMT$/.test(value) ? Date.parse(value) : NaN;
  return Number.isFinite(at) ? Math.max(0, at - nowMs) : null;
}

/** The error of an export that could not be sent, or was cut at the end of the run. */
const exportClosed = () =>
  Object.assign(new Error('the run has ended'), { code: 'SUBTEE_EXPORT_CLOSED' });

/**
 * The spans a collector rejected, from a decoded ExportTraceServiceResponse (protobuf's
 * decoded object or OTLP/JSON, where the int64 count is a string): null when none.
 */
export function rejectedOf(response: unknown, batchSize: number): { count: number; reason: string } | null {
  const partial = (response as { partialSuccess?: { rejectedSpans?: unknown; errorMessage?: unknown } })
    ?.partialSuccess;
  if (partial === null || typeof partial !== 'object') return null;
  const count = Number(String(partial.rejectedSpans ?? 0));
  if (!Number.isInteger(count) || count <= 0) return null;
  const message = typeof partial.errorMessage === 'string' ? collectorText(partial.errorMessage) : '';
  return { count: Math.min(count, batchSize), reason: message || 'rejected by the collector' };
}

/**
 * Sends each batch in one request. `onConnect` hears each new connection made. `close()` ends
 * every request still waiting and the agent's connections: nothing is left to keep the
 * process alive.
 */
export class OtlpHttpSender implements SpanSender {
  #agent: Agent | null = null;
  #closed = false;
  readonly #requests = new Set<ClientRequest>();

  constructor(
    private readonly config: OtlpHttpConfig,
    private readonly serializer: TraceSerializer,
    private readonly onConnect: () => void = () => {},
  ) {}

  export(spans: ReadableSpan[], done: (result: SendResult) => void): void {
    this.#send(spans).then(done, (error: unknown) => done({ code: 1, error }));
  }

  async #send(spans: ReadableSpan[]): Promise<SendResult> {
    if (this.#closed) return { code: 1, error: exportClosed() };
    const serialized = this.serializer.serializeRequest(spans);
    if (serialized === undefined) return { code: 1, error: new Error('the spans could not be serialized') };
    const url = new URL(this.config.url);
    const agent = (this.#agent ??= await this.config.agentFactory(url.protocol));
    const headers: Record<string, string> = { ...(await this.config.headers()) };
    headers['User-Agent'] = this.config.userAgent ? `${this.config.userAgent} subtee` : 'subtee';
    let body = Buffer.from(serialized.buffer, serialized.byteOffset, serialized.byteLength);
    if (this.config.compression === 'gzip') {
      body = await gzipped(body);
      headers['Content-Encoding'] = 'gzip';
    }
    if (this.#closed) return { code: 1, error: exportClosed() };
    const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const timeoutMs = this.config.timeoutMillis;
    return new Promise<SendResult>((resolve) => {
      // The first outcome counts: the deadline's, an error's, or the whole answer's.
      let deadline: NodeJS.Timeout | null = null;
      const settle = (result: SendResult) => {
        if (deadline === null) return;
        clearTimeout(deadline);
        deadline = null;
        resolve(result);
      };
      const req = request(url, { method: 'POST', headers, agent }, (res) =>
        this.#answer(res, spans.length, settle),
      );
      // One deadline for the whole request, from its start to the last byte of the answer: an
      // idle timeout would let a collector that trickles its answer a byte at a time hold it
      // for ever.
      deadline = setTimeout(() => {
        const error = Object.assign(new Error(`the request did not end within ${timeoutMs} ms`), {
          code: 'ETIMEDOUT',
        });
        settle({ code: 1, error });
        req.destroy(error);
      }, timerMs(timeoutMs));
      this.#requests.add(req);
      req.on('close', () => this.#requests.delete(req));
      req.on('socket', (socket) => {
        if (socket.connecting) socket.once('connect', () => this.onConnect());
      });
      req.on('error', (error) => settle({ code: 1, error }));
      req.end(body);
    });
  }

  #answer(res: IncomingMessage, batchSize: number, resolve: (r: SendResult) => void): void {
    const chunks: Buffer[] = [];
    let bytes = 0;
    res.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes <= MAX_ANSWER_BYTES) chunks.push(chunk);
    });
    res.on('error', (error) => resolve({ code: 1, error }));
    res.on('end', () => {
      const status = res.statusCode ?? 0;
      if (status < 200 || status > 299) {
        const error = { code: status, message: collectorText(res.statusMessage ?? '') };
        const retryAfterMs = retryAfterMsOf(res.headers['retry-after'], Date.now());
        resolve(retryAfterMs === null ? { code: 1, error } : { code: 1, error, retryAfterMs });
        return;
      }
      let decoded: unknown = null;
      const data = Buffer.concat(chunks);
      try {
        if (data.length > 0 && bytes <= MAX_ANSWER_BYTES) decoded = this.serializer.deserializeResponse(data);
      } catch {
        // An answer of success that cannot be read says no more than its status.
      }
      const rejected = rejectedOf(decoded, batchSize);
      resolve(rejected === null ? { code: 0 } : { code: 0, rejected });
    });
  }

  close(): void {
    this.#closed = true;
    for (const req of this.#requests) req.destroy(exportClosed());
    this.#agent?.destroy();
  }

  shutdown(): Promise<void> {
    this.close();
    return Promise.resolve();
  }
}
