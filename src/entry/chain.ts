// subtee/chain: building and running chains, configs and the registry, the session, and the
// shell subtee's own stages and sinks are built on.
export {
  buildChain,
  runChain,
  defaultSpec,
  DEFAULT_STAGES,
  type ChainSpec,
  type ComponentSpec,
  type ChainOptions,
} from '../chain/chain.js';
export { readConfig, registerPlugins } from '../chain/config.js';
export { configSchema } from '../chain/schema.js';
export { loadPlugin, Registry } from '../chain/plugin.js';
export { builtinRegistry } from '../chain/builtins.js';
export { Session, requireSession } from '../model/session.js';
export { BATCH_HIGH_WATER_MARK, type RecordBatch } from '../model/record.js';
export { passOn } from '../chain/sinks/pass-on.js';
export {
  BatchTransform,
  createBatchTransform,
  type BatchTransformHooks,
  type BatchTransformOptions,
  type BatchOutcome,
  type HandOn,
} from '../chain/batch-transform.js';
export { LineSpool } from '../chain/stages/line-spool.js';

import { supplyBuiltinCode } from '../chain/builtins.js';
import * as clickhouse from '../chain/sinks/clickhouse.js';
import * as otlp from '../chain/sinks/otlp.js';
import * as pino from '../chain/sinks/pino.js';
import * as report from '../chain/sinks/report.js';

// buildChain cannot wait for a sink's code: a program gets every built-in's with this entry,
// imported statically (no top-level await, so `require('subtee/chain')` works too); the
// command line imports only the sinks a run names.
supplyBuiltinCode({ pino, otlp, clickhouse, report });
