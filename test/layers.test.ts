import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { ROOT } from './helpers.js';

export interface Import {
  from: string;
  /** The imported file, relative to the folder walked, or the specifier of a package. */
  to: string;
  /** `import type` / `export type`: gone after compilation, but still a dependency of the design. */
  typeOnly: boolean;
}

const STATIC = /(?:^|\n)[ \t]*(?:import|export)[ \t]+(type[ \t]+)?[\w*{}\s,$]*?\bfrom[ \t]+'([^']+)'/g;
const BARE = /(?:^|\n)[ \t]*import[ \t]+'([^']+)'/g;
const DYNAMIC = /\bimport\(\s*'([^']+)'\s*\)/g;

/** Every import of every .ts file under `dir`, relative targets resolved to their .ts files. */
export function importsUnder(dir: string): Import[] {
  const files = readdirSync(dir, { recursive: true })
    .map(String)
    .filter((f) => f.endsWith('.ts'));
  const out: Import[] = [];
  for (const file of files) {
    const text = readFileSync(join(dir, file), 'utf8');
    const add = (spec: string, typeOnly: boolean) => {
      const to = spec.startsWith('.')
        ? relative(dir, resolve(dirname(join(dir, file)), spec)).replace(/\.js$/, '.ts')
        : spec;
      out.push({ from: file, to, typeOnly });
    };
    for (const m of text.matchAll(STATIC)) add(m[2], m[1] !== undefined);
    for (const m of text.matchAll(BARE)) add(m[1], false);
    for (const m of text.matchAll(DYNAMIC)) add(m[1], false);
  }
  return out;
}

/**
 * A circle of files that import one another, as `a → b → a`, or null. Type imports count: a
 * file that needs another's types cannot be understood, or moved, without it.
 */
export function findCircle(imports: Import[]): string | null {
  const next = new Map<string, string[]>();
  for (const i of imports) {
    if (!i.to.endsWith('.ts')) continue;
    next.set(i.from, [...(next.get(i.from) ?? []), i.to]);
  }
  const done = new Set<string>();
  const path: string[] = [];
  const onPath = new Set<string>();
  // Iterative depth-first search: each frame is a file and the index of its next import.
  for (const start of next.keys()) {
    if (done.has(start)) continue;
    const stack: Array<[string, number]> = [[start, 0]];
    path.push(start);
    onPath.add(start);
    while (stack.length > 0) {
      const top = stack[stack.length - 1];
      const targets = next.get(top[0]) ?? [];
      if (top[1] >= targets.length) {
        stack.pop();
        onPath.delete(path.pop()!);
        done.add(top[0]);
        continue;
      }
      const to = targets[top[1]++];
      if (onPath.has(to)) return [...path.slice(path.indexOf(to)), to].join(' → ');
      if (done.has(to)) continue;
      stack.push([to, 0]);
      path.push(to);
      onPath.add(to);
    }
  }
  return null;
}

/**
 * The rooms of src/ from the top down: a file may import from its own room and the rooms below
 * it, never above. The command line and the library entry are both at the top and apart.
 */
export function roomOf(file: string): { name: string; rank: number } {
  const top = file.split('/')[0];
  if (top === 'cli') return { name: 'cli', rank: 4 };
  if (file === 'index.ts' || file === 'open.ts') return { name: 'entry', rank: 4 };
  if (top === 'chain') return { name: 'chain', rank: 3 };
  if (top === 'views' || top === 'adapters') return { name: top, rank: 2 };
  if (top === 'model') return { name: 'model', rank: 1 };
  return { name: 'shared', rank: 0 };
}

/** Imports that point up the layers (or across between the command line and the library entry). */
export function layerBreaks(imports: Import[]): string[] {
  return imports
    .filter((i) => i.to.endsWith('.ts'))
    .filter((i) => {
      const [a, b] = [roomOf(i.from), roomOf(i.to)];
      return b.rank > a.rank || (a.rank === b.rank && a.name !== b.name && a.rank === 4);
    })
    .map((i) => `${i.from} → ${i.to}`);
}

test('src/ has no import circle', () => {
  const imports = importsUnder(join(ROOT, 'src'));
  assert.ok(imports.length > 300, `${imports.length} imports found`);
  assert.equal(findCircle(imports), null);
});

test('imports point down the layers only: cli → chain → views → model', () => {
  assert.deepEqual(layerBreaks(importsUnder(join(ROOT, 'src'))), []);
});

test('the circle and layer checks find what they are for', () => {
  const imports: Import[] = [
    { from: 'chain/builtins.ts', to: 'views/report/sink.ts', typeOnly: false },
    { from: 'views/report/sink.ts', to: 'chain/options.ts', typeOnly: true },
    { from: 'chain/options.ts', to: 'chain/builtins.ts', typeOnly: false },
    { from: 'model/a.ts', to: 'model/b.ts', typeOnly: false },
  ];
  assert.equal(
    findCircle(imports),
    'chain/builtins.ts → views/report/sink.ts → chain/options.ts → chain/builtins.ts',
  );
  assert.deepEqual(layerBreaks(imports), ['views/report/sink.ts → chain/options.ts']);
});
