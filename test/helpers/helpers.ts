import { spawnSync } from 'node:child_process';
import {
  closeSync,
  constants,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { after } from 'node:test';
import type { ChainSpec } from '../../src/chain/chain.js';
import type { Session } from '../../src/model/session.js';
import { readStream, type Oracle } from './oracle.js';
import assert from 'node:assert/strict';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const BIN = join(ROOT, 'bin', 'subtee.js');
export const FIXTURES = join(ROOT, 'test', 'fixtures');

/** The recordings shipped with the repository (test/fixtures/*.jsonl). */
export function fixtureFiles(): string[] {
  return readdirSync(FIXTURES)
    .filter((f) => f.endsWith('.jsonl'))
    .sort()
    .map((f) => join(FIXTURES, f));
}

const made: string[] = [];
after(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

/**
 * A stream of `subagents` Agent spawns on main's channel, then `textLines` text lines dealt out
 * over the subagents' channels in turn: many channels, each with its own files.
 */
export function fanoutInput(subagents: number, textLines: number): Buffer {
  const lines: string[] = [];
  for (let k = 0; k < subagents; k++) {
    const spawn = { type: 'tool_use', id: `toolu_f${k}`, name: 'Agent', input: {} };
    const message = { id: `s${k}`, content: [spawn] };
    lines.push(JSON.stringify({ type: 'assistant', parent_tool_use_id: null, message }));
  }
  for (let k = 0; k < textLines; k++) {
    const message = { id: `m${k}`, content: [{ type: 'text', text: `t${k}` }] };
    lines.push(JSON.stringify({ type: 'assistant', parent_tool_use_id: `toolu_f${k % subagents}`, message }));
  }
  return Buffer.from(lines.join('\n') + '\n');
}

export function tmpDir(prefix = 'subtee-test-'): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  made.push(d);
  return d;
}

/** A readable that yields exactly these chunks, so tests choose every chunk boundary. */
export function chunked(chunks: Buffer[]): Readable {
  return Readable.from(
    chunks.map((c) => Buffer.from(c)),
    { objectMode: false },
  );
}

export function splitEvery(buf: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < buf.length; i += size) out.push(buf.subarray(i, i + size));
  return out;
}

export interface RunResult {
  run: Session;
  out: string;
  index: any;
  /** Every file written, by path relative to out. */
  files: Map<string, Buffer>;
}

export async function runToFiles(
  chunks: Buffer[] | Buffer,
  sinkOptions: Record<string, unknown> = {},
  stageOptions: Record<string, unknown> = {},
): Promise<RunResult> {
  const out = join(tmpDir(), 'out');
  const spec: ChainSpec = {
    stages: [{ use: 'line-parser', ...stageOptions }, { use: 'channel-router' }],
    sinks: [{ use: 'files', out, ...sinkOptions }],
  };
  // Imported by the tests that run a chain: a test file that runs none starts without it.
  const { runChain } = await import('../../src/chain/chain.js');
  const run = await runChain(chunked(Array.isArray(chunks) ? chunks : [chunks]), spec);
  return { run, out, index: JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')), files: readTree(out) };
}

export function readTree(dir: string): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else files.set(relative(dir, p).split('\\').join('/'), readFileSync(p));
    }
  };
  walk(dir);
  return files;
}

export function linesOf(buf: Buffer | undefined): string[] {
  if (!buf || buf.length === 0) return [];
  const s = buf.toString('utf8');
  return (s.endsWith('\n') ? s.slice(0, -1) : s).split('\n');
}

/** Recordings of the real CLI made by another script than ours (see its README). */
export const SAMPLES = join(FIXTURES, 'samples');

/** The recordings in test/fixtures/samples; a missing folder throws rather than checking nothing. */
export function sampleFiles(): string[] {
  return readdirSync(SAMPLES)
    .filter((f) => f.endsWith('.jsonl'))
    .sort()
    .map((f) => join(SAMPLES, f));
}

/**
 * Checks subtee's output folder against an independent reading of the same input bytes:
 * the tree (ids, parents, depths, agents, statuses), each channel's lines in arrival order,
 * and conservation (every non-blank input line in exactly one .jsonl file or the quarantine).
 */
export function checkOutput(input: Buffer, out: string, name: string): { index: any; expected: Oracle } {
  const expected = readStream(input.toString('utf8'));
  const files = readTree(out);
  const index = JSON.parse(files.get('index.json')!.toString('utf8'));
  const got = new Map<string | null, any>(index.channels.map((c: any) => [c.id, c]));
  assert.deepEqual([...got.keys()].sort(), [...expected.channels.keys()].sort(), `${name}: channel ids`);
  for (const [id, e] of expected.channels) {
    const c = got.get(id);
    // Without a complete spawn chain the oracle knows no depth; subtee may know it from task_started.
    const depth = e.depth === null ? c.depth : e.depth;
    assert.deepEqual(
      { parent: c.parent, depth: c.depth, status: c.status },
      { parent: e.parent, depth, status: e.status },
      `${name}: channel ${id}`,
    );
    if (id !== null) assert.equal(c.agent, e.agent, `${name}: agent of ${id}`);
    assert.deepEqual(linesOf(files.get(c.jsonl)), e.lines, `${name}: lines of ${id}`);
    assert.equal(c.lines, e.lines.length, `${name}: line count of ${id}`);
  }
  const all = [
    ...index.channels.flatMap((c: any) => linesOf(files.get(c.jsonl))),
    ...linesOf(files.get('quarantine.log')),
  ];
  assert.deepEqual(all.sort(), [...expected.nonBlank].sort(), `${name}: conservation`);
  assert.equal(index.input.lines, expected.nonBlank.length, `${name}: input lines`);
  assert.equal(index.input.quarantined, expected.quarantined.length, `${name}: quarantined`);
  return { index, expected };
}

