/**
 * Reading Claude Code's transcripts of one session, for cost (model/transcript-usage.ts says
 * what is read). Read-only and bounded: no link is followed (a linked folder or file under
 * the projects folder is refused, as every input of subtee), only regular files are read,
 * each up to a size, a line up to a length, and only so many subagent files; names come
 * from the folder's own listing or are checked before they become a path.
 */
import { closeSync, lstatSync, readdirSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { openRegularUnder } from '../safe-open.js';
import { systemReason } from '../errors.js';
import type { TranscriptChannel, TranscriptFindings } from '../model/cost.js';
import { metaToolUseId, projectSlug, SAFE_ID, TranscriptUsage } from '../model/transcript-usage.js';

export const TRANSCRIPTS_DEFAULTS = Object.freeze({
  /** A transcript larger than this is read this far and reported partial. */
  maxFileBytes: 512 * 1024 * 1024,
  /** A line longer than this is skipped and its file reported partial. */
  maxLineBytes: 16 * 1024 * 1024,
  /** Subagent transcripts read per session; past it, a problem is reported. */
  maxSubagents: 20_000,
  /** Project folders looked through for the session when its cwd's folder does not hold it. */
  maxProjects: 10_000,
  /** A subagent's meta file is small; a larger one is not read. */
  maxMetaBytes: 64 * 1024,
});

export interface TranscriptsOptions {
  /** A Claude config folder (holding `projects/`) or a projects folder. */
  dir: string;
  sessionId: string | null;
  /** The run's working directory, to find its project folder first; null to search. */
  cwd: string | null;
  maxFileBytes?: number;
  maxLineBytes?: number;
  maxSubagents?: number;
}

const READ_BYTES = 1024 * 1024;
const NEWLINE = 0x0a;

/** Whether `path` is a folder and not a link to one. */
function isFolder(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** The projects folder under a config folder (or the folder itself), or null when not a folder. */
function projectsRoot(dir: string): string | null {
  try {
    if (!statSync(dir).isDirectory()) return null;
  } catch {
    return null;
  }
  return isFolder(join(dir, 'projects')) ? join(dir, 'projects') : dir;
}

const META_NAME = /^agent-[A-Za-z0-9_-]{1,128}\.meta\.json$/;

/**
 * The meta files of a session's subagents folder, sorted by name and cut at `maxSubagents`
 * (the same ones whether read when a subagent ends or at the run's end), with what was wrong.
 */
function metaNames(subagents: string, maxSubagents: number): { names: string[]; problems: string[] } {
  const problems: string[] = [];
  let names: string[] = [];
  try {
    if (isFolder(subagents))
      names = readdirSync(subagents, { withFileTypes: true })
        .filter((d) => d.isFile() && META_NAME.test(d.name))
        .map((d) => d.name)
        .sort();
    else if (lstatSync(subagents, { throwIfNoEntry: false })?.isSymbolicLink())
      problems.push(`${subagents}: a link, not followed`);
  } catch (err) {
    problems.push(`${subagents}: ${reason(err)}`);
  }
  if (names.length > maxSubagents) {
    problems.push(`${names.length} subagent transcripts, only the first ${maxSubagents} read`);
    names = names.slice(0, maxSubagents);
  }
  return { names, problems };
}

/**
 * One meta file: the spawn id it names (null when none) and its transcript's path. Throws,
 * naming the meta file, when it cannot be read or is not JSON (one still being written).
 */
function readMeta(
  root: string,
  subagents: string,
  name: string,
  maxMetaBytes: number,
): { toolUseId: string | null; file: string } {
  const meta = join(subagents, name);
  let toolUseId: string | null;
  try {
    toolUseId = metaToolUseId(JSON.parse(readText(root, meta, maxMetaBytes)));
  } catch (err) {
    throw new Error(`${meta}: ${reason(err)}`);
  }
  return { toolUseId, file: join(subagents, `${name.slice(0, -'.meta.json'.length)}.jsonl`) };
}

/**
 * The session's transcripts under `dir`: main's and each subagent's usage, with what could
 * not be read. Nothing found at all is `main: null` and no subagents, with the reason.
 */
export function readTranscripts(o: TranscriptsOptions): TranscriptFindings {
  const found: TranscriptFindings = { dir: o.dir, main: null, subagents: new Map(), problems: [] };
  if (o.sessionId === null || !SAFE_ID.test(o.sessionId)) {
    found.problems.push(
      o.sessionId === null ? 'the stream states no session id' : 'the session id is not a file name',
    );
    return found;
  }
  const root = projectsRoot(o.dir);
  if (root === null) {
    found.problems.push('the folder cannot be read');
    return found;
  }
  const project = findProject(root, o.sessionId, o.cwd);
  if (project === null) {
    found.problems.push(`no transcript of session ${o.sessionId}`);
    return found;
  }
  const limits: Record<keyof typeof TRANSCRIPTS_DEFAULTS, number> = {
    ...TRANSCRIPTS_DEFAULTS,
    ...definedOnly(o),
  };
  const mainFile = join(project, `${o.sessionId}.jsonl`);
  try {
    found.main = readUsage(root, mainFile, limits);
  } catch (err) {
    found.problems.push(`${mainFile}: ${reason(err)}`);
  }
  const subagents = join(project, o.sessionId, 'subagents');
  const { names, problems } = metaNames(subagents, limits.maxSubagents);
  found.problems.push(...problems);
  for (const name of names) {
    let meta: { toolUseId: string | null; file: string };
    try {
      meta = readMeta(root, subagents, name, limits.maxMetaBytes);
    } catch (err) {
      found.problems.push((err as Error).message);
      continue;
    }
    if (meta.toolUseId === null) {
      found.problems.push(`${name}: names no toolUseId`);
      continue;
    }
    try {
      found.subagents.set(meta.toolUseId, readUsage(root, meta.file, limits));
    } catch (err) {
      found.problems.push(`${meta.file}: ${reason(err)}`);
    }
  }
  return found;
}

/** A folder's modification and change times, to tell whether its entries may have changed. */
function folderStamp(path: string): string | null {
  try {
    const s = lstatSync(path, { bigint: true });
    return s.isDirectory() ? `${s.mtimeNs}:${s.ctimeNs}` : null;
  } catch {
    return null;
  }
}

/**
 * One subagent's transcript at a time, as subagents end (for the live views). Bounded over a
 * run by the folders' sizes, not by the number of ends: the projects folder is searched again
 * only when its entries changed (the cwd's own project folder is looked at each time: two
 * lstats), and the subagents folder is listed again only when its entries changed, each meta
 * file read once it parses. Read-only as `readTranscripts`, and the same meta files (sorted,
 * cut at `maxSubagents`); anything that cannot be read is null here (the run's end reads every
 * transcript again and names what could not be).
 */
export class EndedTranscripts {
  #root: string | null = null;
  #subagents: string | null = null;
  /** The projects folder's stamp when the session was last searched for and not found. */
  #projectsMissed: string | null = null;
  /** The subagents folder's stamp when last listed. */
  #listed: string | null = null;
  /** Spawn id → transcript file, from the meta files read so far. */
  readonly #files = new Map<string, string>();
  readonly #metasRead = new Set<string>();
  readonly #limits: Record<keyof typeof TRANSCRIPTS_DEFAULTS, number>;
  /** Folders listed so far (the projects folder searched, the subagents folder read). */
  readonly listings = { projects: 0, subagents: 0 };

  constructor(private readonly o: Omit<TranscriptsOptions, 'sessionId' | 'cwd'>) {
    this.#limits = { ...TRANSCRIPTS_DEFAULTS, ...definedOnly(o) };
  }

  /** The transcript of the subagent spawned by `toolUseId`, or null when it cannot be read now. */
  channel(toolUseId: string, sessionId: string | null, cwd: string | null): TranscriptChannel | null {
    try {
      const file = this.#fileOf(toolUseId, sessionId, cwd);
      return file === null ? null : readUsage(this.#root!, file, this.#limits);
    } catch {
      return null;
    }
  }

  #fileOf(toolUseId: string, sessionId: string | null, cwd: string | null): string | null {
    const known = this.#files.get(toolUseId);
    if (known !== undefined) return known;
    if (this.#subagents === null && !this.#findSession(sessionId, cwd)) return null;
    const subagents = this.#subagents!;
    const stamp = folderStamp(subagents);
    if (stamp === null || stamp === this.#listed) return null;
    this.#listed = stamp;
    this.listings.subagents++;
    for (const name of metaNames(subagents, this.#limits.maxSubagents).names) {
      if (this.#metasRead.has(name)) continue;
      try {
        const meta = readMeta(this.#root!, subagents, name, this.#limits.maxMetaBytes);
        this.#metasRead.add(name);
        if (meta.toolUseId !== null) this.#files.set(meta.toolUseId, meta.file);
      } catch {
        // Not marked read: one still being written is read again at the next listing.
      }
    }
    return this.#files.get(toolUseId) ?? null;
  }

  /** Finds the session's project folder; a failed search is redone only once the folder changed. */
  #findSession(sessionId: string | null, cwd: string | null): boolean {
    if (sessionId === null || !SAFE_ID.test(sessionId)) return false;
    const root = projectsRoot(this.o.dir);
    if (root === null) return false;
    const stamp = folderStamp(root);
    let project = cwd === null ? null : ownProject(root, sessionId, cwd);
    if (project === null && stamp !== this.#projectsMissed) {
      this.listings.projects++;
      project = findProject(root, sessionId, null);
      if (project === null) this.#projectsMissed = stamp;
    }
    if (project === null) return false;
    this.#root = root;
    this.#subagents = join(project, sessionId, 'subagents');
    return true;
  }
}

type Limits = Partial<Record<keyof typeof TRANSCRIPTS_DEFAULTS, number>>;

function definedOnly(o: Omit<TranscriptsOptions, 'sessionId' | 'cwd'>): Limits {
  const out: Limits = {};
  if (o.maxFileBytes !== undefined) out.maxFileBytes = o.maxFileBytes;
  if (o.maxLineBytes !== undefined) out.maxLineBytes = o.maxLineBytes;
  if (o.maxSubagents !== undefined) out.maxSubagents = o.maxSubagents;
  return out;
}

const reason = (err: unknown): string => {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ELOOP') return 'a link, not followed';
  if (code === 'ENOTREG') return 'not a regular file';
  if (code === 'ENOENT') return 'missing';
  return err instanceof SyntaxError ? 'not JSON' : systemReason(err);
};

/** The project folder holding `<session>.jsonl`: the cwd's first, else a bounded search. */
function findProject(root: string, sessionId: string, cwd: string | null): string | null {
  const holds = (folder: string) => {
    try {
      return lstatSync(join(folder, `${sessionId}.jsonl`)).isFile();
    } catch {
      return false;
    }
  };
  const own = cwd === null ? null : ownProject(root, sessionId, cwd);
  if (own !== null) return own;
  if (holds(root)) return root;
  let seen = 0;
  for (const d of readdirSync(root, { withFileTypes: true })) {
    if (!d.isDirectory()) continue;
    if (++seen > TRANSCRIPTS_DEFAULTS.maxProjects) break;
    if (holds(join(root, d.name))) return join(root, d.name);
  }
  return null;
}

/** The cwd's own project folder when it holds the session. */
function ownProject(root: string, sessionId: string, cwd: string): string | null {
  const own = join(root, projectSlug(cwd));
  try {
    return isFolder(own) && lstatSync(join(own, `${sessionId}.jsonl`)).isFile() ? own : null;
  } catch {
    return null;
  }
}

/** A small file's text, refused past `max` bytes. */
function readText(root: string, path: string, max: number): string {
  const fd = openRegularUnder(root, path.slice(root.length + 1));
  try {
    const buf = Buffer.alloc(max + 1);
    let n = 0;
    for (let got = 1; got > 0 && n <= max; n += got) got = readSync(fd, buf, n, buf.length - n, null);
    if (n > max) throw Object.assign(new Error('too large'), { code: 'EFBIG' });
    return buf.subarray(0, n).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** One transcript's usage, read a megabyte at a time, lines past the limit skipped. */
function readUsage(
  root: string,
  path: string,
  limits: { maxFileBytes: number; maxLineBytes: number },
): TranscriptChannel {
  const usage = new TranscriptUsage();
  const fd = openRegularUnder(root, path.slice(root.length + 1));
  const buf = Buffer.alloc(READ_BYTES);
  let carry: Buffer[] = [];
  let carried = 0;
  let skipping = false;
  let lineNo = 0;
  let total = 0;
  const line = (bytes: Buffer) => {
    lineNo++;
    // Only assistant lines carry usage: the others are not parsed.
    if (bytes.indexOf('"assistant"') < 0) return;
    try {
      usage.add(JSON.parse(bytes.toString('utf8')), lineNo);
    } catch {
      usage.partial ??= `has a line that is not JSON (line ${lineNo})`;
    }
  };
  try {
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      total += n;
      let at = 0;
      for (let nl = buf.indexOf(NEWLINE, 0); nl >= 0 && nl < n; nl = buf.indexOf(NEWLINE, at)) {
        const length = carried + nl - at;
        if (skipping || length > limits.maxLineBytes) {
          usage.partial ??= `has a line over ${limits.maxLineBytes} bytes`;
          skipping = false;
          lineNo++;
        } else line(Buffer.concat([...carry, buf.subarray(at, nl)]));
        carry = [];
        carried = 0;
        at = nl + 1;
      }
      if (at < n && !skipping) {
        carried += n - at;
        if (carried > limits.maxLineBytes) {
          usage.partial ??= `has a line over ${limits.maxLineBytes} bytes`;
          skipping = true;
          carry = [];
          carried = 0;
        } else carry.push(Buffer.from(buf.subarray(at, n)));
      }
      if (total >= limits.maxFileBytes) {
        usage.partial ??= `is larger than ${limits.maxFileBytes} bytes (read that far)`;
        break;
      }
    }
    if (carried > 0) usage.partial ??= 'ends in a line cut short (still being written?)';
  } finally {
    closeSync(fd);
  }
  return usage.channel(path);
}
