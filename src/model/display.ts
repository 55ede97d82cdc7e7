import { headOf, tailOf } from './bounded-text.js';
import type { LazyText } from './scan.js';

export const THINKING_MODES = ['keep', 'truncate', 'drop', 'file'] as const;
export type ThinkingMode = (typeof THINKING_MODES)[number];

/**
 * How every view shows what a run said: the `.log` transcripts, stdout, pino, ClickHouse,
 * OTLP, the report (its page and the live one) and the projection's messages. Built once
 * from the options (`displayPolicy`) and handed to each; the `.jsonl` files keep the bytes.
 */
export interface DisplayPolicy {
  /**
   * Thinking blocks: `keep` whole, `truncate` to head and tail around the cut marker,
   * `drop` from every view, `file` out of the views (the files sink writes them whole to
   * `<channel>.thinking.log`, and the transcript says so).
   */
  readonly thinking: ThinkingMode;
  /** Characters of a thinking block `truncate` keeps (head and tail). */
  readonly thinkingChars: number;
}

/** What a view shows without a policy given: thinking whole. */
export const DISPLAY_DEFAULTS: DisplayPolicy = Object.freeze({ thinking: 'keep', thinkingChars: 2000 });

/** The one policy of a run, frozen, from its options (missing ones from DISPLAY_DEFAULTS). */
export function displayPolicy(options: Partial<DisplayPolicy> = {}): DisplayPolicy {
  return Object.freeze({
    thinking: options.thinking ?? DISPLAY_DEFAULTS.thinking,
    thinkingChars: options.thinkingChars ?? DISPLAY_DEFAULTS.thinkingChars,
  });
}

/** The one marker where text was cut out of the middle. */
export const cutMarker = (chars: number): string => `[…${chars} chars cut…]`;

/**
 * The one cutter: head and tail of a long text around the cut marker (about 70 % head);
 * short text unchanged. `cut` is how many characters were left out.
 */
export function truncateMiddle(text: string | LazyText, maxChars: number): { text: string; cut: number } {
  if (text.length <= maxChars) return { text: text.toString(), cut: 0 };
  const head = headOf(text, Math.ceil(maxChars * 0.7));
  const tail = tailOf(text, maxChars - Math.ceil(maxChars * 0.7));
  const cut = text.length - head.length - tail.length;
  return { text: `${head} ${cutMarker(cut)} ${tail}`, cut };
}

/**
 * A thinking block as the policy shows it: its text (whole, cut, or the note that it is in
 * the `.thinking.log`), or null when it is not shown at all; `cut` characters left out.
 */
export function shownThinking(
  policy: DisplayPolicy,
  full: string | LazyText,
): { text: string | LazyText | null; cut: number } {
  switch (policy.thinking) {
    case 'keep':
      return { text: full, cut: 0 };
    case 'drop':
      return { text: null, cut: full.length };
    case 'file':
      return { text: `(${full.length} chars, in the .thinking.log beside this transcript)`, cut: full.length };
    default:
      return truncateMiddle(full, policy.thinkingChars);
  }
}
