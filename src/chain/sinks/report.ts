import type { Transform, Writable } from 'node:stream';
import { withDefaults } from '../../defaults.js';
import { UsageError } from '../../errors.js';
import { isLoopback } from '../../loopback.js';
import type { RecordBatch } from '../../model/record.js';
import type { SinkRun } from '../../model/session.js';
import { reportLine, subteeVersion } from '../../views/report/build.js';
import { channelReaderFor, runReaderFor } from '../stages/input-format.js';
import { LiveReport, ReportFeed } from '../../views/report/live.js';
import type { ReportLimits } from '../../views/report/model.js';
import { pageHtml } from '../../views/report/page.js';
import { BatchTransform, type BatchOutcome } from '../batch-transform.js';
import {
  parseServe,
  REPORT_SINK_DEFAULTS,
  reportOptionsProblem,
  SERVE_DEFAULT_HOST,
  type ReportSinkOptions,
} from './report-options.js';
import { writeReport } from './report-file.js';
import type { ReportServer, ServeAddress } from './report-server.js';


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
 * interrupted. List it after the files sink, whose index.json the static report reads: in a
 * chain it waits for it (`indexWritten`), which the files sink writes once the other sinks
 * after it have ended.
 */
export function createReportSink(options: ReportSinkOptions): Transform {
  return new ReportSink(options);
}

class ReportSink extends BatchTransform {
  readonly #opts: typeof REPORT_SINK_DEFAULTS & ReportSinkOptions;
  readonly #limits: Partial<ReportLimits> = {};
  readonly #stderr: Writable;
  readonly #feed: ReportFeed | null;
  readonly #live: LiveReport | null;
  #server: Promise<ReportServer | null> = Promise.resolve(null);
  #timer: NodeJS.Timeout | null = null;
  #finished = false;

  constructor(options: ReportSinkOptions) {
    super();
    const opts = withDefaults(REPORT_SINK_DEFAULTS, options);
    const problem = reportOptionsProblem(opts);
    if (problem !== null) throw new UsageError('ERR_CONFIG', `report: ${problem}`);
    this.#opts = opts;
    const address = opts.serve === undefined ? null : parseServe(opts.serve);
    for (const k of LIMIT_KEYS) if (options[k] !== undefined) this.#limits[k] = options[k];
    this.#stderr = options.stderr ?? process.stderr;
    if (address && !isLoopback(address.host)) this.#warnExposed(address.host);
    this.#feed = address ? new ReportFeed() : null;
    this.#live = this.#feed
      ? new LiveReport(
          this.#feed,
          options.session,
          subteeVersion(),
          this.#limits,
          opts.out !== undefined,
        )
      : null;
    if (address && this.#live && this.#feed) this.#serve(address, this.#live, this.#feed);
  }

  protected override transformBatch(batch: RecordBatch): BatchOutcome {
    const live = this.#live;
    if (live) {
      live.observe(batch);
      this.#timer ??= setTimeout(() => {
        this.#timer = null;
        live.flush();
      }, this.#opts.flushMs);
    }
    return batch;
  }

  protected override flushAtEnd(): BatchOutcome {
    const indexWritten = this.#opts.html ? this.#opts.indexWritten : undefined;
    if (indexWritten === undefined) return this.#end();
    // The page is built from the folder once its index.json is written; the sinks after this
    // one end meanwhile (the files sink waits for them).
    this.endOutput();
    return Promise.resolve(indexWritten).then(() => this.#end());
  }

  #end(): BatchOutcome {
    try {
      this.#finish();
    } catch (err) {
      return this.#closeServer().then(() => Promise.reject(err));
    }
    return this.#closeServer();
  }

  protected override teardown(): PromiseLike<void> {
    // Stalled, interrupted or failed: the live page hears the end and the report is still
    // written from what reached the files (the files sink, earlier in the chain, has
    // already written index.json by now).
    try {
      this.#finish();
    } catch {
      // The original error is the one to report.
    }
    return this.#closeServer();
  }

  #warnExposed(host: string): void {
    const message =
      `the live report on ${host} shows the transcripts to every machine that can reach ` +
      `this one; without a host --serve listens on ${SERVE_DEFAULT_HOST} only`;
    if (this.#opts.session) this.#opts.session.warn('SERVE_EXPOSED', message);
    else this.#stderr.write(`subtee: warning SERVE_EXPOSED: ${message}\n`);
  }

  #serve(address: ServeAddress, live: LiveReport, feed: ReportFeed): void {
    // node:http is loaded only by runs that serve.
    this.#server = import('./report-server.js')
      .then(({ startReportServer }) =>
        startReportServer({ ...address, feed, page: () => pageHtml(live.skeleton()) }),
      )
      .then(
        (server) => {
          this.#stderr.write(`subtee: live report at ${server.url}\n`);
          return server;
        },
        (err) => {
          this.destroy(err);
          return null;
        },
      );
  }

  #finish(): void {
    if (this.#finished) return;
    this.#finished = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#live?.flush(true);
    this.#feed?.end();
    if (this.#opts.html) {
      // The run's policy; without a session, the one index.json records.
      const display = this.#opts.session?.display;
      const options = { ...this.#limits, channelReader: channelReaderFor, runReader: runReaderFor, display };
      const report = writeReport(this.#opts.out!, options);
      if (!this.#opts.quiet) this.#stderr.write(reportLine(report));
    }
  }

  #closeServer(): Promise<void> {
    return this.#server
      .then((server) => server?.close())
      .then(
        () => undefined,
        () => undefined,
      );
  }
}

export {
  parseServe,
  REPORT_SINK_DEFAULTS,
  SERVE_DEFAULT_HOST,
  type ReportSinkOptions,
} from './report-options.js';
