/**
 * Escaping for every place model text is shown: a terminal, a log file, Markdown, HTML.
 * Written once here so the transcript, the summaries and the report cannot disagree. Text is
 * cut first (the one cutter, `cutText` in model/display.ts), then escaped for where it goes.
 */

// C0 controls except TAB and LF, DEL, C1 controls, U+2028 and U+2029, and the bidi controls
// that can reorder what a reader sees (Trojan Source). CR is escaped too: a raw CR overwrites
// a log line; and so is every character but LF that a viewer may break a line at (VT, FF, NEL,
// the line and paragraph separators), or one line of text could pass for several.
const UNSAFE =
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * Makes model text safe for a terminal or a log viewer: control characters become visible escapes.
 * What a terminal or a log shows goes through escapeLogText (or escapeOneLine, escapeTextLines),
 * which also keep a CI job's log from running it; this alone is for HTML and stored rows.
 */
export function escapeControl(text: string): string {
  return text.replace(UNSAFE, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff
      ? `\\x${code.toString(16).padStart(2, '0')}`
      : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

// What the GitHub Actions runner skips before it looks for a workflow command at a line's start
// (.NET's TrimStart: every Unicode white space), less LF, which ends the line.
const WORKFLOW_COMMAND_LINE =
  /(^|\n)([\t\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*)::/g;

// The runner's older form of a workflow command, `##[add-mask]x`, counts anywhere in a line:
// it looks for the first `##[` and takes the name after it up to a space or `]`.
const HASH_COMMAND = '##[';

/**
 * Text with no `##[` in it, so no older-form workflow command: its second `#` is written `\x23`,
 * the notation of the other escapes. Done after them, and safe so: no other escape writes a `#`
 * or a `[`, and this one leaves none behind (`###[` becomes `##\x23[`).
 */
function escapeHashCommands(text: string): string {
  return text.includes(HASH_COMMAND) ? text.replaceAll(HASH_COMMAND, '#\\x23[') : text;
}

/**
 * Lines of shown text with no GitHub workflow command among them: a line whose first characters
 * but white space are `::` (`::add-mask::x`, `  ::error::x`) has that first colon written as
 * `\x3a`, and a `##[` anywhere has its second `#` written `\x23`, or a job log that shows it
 * would run it. For text after escapeControl (a raw CR would start a line for the runner), whole
 * lines as written: a tag before it (`[thinking] `) already keeps the first line from starting
 * with `::`.
 */
export function escapeWorkflowCommands(lines: string): string {
  // Most text has no `::` at all: one plain search spares it the pattern on every shown line.
  const lineStarts = lines.includes('::') ? lines.replace(WORKFLOW_COMMAND_LINE, '$1$2\\x3a:') : lines;
  return escapeHashCommands(lineStarts);
}

/**
 * Model text as lines of a terminal or a log (stdout, the `.log` files): its control characters
 * escaped, and no line of it a workflow command. `tag` starts the first line (`[thinking] `).
 */
export function escapeTextLines(text: string, tag = ''): string {
  return escapeWorkflowCommands(tag + escapeControl(text));
}

/**
 * Model text for a terminal or a log where each line starts with subtee's own text (a label):
 * escapeControl, and no `##[`, which a job log runs wherever it is in a line.
 */
export function escapeLogText(text: string): string {
  return escapeHashCommands(escapeControl(text));
}

/**
 * What JSON lets stand raw in a string and a terminal or a viewer showing it acts on: DEL, the
 * C1 controls (U+009B is a CSI), the line and paragraph separators U+2028 and U+2029 (a viewer
 * may break the line there) and the bidi controls that reorder what a reader sees.
 */
export const JSON_TERMINAL_UNSAFE =
  /[\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
const JSON_TERMINAL_UNSAFE_ALL = new RegExp(JSON_TERMINAL_UNSAFE.source, 'g');
const unicodeEscape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * JSON text (JSON.stringify's, which escapes C0 controls already) with every
 * JSON_TERMINAL_UNSAFE character written as a `\uXXXX` escape, and every `##[` as `#\u0023[`
 * (a job log runs `##[add-mask]x` anywhere in a line, inside a JSON string too; `#` is only
 * ever in a string): the same value, nothing a terminal, a viewer or a job log acts on. For JSON
 * subtee writes where one may show it (pino, `stats --json`).
 */
export const terminalSafeJson = (json: string): string => {
  const shown = json.replace(JSON_TERMINAL_UNSAFE_ALL, unicodeEscape);
  return shown.includes(HASH_COMMAND) ? shown.replaceAll(HASH_COMMAND, '#\\u0023[') : shown;
};

/** Whether terminalSafeJson changes the JSON of this string (or this JSON text). */
export const needsTerminalSafeJson = (text: string): boolean =>
  JSON_TERMINAL_UNSAFE.test(text) || text.includes(HASH_COMMAND);

// UNSAFE plus TAB and LF, for one pass over one-line fields.
const UNSAFE_ON_ONE_LINE =
  /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * Same as escapeControl, and newlines and tabs become `\n`/`\t` too: for one-line fields of a
 * terminal or a log. A `##[` is written `#\x23[` (escapeHashCommands); one line cannot start a
 * second, so `::` can start only the field, which the callers that start a line with it escape.
 */
export function escapeOneLine(text: string): string {
  const oneLine = text.replace(UNSAFE_ON_ONE_LINE, (c) =>
    c === '\n' ? '\\n' : c === '\t' ? '\\t' : escapeControl(c),
  );
  return escapeHashCommands(oneLine);
}

const HTML: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text safe inside HTML element content and quoted attributes, control characters escaped. */
export function escapeHtml(text: string): string {
  return escapeControl(text).replace(/[&<>"']/g, (c) => HTML[c]);
}

/** Text safe inline in Markdown (and the HTML it may contain), on one line. */
export function escapeMarkdown(text: string): string {
  return escapeHtml(text)
    .replace(/([\\`*_{}[\]()#+!|~])/g, '\\$1')
    .replace(/\n/g, ' ');
}