/**
 * The rest of each channel against the same independent reading: usage, block counts,
 * `background` and `summary` (what end-to-end runs of the real CLI must get right too).
 */
export function checkDetails(index: any, expected: Oracle, name: string): void {
  for (const c of index.channels) {
    const e = expected.channels.get(c.id)!;
    // Output tokens on the lines are the message_start snapshot: index.json has the true or
    // estimated figure (checked in cost.test.ts), the lines' own only on the `stream` basis.
    const { output_tokens: output, ...usage } = c.usage;
    const { output_tokens: lineOutput, ...lineUsage } = e.usage;
    assert.deepEqual(usage, lineUsage, `${name}: usage of ${c.id}`);
    if (index.cost?.output_tokens === 'stream')
      assert.equal(output, lineOutput, `${name}: output of ${c.id}`);
    assert.deepEqual(c.counts, e.counts, `${name}: counts of ${c.id}`);
    assert.equal(c.background, e.background, `${name}: background of ${c.id}`);
    assert.equal(c.summary, e.summary, `${name}: summary of ${c.id}`);
  }
}

/**
 * Whether the files sink has ended OUT's transcripts: main.log closes with its `# cost:` line,
 * written once the input has ended (index.json follows once the sinks after it have ended).
 */
export function transcriptsEnded(out: string): boolean {
  let log: string;
  try {
    log = readFileSync(join(out, 'main.log'), 'utf8');
  } catch {
    return false;
  }
  return log.trimEnd().split('\n').pop()!.startsWith('# cost: ');
}

/** A loopback port nothing listens on: connections to it are refused at once. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * The real CLI, bounded: a run that blocks (on a named pipe) is killed after 30 s and shows
 * up as `error`, so a hang fails the test instead of holding the suite.
 */
export function boundedSubtee(args: string[], input: Buffer | string) {
  return spawnSync(process.execPath, [BIN, ...args], {
    input,
    encoding: 'utf8',
    timeout: 30_000,
    killSignal: 'SIGKILL',
  });
}

/**
 * A module to preload (`node --import FILE`) that appends every URL the program resolves to
 * the file named by the environment's SUBTEE_LOADER_TRACE; written into `dir`.
 */
export function loaderTraceImport(dir: string): string {
  const hooks = join(dir, 'trace-hooks.mjs');
  writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(process.env.SUBTEE_LOADER_TRACE, resolved.url + '\\n');
  return resolved;
}`,
  );
  const register = join(dir, 'trace-register.mjs');
  const registration = `register(${JSON.stringify(pathToFileURL(hooks).href)});`;
  writeFileSync(register, `import { register } from 'node:module';\n${registration}`);
  return register;
}

/**
 * The modules of subtee's own (paths under dist/src/) the real CLI resolves while it runs
 * `args`, traced by a module resolve hook registered before it starts; asserts exit 0.
 */
export function cliModules(args: string[]): string[] {
  const dir = tmpDir();
  const trace = join(dir, 'trace.txt');
  const register = loaderTraceImport(dir);
  writeFileSync(trace, '');
  const r = spawnSync(process.execPath, ['--import', register, BIN, ...args], {
    encoding: 'utf8',
    env: { ...process.env, SUBTEE_LOADER_TRACE: trace },
  });
  assert.equal(r.status, 0, r.stderr);
  const own = pathToFileURL(join(ROOT, 'dist', 'src')).href + '/';
  const urls = readFileSync(trace, 'utf8').split('\n').filter((url) => url.startsWith(own));
  return [...new Set(urls.map((url) => url.slice(own.length)))].sort();
}

/**
 * A pipe whose reader takes the first bytes written and then nothing more (a pager left open:
 * `… | subtee | less`): `fd` is its write end, for a child's stdio (close it once the child
 * has it); `firstBytes` resolves once something was written; `close` lets the reader go.
 */
export function stuckReader(dir: string): { fd: number; firstBytes: Promise<void>; close(): void } {
  const fifo = join(dir, 'stdout.fifo');
  assert.equal(spawnSync('mkfifo', [fifo]).status, 0, 'mkfifo');
  const readEnd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  const fd = openSync(fifo, 'w');
  const firstBytes = (async () => {
    const buf = Buffer.alloc(1);
    for (;;) {
      try {
        if (readSync(readEnd, buf) > 0) return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return { fd, firstBytes, close: () => closeSync(readEnd) };
}

/**
 * Listens for the process's warnings (Node's listener-leak warning among them) from now until
 * `settled()`, which waits a turn of the event loop (Node emits a warning on a later tick),
 * stops listening and gives the names of the warnings heard.
 */
export function processWarnings(): { settled(): Promise<string[]> } {
  const warnings: Error[] = [];
  const onWarning = (warning: Error) => warnings.push(warning);
  process.on('warning', onWarning);
  return {
    async settled() {
      await new Promise((resolve) => setImmediate(resolve));
      process.off('warning', onWarning);
      return warnings.map((w) => w.name);
    },
  };
}
