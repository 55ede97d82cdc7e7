import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The front page and the reference pages, as paths from the repository's root. */
export function docPages(): string[] {
  const pages = readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...pages];
}

/** One document's text, by its path from the repository's root (`README.md`, `docs/cost.md`). */
export function readDoc(path: string): string {
  return readFileSync(join(ROOT, path), 'utf8');
}

/** The front page and every reference page, one after another. */
export function allDocs(): string {
  return docPages()
    .map((p) => readDoc(p))
    .join('\n');
}

/** The text of a document from a heading (a whole line) to the next heading of its level or higher. */
export function section(path: string, heading: string): string {
  const text = readDoc(path);
  const lines = text.split('\n');
  const at = lines.indexOf(heading);
  assert.ok(at >= 0, `${path} has the heading ${heading}`);
  const level = /^#+/.exec(heading)![0].length;
  let fence = false;
  let end = lines.length;
  for (let i = at + 1; i < lines.length; i++) {
    if (lines[i].startsWith('```')) fence = !fence;
    const m = /^(#+) /.exec(lines[i]);
    if (!fence && m && m[1].length <= level) {
      end = i;
      break;
    }
  }
  return lines.slice(at, end).join('\n');
}

/** The code blocks of a text in a language (`sh`, `ts`, `json`…), in order. */
export function codeBlocks(text: string, lang: string): string[] {
  const fence = new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\`$`, 'gm');
  return [...text.matchAll(fence)].map((m) => m[1].replace(/\n$/, ''));
}

/** The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens. */
export function headingAnchor(heading: string): string {
  return heading
    .replace(/^#+ /, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}_\- ]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a Markdown text's headings (outside code blocks). */
export function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  let fence = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fence = !fence;
    if (!fence && /^#+ /.test(line)) anchors.add(headingAnchor(line));
  }
  return anchors;
}

/** A Markdown text's link targets, outside code blocks: `[text](target)` and `![alt](target)`. */
export function linksOf(text: string): string[] {
  const links: string[] = [];
  let fence = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fence = !fence;
    if (!fence) for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) links.push(m[1]);
  }
  return links;
}
