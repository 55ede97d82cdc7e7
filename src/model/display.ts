import { headOf, mendSurrogates, tailOf } from './bounded-text.js';
import type { LazyText } from './scan.js';

export const THINKING_MODES = ['keep', 'truncate', 'drop', 'file'] as const;
export type ThinkingMode = (typeof THINKING_MODES)[number];

/**
 * How every view shows what a run said: the `.log` transcripts, stdout, pino, ClickHouse,
 * OTLP, the report (its page and the live one) and the projection's messages. Built once
 * from the options (`displayPolicy`) and handed to each; the `.jsonl` files keep the bytes.
 * How long shown text may be is the other half of the policy: CUT_LENGTHS, by class, cut by
 * `cutText` with the one marker.
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

/**
 * How a class of shown text is cut: `both` keeps `chars` of it, its head (about 70 %) and
 * tail, around the marker; `head` keeps its head and ends with the marker, the whole within
 * `chars`; `width` fits its head and a bare `…` within `chars` columns (a label has no room
 * for a count, nor has a `head` cut to fewer characters than its marker). A text cut as `head`
 * or `width` fits its class, so it is never cut twice; a length of 0 shows nothing.
 */
export type CutKeep = 'both' | 'head' | 'width';

/**
 * The lengths every view cuts shown text to, by class, in UTF-16 units. A view picks a class;
 * a length a user or a table sets (pino's and ClickHouse's `maxContentChars`, the report's
 * page limits, a column's width) may replace the class's `chars`, never its shape or marker.
 */
export const CUT_LENGTHS = Object.freeze({
  /** A subagent's label on stdout and in the end-of-run summary; short names in the report. */
  label: Object.freeze({ chars: 24, keep: 'width' as CutKeep }),
  /** A one-line preview: a tool call's input in `.log`, a long line's start, a pino headline, an id. */
  preview: Object.freeze({ chars: 200, keep: 'head' as CutKeep }),
  /** A field value in `.log` and on stdout: a prompt, a tool result, a status summary. */
  field: Object.freeze({ chars: 500, keep: 'both' as CutKeep }),
  /** A tool call's input in the report. */
  input: Object.freeze({ chars: 1000, keep: 'both' as CutKeep }),
  /** A thinking block under `--thinking truncate` (`--thinking-max-chars`). */
  thinking: Object.freeze({ chars: 2000, keep: 'both' as CutKeep }),
  /** A block of text: one transcript entry or prompt in the report, an OTLP content attribute. */
  block: Object.freeze({ chars: 4000, keep: 'both' as CutKeep }),
  /** A subagent's final report in the report. */
  summary: Object.freeze({ chars: 8000, keep: 'both' as CutKeep }),
  /** Content of a pino event (`maxContentChars`). */
  content: Object.freeze({ chars: 20_000, keep: 'both' as CutKeep }),
  /** A value stored in a database column or sent as a protocol attribute (ClickHouse, OTLP names). */
  stored: Object.freeze({ chars: 256, keep: 'head' as CutKeep }),
});

export type CutClass = keyof typeof CUT_LENGTHS;

/** What a view shows without a policy given: thinking whole. */
export const DISPLAY_DEFAULTS: DisplayPolicy = Object.freeze({
  thinking: 'keep',
  thinkingChars: CUT_LENGTHS.thinking.chars,
});

/** The one policy of a run, frozen, from its options (missing ones from DISPLAY_DEFAULTS). */
export function displayPolicy(options: Partial<DisplayPolicy> = {}): DisplayPolicy {
  return Object.freeze({
    thinking: options.thinking ?? DISPLAY_DEFAULTS.thinking,
    thinkingChars: options.thinkingChars ?? DISPLAY_DEFAULTS.thinkingChars,
  });
}

/**
 * The one marker where text was cut: how many characters were left out, or only that some
 * were when the rest was never read (`null`).
 */
export const cutMarker = (chars: number | null): string =>
  chars === null ? '[…cut…]' : `[…${chars} chars cut…]`;

