// Hostile figures (negative, huge, past every bound) put into recorded streams, and the checks
// that no figure shown is negative, NaN or infinite.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpDir } from './helpers.js';

/** Figures no count or amount can be: each family member replaces every number of a usage or cost field. */
export const HOSTILE = [-5, -1e308, 1e308, 123456789012, -0.5] as const;

/** A field that holds a count of tokens or an amount of dollars, in any producer's naming. */
export const FIGURE = /tokens|Tokens|cost|Cost|usd|USD/;

/** Every number under a figure-named key replaced by `value` (the line's other numbers kept). */
export function poison(v: unknown, value: number, inFigure = false): unknown {
  if (typeof v === 'number') return inFigure ? value : v;
  if (Array.isArray(v)) return v.map((x) => poison(x, value, inFigure));
  if (v !== null && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v).map(([k, x]) => [k, poison(x, value, inFigure || FIGURE.test(k))]),
    );
  return v;
}

export function poisoned(file: string, value: number): string {
  const out = join(tmpDir(), 'hostile.jsonl');
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.stringify(poison(JSON.parse(l), value)));
  writeFileSync(out, `${lines.join('\n')}\n`);
  return out;
}

/** Every number in a JSON value, with the path to it. */
export function numbers(v: unknown, path = '$', out: Array<[string, number]> = []): Array<[string, number]> {
  if (typeof v === 'number') out.push([path, v]);
  else if (Array.isArray(v)) v.forEach((x, i) => numbers(x, `${path}[${i}]`, out));
  else if (v !== null && typeof v === 'object')
    for (const [k, x] of Object.entries(v)) numbers(x, `${path}.${k}`, out);
  return out;
}

/** No negative, non-finite or absurd figure in a JSON value (dollars at most a million). */
export function assertSane(value: unknown, label: string): void {
  for (const [path, n] of numbers(value)) {
    assert.ok(Number.isFinite(n) && n >= 0, `${label}: ${path} = ${n}`);
    if (/usd|cost/i.test(path)) assert.ok(n <= 1e6, `${label}: ${path} = ${n} dollars`);
  }
}

/** Text shown to a person: no NaN, no Infinity, no negative dollars. */
export function assertSaneText(text: string, label: string): void {
  assert.doesNotMatch(text, /NaN|Infinity|\$-|-\$|\$\d+e[+-]/, label);
}

export function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? files(join(dir, d.name)) : [join(dir, d.name)],
  );
}
