import { headOf, tailOf } from '../../model/bounded-text.js';
import type { Transform } from 'node:stream';
import { withDefaults } from '../../defaults.js';
import type { LineRecord, RecordBatch } from '../../model/record.js';
import { requireSession, type Session } from '../../model/session.js';
import { asBlock, lineTypeOf, rawBlocks } from '../../model/message.js';
import type { Channel } from '../../model/tree.js';
import { viewOf } from '../../model/line-view.js';
import { isText, type LazyText } from '../../model/scan.js';
import { createBatchTransform } from '../batch-transform.js';
import { BUILTIN_KIT, defineBuiltin } from '../plugin.js';

export const THINKING_MODES = ['keep', 'truncate', 'drop', 'file'] as const;
export type ThinkingMode = (typeof THINKING_MODES)[number];

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

/** Head and tail of a long text with a marker saying how much was cut; short text unchanged. */
export function truncateMiddle(text: string | LazyText, maxChars: number): { text: string; cut: number } {
  if (text.length <= maxChars) return { text: text.toString(), cut: 0 };
  const head = headOf(text, Math.ceil(maxChars * 0.7));
  const tail = tailOf(text, maxChars - Math.ceil(maxChars * 0.7));
  const cut = text.length - head.length - tail.length;
  return { text: `${head} […${cut} chars cut…] ${tail}`, cut };
}

/**
 * Thinking truncator: records in, the same records out (object mode), with `display` set for
 * thinking blocks so readable sinks show the kept part. The raw line is never changed, so
 * `.jsonl` files keep everything. In `file` mode the full text is attached as `thinkingFull`
 * for the files sink to write to `<channel>.thinking.log`. Kept/cut character counts per
 * channel go into index.json as `thinking: { kept_chars, cut_chars }`.
 */
export function createThinkingTruncator(options: ThinkingTruncatorOptions): Transform {
  const opts = withDefaults(THINKING_TRUNCATOR_DEFAULTS, options);
  const run = requireSession(options, 'createThinkingTruncator');
  const stats = new Map<Channel | null, { kept_chars: number; cut_chars: number }>();
  run.channelFields.push((ch) => ({ thinking: stats.get(ch) ?? { kept_chars: 0, cut_chars: 0 } }));
  return createBatchTransform({
    transformBatch(batch: RecordBatch) {
      for (const rec of batch) {
        if (rec.kind !== 'line') continue;
        try {
          if (lineTypeOf(viewOf(rec)) === 'assistant') shorten(rec);
        } catch (err) {
          run.recordFailed('thinking-truncator', rec.lineNo, err);
        }
      }
      return batch;
    },
  });

  function shorten(rec: LineRecord): void {
    const blocks = rawBlocks(viewOf(rec));
    for (let i = 0; i < blocks.length; i++) {
      const b = asBlock(blocks[i]);
      if (b?.type !== 'thinking' || !isText(b.thinking)) continue;
      const key = rec.channel ?? null;
      let s = stats.get(key);
      if (!s) stats.set(key, (s = { kept_chars: 0, cut_chars: 0 }));
      const full: string | LazyText = b.thinking;
      rec.display ??= new Map();
      if (opts.mode === 'keep') {
        s.kept_chars += full.length;
      } else if (opts.mode === 'drop') {
        s.cut_chars += full.length;
        rec.display.set(i, null);
      } else if (opts.mode === 'file') {
        s.cut_chars += full.length;
        (rec.thinkingFull ??= []).push(full.toString());
        rec.display.set(i, `(${full.length} chars, in the .thinking.log beside this transcript)`);
      } else {
        const t = truncateMiddle(full, opts.maxChars);
        s.kept_chars += full.length - t.cut;
        s.cut_chars += t.cut;
        rec.display.set(i, t.text);
      }
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
