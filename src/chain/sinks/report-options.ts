import type { Writable } from 'node:stream';
import { UsageError } from '../../errors.js';
import type { SinkRun } from '../../model/session.js';
import { REPORT_DEFAULTS, type ReportLimits } from '../../views/report/model.js';
import { BUILTIN_KIT, type PluginManifest } from '../plugin.js';
import type { ServeAddress } from './report-server.js';

/**
 * The report sink's options (defaults, types, specs) and definition without its code: at hand for
 * the command line, configs and the schema. Its code (report.ts) is imported only by a chain that
 * names it (builtins.ts).
 */

export const REPORT_SINK_DEFAULTS = Object.freeze({
  /** Write OUT/report.html when the run ends (also when it stalls or is interrupted). */
  html: false,
  /** No line on stderr about the written report. */
  quiet: false,
  /** How often the live page is sent what changed. */
  flushMs: 100,
});

/** Where `--serve` binds unless a host is given: only this machine can connect. */
export const SERVE_DEFAULT_HOST = '127.0.0.1';

/** `[HOST:]PORT`, HOST in brackets for an IPv6 address. */
const SERVE_ADDRESS = /^(?:(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):)?(\d{1,5})$/;

/** What is wrong with `value` as `serve`'s address, or null: the check of the option. */
export function serveProblem(value: string): string | null {
  const m = SERVE_ADDRESS.exec(value);
  return m && Number(m[2]) <= 65535 ? null : 'must be [HOST:]PORT with PORT 0-65535 (0: any free port)';
}

/** `--serve [HOST:]PORT`: `8080`, `0` (any free port), `127.0.0.1:8080`, `[::1]:0`, `0.0.0.0:8080`. */
export function parseServe(value: string): ServeAddress {
  const problem = serveProblem(value);
  if (problem !== null) throw new UsageError('ERR_BAD_OPTION', `--serve ${problem}, not "${value}"`);
  const [, host, port] = SERVE_ADDRESS.exec(value)!;
  const bare = host === undefined ? SERVE_DEFAULT_HOST : host.replace(/^\[(.*)\]$/, '$1');
  return { host: bare, port: Number(port) };
}

/** What is wrong with the report's options taken together, or null: `html` needs `out`. */
export function reportOptionsProblem(options: { out?: string; html?: boolean }): string | null {
  return (options.html ?? REPORT_SINK_DEFAULTS.html) && !options.out
    ? 'html needs out, the output folder the files sink writes'
    : null;
}

/** The report's limits a config sets; the others are the page's own. */
export type ReportPluginOptions = Omit<
  ReportSinkOptions,
  | 'session'
  | 'stderr'
  | 'flushMs'
  | 'indexWritten'
  | Exclude<keyof ReportLimits, 'maxPageBytes' | 'channelChars'>
>;

export interface ReportSinkOptions extends Partial<ReportLimits> {
  /** The output folder the report is built from (the files sink's). Needed by `html`. */
  out?: string;
  html?: boolean;
  /** `[HOST:]PORT` to serve the live page on. */
  serve?: string;
  quiet?: boolean;
  flushMs?: number;
  session?: SinkRun;
  stderr?: Writable;
  /**
   * Settles once the files sink has written index.json (the chain's `indexWritten`): `html`
   * builds the page then, the end of the input handed on meanwhile. Without it, at the end.
   */
  indexWritten?: PromiseLike<void>;
}

export const reportSinkDefinition: PluginManifest<ReportPluginOptions> = {
  name: 'report',
  kind: 'sink',
  kit: BUILTIN_KIT,
  options: {
    out: {
      type: 'string',
      description: 'the output folder the static report is built from (set from --out by --html)',
    },
    html: {
      type: 'boolean',
      default: REPORT_SINK_DEFAULTS.html,
      description:
        'write OUT/report.html when the run ends, stalls or is interrupted (list this sink after files)',
    },
    serve: {
      type: 'string',
      check: serveProblem,
      description:
        '[HOST:]PORT to serve the live report on (host 127.0.0.1 unless given; port 0 picks one)',
    },
    quiet: {
      type: 'boolean',
      default: REPORT_SINK_DEFAULTS.quiet,
      description: 'no line on stderr about the written report',
    },
    maxPageBytes: {
      type: 'integer',
      min: 262144,
      default: REPORT_DEFAULTS.maxPageBytes,
      description: 'largest page; transcripts, then long fields, then the deepest agents are cut to fit',
    },
    channelChars: {
      type: 'integer',
      min: 0,
      default: REPORT_DEFAULTS.channelChars,
      description: 'transcript characters per agent at most',
    },
  },
};
