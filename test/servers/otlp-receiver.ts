import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';

/**
 * A loopback OTLP/HTTP traces receiver for tests. Protobuf bodies are decoded with the
 * message classes generated from the official opentelemetry-proto definitions (shipped in
 * `@opentelemetry/otlp-transformer` 0.57, installed under the alias `otlp-proto`; they are
 * not the encoder subtee uses), JSON bodies as OTLP/JSON.
 */
const root = createRequire(import.meta.url)('otlp-proto/build/src/generated/root.js');
const ExportTraceServiceRequest = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const ExportTraceServiceResponse = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, string | number | boolean>;
  /** 0 unset, 1 ok, 2 error. */
  statusCode: number;
  statusMessage: string;
  resource: Record<string, string | number | boolean>;
  scope: string;
}

/**
 * What the receiver does with one request: accept it, answer with a status, never answer,
 * drop the connection, answer 200 and then send a byte every 50 ms without ever ending the
 * body (`trickle`), answer a status with a `Retry-After` header, or keep all but
 * `rejectSpans` of its spans and answer 200 with an OTLP partial success naming them
 * (`rejectedSpans`, `errorMessage`) in the request's encoding.
 */
export type Behaviour =
  | 'accept'
  | 'hang'
  | 'drop'
  | 'trickle'
  | number
  | { status: number; retryAfter: string }
  | { rejectSpans: number; message: string };

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Requests received, answered or not, with their content type and a hash of the body. */
  requests: Array<{ contentType: string; bytes: number; sha1: string; spans: number }>;
  behave(b: Behaviour | ((n: number) => Behaviour)): void;
  /** Accepts every request held by 'hang' so far. */
  release(): void;
  /** Headers of the last request. */
  lastHeaders: Record<string, string | string[] | undefined>;
  /** Resolves once `n` spans have been received. */
  waitForSpans(n: number, timeoutMs?: number): Promise<void>;
  /** Resolves once `n` requests have been received, answered or not. */
  waitForRequests(n: number): Promise<void>;
  close(): Promise<void>;
}

const hex = (b: Uint8Array | string | undefined | null) =>
  b === undefined || b === null
    ? ''
    : typeof b === 'string'
      ? b.toLowerCase()
      : Buffer.from(b).toString('hex');

function anyValue(v: Record<string, unknown>): string | number | boolean {
  if (v.stringValue !== undefined && v.stringValue !== null) return String(v.stringValue);
  if (v.boolValue !== undefined && v.boolValue !== null) return Boolean(v.boolValue);
  if (v.intValue !== undefined && v.intValue !== null) return Number(v.intValue);
  if (v.doubleValue !== undefined && v.doubleValue !== null) return Number(v.doubleValue);
  return JSON.stringify(v);
}

function attrs(list: unknown): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const kv of (list as Array<{ key: string; value: Record<string, unknown> }>) ?? [])
    out[kv.key] = anyValue(kv.value ?? {});
  return out;
}

const nanosToMs = (n: unknown) => Number(BigInt(String(n)) / 1000n) / 1000;

/** Spans of one decoded ExportTraceServiceRequest (protobuf `toObject` or OTLP/JSON: same shape). */
function spansOf(req: any): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of req.resourceSpans ?? []) {
    const resource = attrs(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: hex(s.traceId),
          spanId: hex(s.spanId),
          parentSpanId: hex(s.parentSpanId),
          name: s.name,
          kind: Number(s.kind ?? 0),
          startMs: nanosToMs(s.startTimeUnixNano),
          endMs: nanosToMs(s.endTimeUnixNano),
          attributes: attrs(s.attributes),
          statusCode: Number(s.status?.code ?? 0),
          statusMessage: s.status?.message ?? '',
          resource,
          scope: ss.scope?.name ?? '',
        });
      }
    }
  }
  return out;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: OtlpReceiver['requests'] = [];
  let behaviour: Behaviour | ((n: number) => Behaviour) = 'accept';
  const hung = new Map<ServerResponse, () => void>();
  const trickling = new Set<ServerResponse>();
  const listeners = new Set<() => void>();
  let lastHeaders: Record<string, string | string[] | undefined> = {};

  const decode = (contentType: string, buf: Buffer) =>
    spansOf(
      contentType.includes('json')
        ? JSON.parse(buf.toString('utf8'))
        : ExportTraceServiceRequest.toObject(ExportTraceServiceRequest.decode(buf), {
            longs: String,
            enums: Number,
            bytes: Array,
          }),
    );
  const accept = (
    path: string | undefined,
    contentType: string,
    buf: Buffer,
    res: ServerResponse,
    reject?: { rejectSpans: number; message: string },
  ) => {
    if (path !== '/v1/traces') {
      res.writeHead(404).end();
      return;
    }
    const got = decode(contentType, buf);
    const rejected = Math.min(reject?.rejectSpans ?? 0, got.length);
    spans.push(...got.slice(rejected));
    for (const l of listeners) l();
    const partial = (count: number | string) =>
      reject ? { partialSuccess: { rejectedSpans: count, errorMessage: reject.message } } : {};
    if (contentType.includes('json')) {
      // OTLP/JSON writes the int64 count as a string.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(partial(String(rejected))));
    } else {
      const response = ExportTraceServiceResponse.fromObject(partial(rejected));
      const body = ExportTraceServiceResponse.encode(response).finish();
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(Buffer.from(body));
    }
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const body: Buffer[] = [];
    req.on('data', (d) => body.push(d));
    req.on('end', () => {
      const buf = Buffer.concat(body);
      const contentType = String(req.headers['content-type'] ?? '');
      let count = 0;
      try {
        count = decode(contentType, buf).length;
      } catch {
        // Not a request of spans: counted as none.
      }
      const sha1 = createHash('sha1').update(buf).digest('hex');
      requests.push({ contentType, bytes: buf.length, sha1, spans: count });
      lastHeaders = req.headers;
      for (const l of listeners) l();
      const b = typeof behaviour === 'function' ? behaviour(requests.length) : behaviour;
      if (b === 'hang') hung.set(res, () => accept(req.url, contentType, buf, res));
      else if (b === 'accept') accept(req.url, contentType, buf, res);
      else if (b === 'drop') req.socket.destroy();
      else if (b === 'trickle') {
        res.writeHead(200, { 'content-type': 'application/x-protobuf' });
        trickling.add(res);
        const timer = setInterval(() => res.write(' '), 50);
        res.on('close', () => (clearInterval(timer), trickling.delete(res)));
      } else if (typeof b === 'object' && 'status' in b) {
        res.writeHead(b.status, { 'retry-after': b.retryAfter }).end();
      }
      else if (typeof b === 'object') accept(req.url, contentType, buf, res, b);
      else res.writeHead(b, { 'content-type': 'text/plain' }).end('refused by the test');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    requests,
    behave(b) {
      behaviour = b;
    },
    release() {
      const held = [...hung.values()];
      hung.clear();
      for (const answer of held) answer();
    },
    get lastHeaders() {
      return lastHeaders;
    },
    waitForSpans(n, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (spans.length < n) return;
          listeners.delete(check);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`only ${spans.length} of ${n} spans arrived`));
        }, timeoutMs);
        listeners.add(check);
        check();
      });
    },
    waitForRequests(n) {
      return new Promise((resolve) => {
        const check = () => {
          if (requests.length < n) return;
          listeners.delete(check);
          resolve();
        };
        listeners.add(check);
        check();
      });
    },
    async close() {
      for (const res of [...hung.keys(), ...trickling]) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
