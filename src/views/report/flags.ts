import type { ChainSpec } from '../../chain/chain.js';
import { UsageError } from '../../errors.js';
import type { ParsedOptions } from '../../chain/options.js';

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

/** Where `--serve` binds unless a host is given: only this machine can connect. */
export const SERVE_DEFAULT_HOST = '127.0.0.1';

export interface ServeAddress {
  host: string;
  port: number;
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
