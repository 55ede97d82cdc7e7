import type { ChainSpec } from '../chain/chain.js';
import { parseServe } from '../chain/sinks/report-options.js';
import { UsageError } from '../errors.js';
import type { ParsedOptions } from './options.js';

/**
 * `--html` and `--serve` add the report sink (or set options of one a config lists), after
 * every other sink, reading the files sink's folder: the static report is a view over it.
 */
export function applyReportFlags(spec: ChainSpec, o: ParsedOptions): ChainSpec {
  const html = o.html === true;
  const serve = typeof o.serve === 'string' ? o.serve : undefined;
  let sink = spec.sinks.find((s) => s.use === 'report');
  if (!sink && !html && serve === undefined) return spec;
  if (!sink) {
    sink = { use: 'report' };
    spec.sinks.push(sink);
  }
  if (html) sink.html = true;
  if (serve !== undefined) {
    parseServe(serve);
    sink.serve = serve;
  }
  if (o.quiet === true && sink.quiet === undefined) sink.quiet = true;
  const files = spec.sinks.find((s) => s.use === 'files');
  if (sink.out === undefined && typeof files?.out === 'string') sink.out = files.out;
  if (sink.html === true && sink.out === undefined)
    throw new UsageError(
      'ERR_CONFIG',
      '--html needs the files sink (--out): the report is built from its folder',
    );
  return spec;
}