/**
 * The one cutter for shown text: `text` cut to its class's length (or `chars`) in its class's
 * shape around the one marker; text that fits comes back whole. `whole` is the length of the
 * text `text` is the start of, when only its start was read (null: never measured, and the
 * marker has no count); such a start is cut at its head. No cut splits a surrogate pair;
 * escaping for the place it is shown comes after. `cut` is how many characters were left out
 * (of what was read, when `whole` is null).
 */
export function cutText(
  text: string | LazyText,
  cls: CutClass,
  chars: number = CUT_LENGTHS[cls].chars,
  whole: number | null = text.length,
): { text: string; cut: number } {
  if ((whole ?? Infinity) <= chars) return { text: text.toString(), cut: 0 };
  const keep = CUT_LENGTHS[cls].keep;
  const length = whole ?? text.length;
  if (chars <= 0) return { text: '', cut: length };
  const counted = cutMarker(whole === null ? null : length).length;
  // Only a text read whole has a tail to keep.
  const atHead = keep === 'head' || whole !== text.length;
  // Where the counted marker leaves no room, the bare `…` stands for it.
  if (keep === 'width' || (atHead && chars < counted + 2)) {
    const head = headOf(text, chars - 1).trimEnd();
    return { text: `${head}…`, cut: length - head.length };
  }
  if (atHead) {
    // The marker fits in `chars` too (sized for the most it could count), so a cut text is
    // never cut again.
    const head = headOf(text, chars - 1 - counted);
    const marker = cutMarker(whole === null ? null : length - head.length);
    return { text: `${head} ${marker}`, cut: length - head.length };
  }
  const head = headOf(text, Math.ceil(chars * 0.7));
  const tail = tailOf(text, chars - Math.ceil(chars * 0.7));
  const cut = length - head.length - tail.length;
  return { text: `${head} ${cutMarker(cut)} ${tail}`, cut };
}

/**
 * A value for a database column or a protocol attribute (ClickHouse, OTLP): `cutText`, with
 * lone halves of surrogate pairs the input held mended, so the encoder gets well-formed UTF-8.
 */
export function storedText(text: string, cls: CutClass, chars?: number, whole?: number | null): string {
  return mendSurrogates(cutText(text, cls, chars, whole).text);
}

/** A thinking block cut as `--thinking truncate` cuts it: `cutText` in the thinking class. */
export const truncateMiddle = (text: string | LazyText, maxChars: number): { text: string; cut: number } =>
  cutText(text, 'thinking', maxChars);

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
      const text = `(${full.length} chars, in the .thinking.log beside this transcript)`;
      return { text, cut: full.length };
    default:
      return truncateMiddle(full, policy.thinkingChars);
  }
}

/** Characters of thinking one channel's views kept and cut under the run's policy. */
export interface ThinkingShown {
  kept_chars: number;
  cut_chars: number;
}

/**
 * Per channel, how much thinking the run's display policy kept and cut (index.json's
 * `thinking`). Counts nothing until a policy is stated (`countWith`, by the thinking
 * truncator, whose options are the policy); a run without one has no such field.
 */
export class ThinkingCounts {
  #policy: DisplayPolicy | null = null;
  readonly #byChannel = new Map<string | null, ThinkingShown>();

  /** The policy counted against, or null while none is stated. */
  get policy(): DisplayPolicy | null {
    return this.#policy;
  }

  countWith(policy: DisplayPolicy): void {
    this.#policy = policy;
  }

  /** One thinking block of a channel, as the policy shows it. */
  add(channel: string | null, thinking: string | LazyText): void {
    if (this.#policy === null) return;
    let s = this.#byChannel.get(channel);
    if (!s) this.#byChannel.set(channel, (s = { kept_chars: 0, cut_chars: 0 }));
    const { cut } = shownThinking(this.#policy, thinking);
    s.kept_chars += thinking.length - cut;
    s.cut_chars += cut;
  }

  /** A channel's counts (a copy): zeros for a channel with no thinking. */
  of(channel: string | null): ThinkingShown {
    const s = this.#byChannel.get(channel);
    return s ? { ...s } : { kept_chars: 0, cut_chars: 0 };
  }
}
