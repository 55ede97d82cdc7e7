const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * At most `max` UTF-16 units of `s` (plus a `…` when cut), never ending inside a surrogate
 * pair and with lone surrogates replaced, so a database or protocol encoder always gets
 * well-formed UTF-8.
 */
export function boundedText(s: string, max: number): string {
  if (max <= 0) return '';
  let out = s;
  if (out.length > max) {
    let end = Math.max(0, max);
    const code = out.charCodeAt(end - 1);
    if (code >= 0xd800 && code <= 0xdbff) end--;
    out = `${out.slice(0, end)}…`;
  }
  return out.replace(LONE_SURROGATE, '\uFFFD');
}
