import type { LazyText } from './scan.js';

/*
 * Every cut subtee makes in text it shows or sends goes through these, so that no cut ever
 * splits a surrogate pair: half a pair is not text, and an encoder turns it into U+FFFD or
 * refuses the whole value. Shown text is cut by the one cutter built on them (`cutText` in
 * display.ts); `boundedText` only caps names the run model keeps (agent types, tool targets).
 */

const isHigh = (code: number) => code >= 0xd800 && code <= 0xdbff;
const isLow = (code: number) => code >= 0xdc00 && code <= 0xdfff;

/** The first `max` UTF-16 units of `text`, one fewer when the cut would fall inside a pair. */
export function headOf(text: string | LazyText, max: number): string {
  if (max <= 0) return '';
  if (text.length <= max) return text.toString();
  const head = text.slice(0, max).toString();
  return isHigh(head.charCodeAt(head.length - 1)) ? head.slice(0, -1) : head;
}

/** The last `max` UTF-16 units of `text`, one fewer when the cut would fall inside a pair. */
export function tailOf(text: string | LazyText, max: number): string {
  if (max <= 0) return '';
  if (text.length <= max) return text.toString();
  const tail = text.slice(text.length - max).toString();
  return isLow(tail.charCodeAt(0)) ? tail.slice(1) : tail;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** `s` with each lone half of a surrogate pair replaced by U+FFFD: well-formed for any encoder. */
export const mendSurrogates = (s: string): string => s.replace(LONE_SURROGATE, '\uFFFD');

/**
 * At most `max` UTF-16 units of `s` (plus a `…` when cut), never ending inside a surrogate
 * pair and with lone surrogates replaced, so a database or protocol encoder always gets
 * well-formed UTF-8.
 */
export function boundedText(s: string, max: number): string {
  if (max <= 0) return '';
  const out = s.length > max ? `${headOf(s, max)}…` : s;
  return mendSurrogates(out);
}
