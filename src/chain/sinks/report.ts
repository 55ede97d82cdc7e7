import { Transform, type TransformCallback, type Writable } from 'node:stream';
import { withDefaults } from '../../defaults.js';
import { UsageError } from '../../errors.js';
import { BATCH_HIGH_WATER_MARK, type RecordBatch } from '../../model/record.js';
import type { Session } from '../../model/session.js';
import { reportLine, subteeVersion, writeReport } from '../../views/report/build.js';
import { channelReaderFor } from '../stages/input-format.js';
import { LiveReport, ReportFeed } from '../../views/report/live.js';
import { REPORT_DEFAULTS, type ReportLimits } from '../../views/report/model.js';
import { pageHtml } from '../../views/report/page.js';
import { BUILTIN_KIT, definePlugin } from '../plugin.js';
import type { ReportServer, ServeAddress } from './report-server.js';

export const REPORT_SINK_DEFAULTS = Object.freeze({
  /** Write OUT/report.html when the run ends (also when it stalls or is interrupted). */
  html: false,
  /** No line on stderr about the written report. */
  quiet: false,
  /** How often the live page is sent what changed. */
  flushMs: 100,
});

export interface ReportSinkOptions extends Partial<ReportLimits> {
  /** The output folder the report is built from (the files sink's). Needed by `html`. */
  out?: string;
  html?: boolean;
  /** `[HOST:]PORT` to serve the live page on. */
  serve?: string;
  quiet?: boolean;
  flushMs?: number;
  session?: Session;
  stderr?: Writable;
}

const LIMIT_KEYS = [
  'maxPageBytes',
  'channelChars',
  'entryChars',
  'toolInputChars',
  'promptChars',
  'summaryChars',
  'ticksPerChannel',
] as const;

/**
 * Report sink: records pass through unchanged. With `serve` it keeps a live report of the
 * records and serves it (the page and its event stream) while the run goes; with `html`
 * it writes OUT/report.html from the output folder when the run ends, stalls or is
 * interrupted. List it after the files sink, whose index.json the static report reads.
 */
export function createReportSink(options: ReportSinkOptions): Transform {
  const opts = withDefaults(REPORT_SINK_DEFAULTS, options);
  if (opts.html && !opts.out)
    throw new UsageError('ERR_CONFIG', 'report: html needs out, the output folder the files sink writes');
  const address = opts.serve === undefined ? null : parseServe(opts.serve);
  const limits: Partial<ReportLimits> = {};
  for (const k of LIMIT_KEYS) if (options[k] !== undefined) limits[k] = options[k];
  const stderr = options.stderr ?? process.stderr;
  if (address && !isLoopback(address.host)) {
    const message =
      `the live report on ${address.host} shows the transcripts to every machine that can reach ` +
      `this one; without a host --serve listens on ${SERVE_DEFAULT_HOST} only`;
    if (options.session) options.session.warn('SERVE_EXPOSED', message);
    else stderr.write(`subtee: warning SERVE_EXPOSED: ${message}\n`);
  }
  const feed = address ? new ReportFeed() : null;
  const live = feed ? new LiveReport(feed, options.session, subteeVersion(), limits) : null;
  let server: Promise<ReportServer | null> = Promise.resolve(null);
  let timer: NodeJS.Timeout | null = null;
  let finished = false;

  const finish = () => {
    if (finished) return;
    finished = true;
    if (timer) clearTimeout(timer);
    live?.flush();
    feed?.end();
    if (opts.html) {
      const r = writeReport(opts.out!, { ...limits, channelReader: channelReaderFor });
      if (!opts.quiet) stderr.write(reportLine(r));
    }
  };
  const closeServer = () => server.then((s) => s?.close()).catch(() => undefined);

  const sink = new Transform({
    objectMode: true,
    highWaterMark: BATCH_HIGH_WATER_MARK,
    transform(batch: RecordBatch, _enc, cb: TransformCallback) {
      if (live) {
        live.observe(batch);
        timer ??= setTimeout(() => {
          timer = null;
          live.flush();
        }, opts.flushMs);
      }
      cb(null, batch);
    },
    flush(cb: TransformCallback) {
      try {
        finish();
      } catch (err) {
        return void closeServer().then(() => cb(err as Error));
      }
      void closeServer().then(() => cb());
    },
    destroy(err, cb) {
      // Stalled, interrupted or failed: the live page hears the end and the report is still
      // written from what reached the files (the files sink, earlier in the chain, has
      // already written index.json by now).
      try {
        finish();
      } catch {
        // The original error is the one to report.
      }
      void closeServer().then(() => cb(err));
    },
  });

  if (address && live && feed) {
    // node:http is loaded only by runs that serve.
    server = import('./report-server.js')
      .then(({ startReportServer }) =>
        startReportServer({ ...address, feed, page: () => pageHtml(live.skeleton()) }),
      )
      .then(
        (s) => {
          stderr.write(`subtee: live report at ${s.url}\n`);
          return s;
        },
        (err) => {
          sink.destroy(err);
          return null;
        },
      );
  }
  return sink;
}

/** Where `--serve` binds unless a host is given: only this machine can connect. */
export const SERVE_DEFAULT_HOST = '127.0.0.1';

/** Whether only this machine can connect to `host`. */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** `--serve [HOST:]PORT`: `8080`, `0` (any free port), `127.0.0.1:8080`, `[::1]:0`, `0.0.0.0:8080`. */
export function parseServe(value: string): ServeAddress {
  const m = /^(?:(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):)?(\d{1,5})$/.exec(value);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port > 65535)
    throw new UsageError(
      'ERR_BAD_OPTION',
      `--serve must be [HOST:]PORT with PORT 0-65535 (0: any free port), not "${value}"`,
    );
  const host = m[1] === undefined ? SERVE_DEFAULT_HOST : m[1].replace(/^\[(.*)\]$/, '$1');
  return { host, port };
}

/** The report's limits a config sets; the others are the page's own. */
type ReportPluginOptions = Omit<
  ReportSinkOptions,
  'session' | 'stderr' | 'flushMs' | Exclude<keyof ReportLimits, 'maxPageBytes' | 'channelChars'>
>;

export const reportSinkPlugin = definePlugin<ReportPluginOptions>({
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
      description: '[HOST:]PORT to serve the live report on (host 127.0.0.1 unless given; port 0 picks one)',
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
      description: 'largest page; transcripts are cut to fit',
    },
    channelChars: {
      type: 'integer',
      min: 0,
      default: REPORT_DEFAULTS.channelChars,
      description: 'transcript characters per agent at most',
    },
  },
  create: (o, ctx) => createReportSink({ ...o, session: ctx.session, stderr: ctx.stderr }),
});
