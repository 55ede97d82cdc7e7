import { Transform, type TransformCallback, type Writable } from 'node:stream';
import { withDefaults } from '../../defaults.js';
import { UsageError } from '../../errors.js';
import { BATCH_HIGH_WATER_MARK, type RecordBatch } from '../../model/record.js';
import type { Session } from '../../model/session.js';
import { reportLine, subteeVersion, writeReport } from './build.js';
import { LiveReport, ReportFeed } from './live.js';
import type { ReportLimits } from './model.js';
import { pageHtml } from './page.js';
import { parseServe } from './flags.js';
import type { ReportServer } from './server.js';

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
      const r = writeReport(opts.out!, limits);
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
    server = import('./server.js')
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
