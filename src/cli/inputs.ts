import {
  accessSync,
  closeSync,
  constants as fsConstants,
  createReadStream,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readSync,
  statSync,
  type Stats,
  unlinkSync,
} from 'node:fs';
import { basename, isAbsolute, join, relative, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import type { ChainSpec } from '../chain/chain.js';
import { FileNamer } from '../chain/sinks/file-names.js';
import { refuseIfBusy } from '../chain/sinks/out-lock.js';
import { decompressed } from '../decompress.js';
import { FILE_READ_BYTES, inputIsFolder, inputUnreadable, openInputFile } from '../input-file.js';
import { EXIT, OutputError, outNotEmpty, SubteeError, UsageError, writeFailed } from '../errors.js';

/**
 * Checks every input before anything is written: a missing, unreadable or folder input is
 * exit 3 with no output folder left behind. No FILE means stdin (`subtee < dir` is a folder too).
 */
export function checkInputs(files: string[], stdinIsProcess = true): string[] {
  const inputs = files.length === 0 ? ['-'] : files;
  if (inputs.filter((f) => f === '-').length > 1) {
    throw new SubteeError('ERR_USAGE', 'stdin (-) can be read only once', { exitCode: EXIT.USAGE });
  }
  for (const file of inputs) {
    if (file === '-') {
      if (stdinIsProcess && fstatOrNull(0)?.isDirectory()) throw inputIsFolder('stdin');
      continue;
    }
    try {
      accessSync(file, fsConstants.R_OK);
      if (statSync(file).isDirectory()) throw inputIsFolder(file);
    } catch (err) {
      throw err instanceof SubteeError ? err : inputUnreadable(file, err);
    }
  }
  return inputs;
}

export async function openInput(file: string, stdin: Readable): Promise<Readable> {
  if (file === '-') {
    // `subtee < recorded.jsonl`: read the file behind stdin in large reads.
    const fileBehind = stdin === process.stdin && fstatOrNull(0)?.isFile() === true;
    return decompressed(
      fileBehind ? createReadStream('', { fd: 0, highWaterMark: FILE_READ_BYTES }) : stdin,
      'stdin',
    );
  }
  return openInputFile(file);
}

/** Folder names under OUT for several inputs: the file names without extensions, made safe and unique. */
export function inputFolderNames(inputs: string[]): string[] {
  const namer = new FileNamer();
  return inputs.map((f) => {
    if (f === '-') return namer.stemFor('stdin');
    const name = basename(f)
      .replace(/\.(gz|zst)$/i, '')
      .replace(/\.(jsonl|ndjson|json|log|txt)$/i, '');
    return namer.stemFor(name || 'input');
  });
}

const isInside = (dir: string, p: string) => {
  const rel = relative(resolve(dir), resolve(p));
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
};

/**
 * The chain for one of several inputs: each files sink writes to OUT/<name>/, and a pino file
 * inside OUT moves along (one event log per input); anything outside OUT is shared in order.
 */
export function specForInput(spec: ChainSpec, name: string): ChainSpec {
  const outs = spec.sinks
    .filter((c) => c.use === 'files' && typeof c.out === 'string')
    .map((c) => String(c.out));
  const rebase = (p: unknown) => {
    const out = typeof p === 'string' ? outs.find((o) => isInside(o, p)) : undefined;
    return out === undefined ? p : join(out, name, relative(resolve(out), resolve(String(p))));
  };
  return {
    stages: spec.stages.map((c) => ({ ...c })),
    sinks: spec.sinks.map((c) => {
      if (c.use === 'files' && typeof c.out === 'string') return { ...c, out: join(c.out, name) };
      if (c.use === 'pino' && c.destination !== undefined)
        return { ...c, destination: rebase(c.destination) };
      return { ...c };
    }),
  };
}

/**
 * Every per-input folder is checked before the first input is read, so a refusal leaves
 * nothing half done.
 */
export function checkInputFolders(spec: ChainSpec, names: string[]): void {
  const links: string[] = [];
  for (const files of spec.sinks.filter((c) => c.use === 'files' && typeof c.out === 'string')) {
    const out = String(files.out);
    const top = statOrNull(out);
    if (top && !top.isDirectory()) {
      throw new OutputError('ERR_OUT_NOT_DIR', out, `--out ${out} exists and is not a folder`);
    }
    for (const name of names) {
      const dir = join(out, name);
      // subtee names this folder, inside --out: a link planted there is never followed. Under
      // --force it is removed (once every folder passed), as a planted link in a run's folder
      // is; else the run is refused.
      if (lstatOrNull(dir)?.isSymbolicLink()) {
        if (files.force !== true) {
          const why = 'is a link: subtee does not write through one; remove it or pass --force';
          throw new OutputError('ERR_OUT_NOT_DIR', dir, `${dir} ${why}`);
        }
        links.push(dir);
        continue;
      }
      const st = statOrNull(dir);
      if (st && !st.isDirectory())
        throw new OutputError('ERR_OUT_NOT_DIR', dir, `${dir} exists and is not a folder`);
      // A folder another run is writing is refused before any input is read, forced or not.
      if (st?.isDirectory()) refuseIfBusy(dir, dir);
      if (st && files.force !== true && readdirSync(dir).length > 0) {
        throw outNotEmpty(dir, dir);
      }
    }
  }
  for (const link of links) {
    try {
      unlinkSync(link);
    } catch (err) {
      throw writeFailed(link, err);
    }
  }
}

/** How every pino log begins: pino writes the level first. */
const PINO_START = Buffer.from('{"level":');

/**
 * A pino log's file is appended to, so one that names an input of the run (by any name: the
 * same file is the same device and inode) or already holds something else than a pino log
 * (`--pino recording.jsonl`, the recording taken for the log's name) is refused before
 * anything is read or written. `inputs` are the run's files (`-` for stdin; none under
 * `subtee run`); a destination that is not a regular file (`-`, a pipe, a device, a link) is
 * let be.
 */
export function checkPinoDestination(spec: ChainSpec, inputs: readonly string[], given: boolean): void {
  for (const sink of spec.sinks) {
    const dest = sink.use === 'pino' ? sink.destination : undefined;
    if (typeof dest !== 'string' || dest === '-') continue;
    // A link is not followed: the pino sink refuses it when it opens the log.
    const st = lstatOrNull(dest);
    if (!st?.isFile()) continue;
    const what = given ? `--pino ${dest}` : `pino destination ${dest}`;
    const fix = given ? '; --pino alone goes after FILE, or write --pino=LOG' : '';
    const refuse = (why: string) =>
      new UsageError('ERR_BAD_OPTION', `${what} ${why}: the log would be appended to it${fix}`);
    for (const file of inputs) {
      const input = file === '-' ? fstatOrNull(0) : statOrNull(file);
      if (input?.isFile() && input.dev === st.dev && input.ino === st.ino)
        throw refuse(`is this run's input ${file === '-' ? 'stdin' : file}`);
    }
    if (st.size > 0 && beginsOtherwise(dest, PINO_START))
      throw refuse('already holds something else than a pino log (a recording?)');
  }
}

/** Whether the file's first bytes are not `start` (false when it cannot be read: its open says why). */
function beginsOtherwise(path: string, start: Buffer): boolean {
  let fd: number;
  try {
    fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
  } catch {
    return false;
  }
  try {
    const head = Buffer.alloc(start.length);
    const n = readSync(fd, head, 0, head.length, 0);
    return n < start.length || !head.equals(start);
  } catch {
    return false;
  } finally {
    closeSync(fd);
  }
}

/** What a stat says, or null when it fails (missing, unreadable): the caller's next step says why. */
function statusOf(stat: () => Stats): Stats | null {
  try {
    return stat();
  } catch {
    return null;
  }
}

const statOrNull = (p: string) => statusOf(() => statSync(p));
const lstatOrNull = (p: string) => statusOf(() => lstatSync(p));
const fstatOrNull = (fd: number) => statusOf(() => fstatSync(fd));
