/** What the source files of a folder import: the walk the layer and plugin tests share. */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

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
