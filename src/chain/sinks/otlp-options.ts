import { UsageError } from '../../errors.js';
import { CUT_LENGTHS } from '../../model/display.js';
import type { SinkRun } from '../../model/session.js';
import { httpUrlProblem, shownUrl } from '../../shown-url.js';
import { BUILTIN_KIT, type PluginManifest } from '../plugin.js';

/**
 * The otlp sink's options (defaults, types, specs) and definition without its code: at hand for
 * the command line, configs and the schema. Its code (otlp.ts) is imported only by a chain that
 * names it (builtins.ts).
 */

export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

/** `url` value (what `--otlp` alone means): the endpoint from OTEL_EXPORTER_OTLP_* or the default. */
export const OTLP_URL_FROM_ENV = 'env';

export const OTLP_SINK_DEFAULTS = Object.freeze({
  captureContent: false,
  maxContentChars: CUT_LENGTHS.block.chars,
  /** How long one batch of spans is retried (with backoff) before it counts as not delivered. */
  retryMs: 5000,
  /** At the end of the run: how long to wait for the last spans to be delivered. */
  flushTimeoutMs: 5000,
  /** Finished spans held while the collector accepts them; input waits beyond this. */
  maxQueueSpans: 2048,
  /** Spans per export request. */
  maxBatchSpans: 512,
});

/** The traces endpoint the sink sends to, following the OTLP exporter environment variables. */
export function otlpTracesUrl(url: string | undefined, env: NodeJS.ProcessEnv): string {
  const given = url === undefined || url === OTLP_URL_FROM_ENV ? undefined : url;
  if (given !== undefined) {
    try {
      const u = new URL(given);
      if (u.pathname === '' || u.pathname === '/') u.pathname = '/v1/traces';
      return u.toString();
    } catch {
      const hint = ' (--otlp alone goes after FILE, or write --otlp=URL)';
      throw new UsageError('ERR_BAD_OPTION', `otlp: not a URL: ${shownUrl(given)}${hint}`);
    }
  }
  const variable = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
    ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'
    : env.OTEL_EXPORTER_OTLP_ENDPOINT
      ? 'OTEL_EXPORTER_OTLP_ENDPOINT'
      : undefined;
  if (variable === undefined) return 'http://localhost:4318/v1/traces';
  const value = env[variable] as string;
  // The generic variable names the base of every signal's endpoint; the traces one is used as given.
  const endpoint =
    variable === 'OTEL_EXPORTER_OTLP_ENDPOINT'
      ? `${value.endsWith('/') ? value : `${value}/`}v1/traces`
      : value;
  const problem = httpUrlProblem(endpoint);
  if (problem !== null)
    throw new UsageError('ERR_BAD_OPTION', `otlp: ${variable} ${problem}, not "${shownUrl(value)}"`);
  return new URL(endpoint).toString();
}

export function otlpProtocol(protocol: string | undefined, env: NodeJS.ProcessEnv): OtlpProtocol {
  const p = protocol ?? env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL;
  if (p === undefined) return 'http/protobuf';
  if (!(OTLP_PROTOCOLS as readonly string[]).includes(p)) {
    const supported = OTLP_PROTOCOLS.join(' or ');
    throw new UsageError('ERR_BAD_OPTION', `otlp: protocol ${p} is not supported (use ${supported})`);
  }
  return p as OtlpProtocol;
}

export interface OtlpSinkOptions {
  /** The collector's OTLP/HTTP endpoint (`/v1/traces` is added to a URL without a path), or `env`. */
  url?: string;
  /** Default: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf. */
  protocol?: OtlpProtocol;
  captureContent?: boolean;
  maxContentChars?: number;
  /** One export request's timeout; default OTEL_EXPORTER_OTLP_TIMEOUT, else 10000. */
  timeoutMs?: number;
  retryMs?: number;
  flushTimeoutMs?: number;
  maxQueueSpans?: number;
  maxBatchSpans?: number;
  /** The chain's session, shared by every stage (required). */
  session: SinkRun;
  env?: NodeJS.ProcessEnv;
  /**
   * Resolves once the chain's input has ended (runChain's): `flushTimeoutMs` after it, a
   * collector that holds delivery up (a full queue, a failed send) ends it, while one that
   * takes spans still gets those the chain makes. The final wait counts from the sink's own end.
   */
  inputEnded?: Promise<void>;
}

export const otlpSinkDefinition: PluginManifest<Omit<OtlpSinkOptions, 'session' | 'env' | 'inputEnded'>> = {
  name: 'otlp',
  kind: 'sink',
  kit: BUILTIN_KIT,
  options: {
    url: {
      type: 'string',
      // Checked with the options, before any sink is made: a bad URL leaves no folder behind.
      check: (url: string) => (url === OTLP_URL_FROM_ENV ? null : httpUrlProblem(url)),
      description:
        'OTLP/HTTP collector endpoint (/v1/traces is added to a URL without a path); "env", also when ' +
        'no URL is given: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, ' +
        'else http://localhost:4318',
    },
    protocol: {
      type: 'string',
      choices: OTLP_PROTOCOLS,
      description:
        'http/protobuf or http/json (default OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, ' +
        'OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)',
    },
    captureContent: {
      type: 'boolean',
      default: OTLP_SINK_DEFAULTS.captureContent,
      description: 'prompts, reports, tool arguments and results as span attributes',
    },
    maxContentChars: {
      type: 'integer',
      min: 1,
      default: OTLP_SINK_DEFAULTS.maxContentChars,
      description: 'longest content attribute',
    },
    timeoutMs: {
      type: 'integer',
      min: 1,
      description: "one export request's timeout (default OTEL_EXPORTER_OTLP_TIMEOUT, else 10000)",
    },
    retryMs: {
      type: 'integer',
      min: 0,
      default: OTLP_SINK_DEFAULTS.retryMs,
      description: 'how long a batch of spans is retried before it counts as not delivered',
    },
    flushTimeoutMs: {
      type: 'integer',
      min: 0,
      default: OTLP_SINK_DEFAULTS.flushTimeoutMs,
      description: 'at the end, how long to wait for the last spans',
    },
    maxQueueSpans: {
      type: 'integer',
      min: 1,
      default: OTLP_SINK_DEFAULTS.maxQueueSpans,
      description: 'finished spans held before input waits',
    },
    maxBatchSpans: {
      type: 'integer',
      min: 1,
      default: OTLP_SINK_DEFAULTS.maxBatchSpans,
      description: 'spans per export request',
    },
  },
  checkEnvironment: (o, env) => {
    otlpTracesUrl(o.url, env);
    otlpProtocol(o.protocol, env);
  },
};
