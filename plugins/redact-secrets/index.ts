import { definePlugin, rewriteText, type SubteeRecord } from '../../src/index.js';

export const MASK = '[REDACTED]';

/**
 * Credentials that show up in agent transcripts: provider API keys, tokens of code hosts and
 * chat tools, cloud access keys, Authorization headers, and `password=`/`"api_key": "…"`
 * style assignments. The mask has no quote or backslash, so a masked JSON line stays valid.
 */
export const SECRET_PATTERNS: readonly RegExp[] = [
  /sk-ant-[A-Za-z0-9_-]{16,}/g,
  /\bsk-(?:proj-|live-|test-)?[A-Za-z0-9_-]{20,}/g,
  /\bgh[pousr]_[A-Za-z0-9]{30,}/g,
  /\bgithub_pat_[A-Za-z0-9_]{30,}/g,
  /\bglpat-[A-Za-z0-9_-]{20,}/g,
  /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g,
  /\bxox[abprs]-[A-Za-z0-9-]{10,}/g,
  /\bAIza[0-9A-Za-z_-]{35}\b/g,
  /\bnpm_[A-Za-z0-9]{36}\b/g,
  /\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}/g,
];

// Keeps the scheme or key name, masks the value.
const KEEP_PREFIX: readonly RegExp[] = [
  /(\b(?:Bearer|Basic|Token)\s+)[A-Za-z0-9._~+/-]{16,}=*/gi,
  new RegExp(
    String.raw`((?:api[_-]?key|secret|password|passwd|access[_-]?token|auth[_-]?token)` +
      String.raw`\\?"?\s*[:=]\s*\\?"?)[^"\s\\,}]{8,}`,
    'gi',
  ),
];

// A cheap first look, so lines with nothing secret-like skip the full pass.
const HINT = new RegExp(
  'sk-|gh[pousr]_|github_pat_|glpat-|AKIA|ASIA|xox[abprs]-|AIza|npm_|eyJ|' +
    'bearer|basic|token|api[_-]?key|secret|passw',
  'i',
);

export function redact(text: string): string {
  if (!HINT.test(text)) return text;
  let out = text;
  for (const re of SECRET_PATTERNS) out = out.replace(re, MASK);
  for (const re of KEEP_PREFIX) out = out.replace(re, (_m, prefix: string) => prefix + MASK);
  return out;
}

/**
 * The record with its secrets masked: the raw line and the value (a long line as it is copied).
 * Each JSON string is searched as it decodes, so a secret after an escape (`\n`, `\t`, `\"`,
 * `\u00a0`) is found as it is in the text a view shows; then the line's text as it stands, for
 * what spans a key and its value (`"password": "…"`) or is not JSON.
 */
export const redactRecord = (rec: SubteeRecord): SubteeRecord =>
  rewriteText(rec, redact, { decodeStrings: true });

/**
 * Masks secrets in every record before any sink sees it: the raw line (so the `.jsonl` files
 * and the quarantine hold the masked text) and the parsed value (so readable transcripts,
 * stdout and pino do). Put it right after the line parser. `--stdout raw` copies input
 * before any stage and is not masked.
 */
export default definePlugin<Record<string, never>>({
  name: 'redact-secrets',
  kind: 'stage',
  kit: '^0.1.0',
  options: {},
  create: () => redactRecord,
});
