import { Transform, type TransformCallback } from 'node:stream';
import { once } from 'node:events';
import pino, { type Logger } from 'pino';
import { withDefaults } from '../../defaults.js';
import { writeFailed } from '../../errors.js';
import { BATCH_HIGH_WATER_MARK, type LineRecord, type RecordBatch } from '../../model/record.js';
import { shorten } from '../../views/escape.js';
import { inputPreview, shownBlocks } from '../../views/text.js';
import { resultText } from '../../model/message.js';
import { passOn } from './pass-on.js';
import { openLogFile } from './safe-open.js';
import { requireSession, type Session } from '../../model/session.js';
import type { ChannelSnapshot } from '../../model/tree.js';

export const PINO_SINK_DEFAULTS = Object.freeze({
  /** A file path, or `-` for stdout. Ignored when `transport` is set. */
  destination: '-',
  /** Longest content logged per event, in characters. */
  maxContentChars: 20_000,
});

export interface PinoSinkOptions {
  destination?: string;
  /** Any pino transport config (`{ target, options }`, `{ targets }` or `{ pipeline }`). */
  transport?: Record<string, unknown>;
  maxContentChars?: number;
  /** The chain's session, shared by every stage (required). */
  session: Session;
}

type Kind = 'text' | 'thinking' | 'tool_use' | 'tool_result' | 'status' | 'warning' | 'quarantine';

function where(ch: ChannelSnapshot | undefined) {
  return { channel: ch?.id ?? 'main', parent: ch?.parent ?? null, depth: ch?.depth ?? 0, agent: ch?.id ? ch.agent : null };
}

/** The pino events of one line record: one per content block, plus tree changes. */
export function pinoEvents(rec: LineRecord, maxChars: number): Array<{ level: 'info' | 'warn' | 'error'; kind: Kind; fields: Record<string, unknown> }> {
  const out: ReturnType<typeof pinoEvents> = [];
  const ch = rec.channel;
  const v = rec.value;
  if (v.type === 'assistant' || v.type === 'user') {
    for (const { block: b, override } of shownBlocks(rec)) {
      const content = (text: string) => shorten(text, maxChars);
      if (b.type === 'text') {
        out.push({ level: 'info', kind: 'text', fields: { role: v.type, content: content(b.text) } });
      } else if (b.type === 'thinking') {
        out.push({ level: 'info', kind: 'thinking', fields: { content: content(override ?? b.thinking ?? '') } });
      } else if (b.type === 'tool_use') {
        out.push({ level: 'info', kind: 'tool_use', fields: { tool: b.name, id: b.id, content: inputPreview(b.input, maxChars) } });
      } else if (b.type === 'tool_result') {
        const isError = b.is_error === true;
        out.push({
          level: isError ? 'warn' : 'info',
          kind: 'tool_result',
          fields: { id: b.tool_use_id, is_error: isError, content: content(resultText(b)) },
        });
      }
    }
  }
  for (const ev of rec.events ?? []) {
    if (ev.type !== 'status') continue;
    out.push({ level: ev.channel.status === 'failed' ? 'error' : 'info', kind: 'status', fields: { ...where(ev.channel), status: ev.channel.status, content: ev.summary ?? '' } });
  }
  return out;
}

/**
 * Pino sink: a pass-through stage (object mode) that logs one structured line per routed
 * event. Written through `pino.destination` synchronously: an async destination buffers
 * without bound behind a slow reader, a sync one is the backpressure. Flushed on end and
 * on destroy. With `transport`, any pino transport target receives the events instead.
 */
export function createPinoSink(options: PinoSinkOptions): Transform {
  const opts = withDefaults(PINO_SINK_DEFAULTS, options);
  const run = requireSession(options, 'createPinoSink');
  let dest: ReturnType<typeof pino.destination> | null = null;
  let transport: ReturnType<typeof pino.transport> | null = null;
  if (opts.transport) {
    transport = pino.transport(opts.transport as unknown as Parameters<typeof pino.transport>[0]);
  } else {
    const target = opts.destination === '-' ? 1 : opts.destination;
    try {
      // Opened here, not by pino: no link followed, no blocking on a pipe (see safe-open).
      dest = pino.destination({ dest: target === 1 ? 1 : openLogFile(target), sync: true });
    } catch (err) {
      throw writeFailed(String(opts.destination), err);
    }
  }
  // sonic-boom reports a failed write as an event (and its flushSync then retries forever):
  // stop at the first failure and fail the chain with it.
  let failed: Error | null = null;
  const onFail = (err: unknown) => {
    if (failed) return;
    failed = writeFailed(String(opts.destination), err);
    stream.destroy(failed);
  };
  (dest ?? transport)!.on('error', onFail);
  const logger: Logger = pino({ base: null, timestamp: pino.stdTimeFunctions.isoTime, messageKey: 'msg' }, (transport ?? dest)!);
  const log = (level: 'info' | 'warn' | 'error', kind: Kind, fields: Record<string, unknown>) => logger[level]({ kind, ...fields });
  run.onWarning((w) => log('warn', 'warning', { code: w.code, content: w.message }));

  const close = async () => {
    if (failed) throw failed;
    if (dest) {
      dest.flushSync();
      dest.end();
    } else if (transport) {
      // pino unrefs the transport's worker once it is ready (which may be after this
      // point); hold the process open until the worker has written everything.
      const hold = setInterval(() => {}, 60_000);
      try {
        const closed = once(transport, 'close');
        transport.end();
        await closed;
      } finally {
        clearInterval(hold);
      }
    }
  };

  const stream = new Transform({
    objectMode: true,
    highWaterMark: BATCH_HIGH_WATER_MARK,
    transform(batch: RecordBatch, _enc, cb: TransformCallback) {
      if (failed) return cb(failed);
      try {
        for (const rec of batch) {
          if (rec.kind === 'quarantine') {
            if (rec.final) log('warn', 'quarantine', { channel: null, line: rec.lineNo, reason: rec.reason, content: shorten(rec.raw.subarray(0, opts.maxContentChars * 4).toString('utf8'), opts.maxContentChars) });
          } else {
            const base = where(rec.channel);
            for (const e of pinoEvents(rec, opts.maxContentChars)) log(e.level, e.kind, { ...base, line: rec.lineNo, ...e.fields });
          }
        }
      } catch (err) {
        return cb(writeFailed(String(opts.destination), err));
      }
      cb(null, passOn(stream, batch));
    },
    flush(cb: TransformCallback) {
      close().then(() => cb(), (err) => cb(err instanceof Error && 'code' in err && (err as { code: string }).code === 'ERR_WRITE' ? err : writeFailed(String(opts.destination), err)));
    },
    destroy(err, cb) {
      if (dest && !failed) {
        try {
          dest.flushSync();
        } catch {
          // The original error is the one to report.
        }
      }
      if (failed) dest?.destroy();
      transport?.end();
      cb(err);
    },
  });
  return stream;
}
