import { constants as buffers } from 'node:buffer';
import { closeSync, fstatSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openRegularForRead } from '../safe-open.js';
import { systemReason } from '../errors.js';

/** A run folder whose index.json could not be used. */
export interface SkippedRun {
  path: string;
  why: string;
}

/**
 * The longest index.json read: the longest string Node holds. A run of 10,000 subagents writes
 * some 11 MB; a file past this is no index subtee wrote, and reading it would hold it all.
 */
export const INDEX_MAX_BYTES = buffers.MAX_STRING_LENGTH;

const WHY: Record<string, string> = {
  ELOOP: 'a symbolic link (not followed)',
  ENOTREG: 'not a regular file',
  EACCES: 'permission denied',
};

/**
 * Every run folder under the roots, each once, in a stable order: a folder holding an entry
 * named index.json is a run folder and is not descended into. An explicit stack (the tree
 * chooses the depth), and links are never followed.
 */
export function* runFolders(
  roots: readonly string[],
  onUnreadable: (dir: string, why: string) => void = () => {},
): Generator<string> {
  for (const root of roots) {
    const stack = [root];
    while (stack.length > 0) {
      const dir = stack.pop()!;
      let entries;
      try {
        entries = readdirSync(dir, { withFileTypes: true });
      } catch (err) {
        if (dir === root) throw err;
        onUnreadable(dir, systemReason(err, WHY));
        continue;
      }
      if (entries.some((e) => e.name === 'index.json' && !e.isDirectory())) {
        yield dir;
        continue;
      }
      const subdirs = entries
        .filter((e) => e.isDirectory())
        .map((e) => e.name)
        .sort();
      for (let i = subdirs.length - 1; i >= 0; i--) stack.push(join(dir, subdirs[i]));
    }
  }
}

/** The parsed index.json of a run folder, or why it cannot be used. Never throws. */
export function readRunIndex(dir: string): { index: unknown } | { why: string } {
  const path = join(dir, 'index.json');
  let textOf: string;
  try {
    const fd = openRegularForRead(path);
    try {
      // Longer than a string Node can hold: skipped by its size, before a byte is read.
      const bytes = fstatSync(fd).size;
      if (bytes > INDEX_MAX_BYTES) return { why: `${bytes} bytes, more than the ${INDEX_MAX_BYTES} read` };
      textOf = readFileSync(fd, 'utf8');
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    return { why: systemReason(err, WHY) };
  }
  try {
    return { index: JSON.parse(textOf) };
  } catch {
    return { why: textOf.length === 0 ? 'empty (still being written?)' : 'not valid JSON (cut short?)' };
  }
}
