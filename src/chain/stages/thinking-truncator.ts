import type { Transform } from 'node:stream';
import { withDefaults } from '../../defaults.js';
import type { LineRecord, RecordBatch } from '../../model/record.js';
import { requireSession, type Session } from '../../model/session.js';
import { asBlock, lineTypeOf, rawBlocks } from '../../model/message.js';
import { viewOf } from '../../model/line-view.js';
import { isText } from '../../model/scan.js';
import { displayPolicy, THINKING_MODES, type ThinkingMode } from '../../model/display.js';
import { createBatchTransform } from '../batch-transform.js';
import { BUILTIN_KIT, defineBuiltin } from '../plugin.js';

export { THINKING_MODES, truncateMiddle, type ThinkingMode } from '../../model/display.js';

export const THINKING_TRUNCATOR_DEFAULTS = Object.freeze({
  mode: 'truncate' as ThinkingMode,
  /** Characters kept in the transcript per thinking block in `truncate` mode (head + tail). */
  maxChars: 2000,
});

export interface ThinkingTruncatorOptions {
  mode?: ThinkingMode;
  maxChars?: number;
  /** The chain's session, shared by every stage (required). */
  session: Session;
}

/**
 * Thinking truncator: records in, the same records out, untouched. Its options are the
 * run's display policy for thinking: the stage states them to the session (`stateDisplay`),
 * where every view reads them (the `.log`, pino, ClickHouse, the report, the projection,
 * `index.json`'s `display`), and counts each thinking block of a channel under them, into
 * index.json as `thinking: { kept_chars, cut_chars }`.
 * The raw line is never changed, so `.jsonl` files keep everything.
 */
export function createThinkingTruncator(options: ThinkingTruncatorOptions): Transform {
  const opts = withDefaults(THINKING_TRUNCATOR_DEFAULTS, options);
  const run = requireSession(options, 'createThinkingTruncator');
  run.stateDisplay(displayPolicy({ thinking: opts.mode, thinkingChars: opts.maxChars }));
  run.thinking.countWith(run.display);
  return createBatchTransform({
    transformBatch(batch: RecordBatch) {
      for (const rec of batch) {
        if (rec.kind !== 'line') continue;
        try {
          const type = lineTypeOf(viewOf(rec));
          if (type === 'assistant' || type === 'user') count(rec);
        } catch (err) {
          run.recordFailed('thinking-truncator', rec.lineNo, err);
        }
      }
      return batch;
    },
  });

  function count(rec: LineRecord): void {
    for (const raw of rawBlocks(viewOf(rec))) {
      const b = asBlock(raw);
      if (b?.type !== 'thinking' || !isText(b.thinking)) continue;
      run.thinking.add(rec.channel?.id ?? null, b.thinking);
    }
  }
}

export const thinkingTruncatorPlugin = defineBuiltin<Omit<ThinkingTruncatorOptions, 'session'>>({
  name: 'thinking-truncator',
  kind: 'stage',
  kit: BUILTIN_KIT,
  options: {
    mode: {
      type: 'string',
      choices: THINKING_MODES,
      default: THINKING_TRUNCATOR_DEFAULTS.mode,
      description:
        'thinking in transcripts: keep, truncate, drop, or file (full text in <channel>.thinking.log)',
    },
    maxChars: {
      type: 'integer',
      min: 0,
      default: THINKING_TRUNCATOR_DEFAULTS.maxChars,
      description: 'characters of each thinking block kept in truncate mode',
    },
  },
  create: (o, ctx) => createThinkingTruncator({ ...o, session: ctx.session }),
});
