import type { Transform } from 'node:stream';
import { isProtocolEvent, LangGraphMapper, LANGGRAPH_DEFAULTS } from '../../adapters/langgraph.js';
import type { JsonObject } from '../../model/message.js';
import type { LineRecord, RecordBatch } from '../../model/record.js';
import { requireSession, type Producer, type Session } from '../../model/session.js';
import { createBatchTransform } from '../batch-transform.js';
import { BUILTIN_KIT, definePlugin } from '../plugin.js';

export const INPUT_FORMATS = ['auto', 'claude', 'langgraph'] as const;
export type InputFormat = (typeof INPUT_FORMATS)[number];

export const INPUT_FORMAT_DEFAULTS = Object.freeze({
  format: 'auto' as InputFormat,
  spawnTools: LANGGRAPH_DEFAULTS.spawnTools,
});

export interface InputFormatOptions {
  /** `auto` decides from the first JSON object line. */
  format?: InputFormat;
  /** LangGraph: the tools whose calls start subagents (Deep Agents' `task`). */
  spawnTools?: readonly string[];
  /** The chain's session, shared by every stage (required). */
  session: Session;
}

/**
 * Who wrote a line: a LangGraph protocol event (`method` and `params.namespace`), or
 * anything else, read as Claude Code stream-json (the Agent SDK's messages are the same).
 */
export function detectProducer(value: JsonObject): Producer {
  return isProtocolEvent(value) ? 'langgraph' : 'claude';
}

/**
 * Input format: record batches in, record batches out. Claude Code stream-json passes
 * through untouched. LangGraph protocol events become stream-json-shaped lines (see
 * `LangGraphMapper`), each with its own JSON text as `raw` and the line number of the event
 * it came from; events that carry nothing a transcript shows (checkpoints, state values)
 * become no line. What was decided is `session.producer` (`producer` in index.json).
 */
export function createInputFormat(options: InputFormatOptions): Transform {
  const format = options.format ?? INPUT_FORMAT_DEFAULTS.format;
  const run = requireSession(options, 'createInputFormat');
  const mapper = new LangGraphMapper({
    spawnTools: options.spawnTools ?? INPUT_FORMAT_DEFAULTS.spawnTools,
    onWarning: (code, message) => run.warn(code, message),
  });
  if (format !== 'auto') run.producer = format;
  let lastLineNo = 0;
  const toRecords = (values: JsonObject[], lineNo: number, out: RecordBatch) => {
    for (const value of values)
      out.push({ kind: 'line', lineNo, raw: Buffer.from(JSON.stringify(value)), value } satisfies LineRecord);
  };
  return createBatchTransform({
    transformBatch(batch: RecordBatch) {
      if (run.producer === null) {
        const first = batch.find((rec) => rec.kind === 'line');
        if (first?.kind === 'line') run.producer = detectProducer(first.value);
      }
      if (run.producer !== 'langgraph') return batch;
      const out: RecordBatch = [];
      for (const rec of batch) {
        lastLineNo = rec.lineNo;
        // Quarantined bytes, and objects that are not protocol events, go on as they are.
        if (rec.kind !== 'line' || !isProtocolEvent(rec.value)) out.push(rec);
        else toRecords(mapper.map(rec.value), rec.lineNo, out);
      }
      return out.length > 0 ? out : undefined;
    },
    flushAtEnd() {
      const out: RecordBatch = [];
      if (run.producer === 'langgraph') toRecords(mapper.end(), lastLineNo, out);
      return out.length > 0 ? out : undefined;
    },
  });
}

export const inputFormatPlugin = definePlugin<Omit<InputFormatOptions, 'session'>>({
  name: 'input-format',
  kind: 'stage',
  kit: BUILTIN_KIT,
  options: {
    format: {
      type: 'string',
      choices: INPUT_FORMATS,
      default: INPUT_FORMAT_DEFAULTS.format,
      description:
        'claude (stream-json, Agent SDK messages), langgraph (protocol events), or auto: decided from the first line',
    },
    spawnTools: {
      type: 'array',
      default: INPUT_FORMAT_DEFAULTS.spawnTools,
      description: 'langgraph: tools whose calls start subagents',
    },
  },
  create: (o, ctx) => createInputFormat({ ...o, session: ctx.session }),
});
