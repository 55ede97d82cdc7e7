// subtee/sinks: the built-in sinks' factories, their defaults and option types.
export { type SinkRun } from '../model/session.js';
export {
  createFilesSink,
  FILES_SINK_DEFAULTS,
  type FilesSinkOptions,
} from '../chain/sinks/files.js';
export {
  createStdoutSink,
  STDOUT_MODES,
  STDOUT_SINK_DEFAULTS,
  type StdoutSinkOptions,
  type StdoutMode,
} from '../chain/sinks/stdout.js';
export { createPinoSink, PINO_SINK_DEFAULTS, type PinoSinkOptions } from '../chain/sinks/pino.js';
export { type ProjectionSinkOptions } from '../chain/sinks/projection.js';
export { createOtlpSink, OTLP_SINK_DEFAULTS, type OtlpSinkOptions } from '../chain/sinks/otlp.js';
export {
  createClickHouseSink,
  CLICKHOUSE_SINK_DEFAULTS,
  type ClickHouseSinkOptions,
} from '../chain/sinks/clickhouse.js';
export {
  createReportSink,
  REPORT_SINK_DEFAULTS,
  type ReportSinkOptions,
} from '../chain/sinks/report.js';
