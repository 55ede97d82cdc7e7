import { createHash } from 'node:crypto';

// Names Windows refuses whatever the extension, matched case-insensitively.
const RESERVED = /^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])$/i;
const SAFE = /^[A-Za-z0-9_-]{1,80}$/;

/**
 * Turns stream ids into file stems that are safe on every filesystem and unique within one
 * output folder, case-insensitively. An id that is already safe keeps its name, so users can
 * find `toolu_….log` by id; any other id keeps a readable prefix plus a hash of the whole id.
 * Uniqueness never relies on a suffix of the id (two ids can share their last characters).
 */
export class FileNamer {
  private readonly taken = new Set<string>();

  constructor(reserved: Iterable<string> = []) {
    for (const r of reserved) this.taken.add(r.toLowerCase());
  }

  stemFor(id: string): string {
    const stem = safeStem(id);
    let candidate = stem;
    for (let n = 2; this.taken.has(candidate.toLowerCase()); n++) candidate = `${stem}-${n}`;
    this.taken.add(candidate.toLowerCase());
    return candidate;
  }
}

export function safeStem(id: string): string {
  if (SAFE.test(id) && !RESERVED.test(id)) return id;
  const hash = createHash('sha256').update(id).digest('hex').slice(0, 12);
  const prefix = id.replace(/[^A-Za-z0-9_-]+/g, '_').slice(0, 48);
  return `${prefix}-${hash}`;
}
