import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT } from './helpers/helpers.js';
import { findCircle, importsUnder, type Import } from './helpers/imports.js';

/**
 * The rooms of src/ from the top down: a file may import from its own room and the rooms below
 * it, never above. The command line and the library entries (the package entry, open(), the
 * subpaths in entry/) are both at the top and apart.
 */
export function roomOf(file: string): { name: string; rank: number } {
  const top = file.split('/')[0];
  if (top === 'cli') return { name: 'cli', rank: 4 };
  if (file === 'index.ts' || file === 'open.ts' || top === 'entry') return { name: 'entry', rank: 4 };
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
