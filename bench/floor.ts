/**
 * The least a tool with subtee's output can do per line, for the benchmark tables: split the
 * input into lines, judge each one a JSON object or not (a line that is not goes to one
 * quarantine file), route it by `parent_tool_use_id`, append it to its channel's `.jsonl` and
 * its content blocks' text to the channel's `.log`, batched per input chunk:
 *   node dist/bench/floor.js parse-all|scan-parse|scan-view|bytes OUT < FILE
 *
 * How a line is judged and read, by mode:
 * - `parse-all`: `JSON.parse` of every line, as `demux.mjs` does;
 * - `scan-parse`: subtee's scanner judges every line; a `stream_event` line is routed by the
 *   bytes of its `parent_tool_use_id`, any other is then built by `JSON.parse`;
 * - `scan-view`: subtee's scanner judges every line, and the view built from its scan
 *   (`buildView`: a `stream_event` line's top-level scalars; long block strings left undecoded
 *   until read) routes it and gives its blocks' text, with no `JSON.parse`;
 * - `bytes`: nothing is judged and no `.log` written: every line is routed by the bytes of its
 *   `parent_tool_use_id`.
 * None keeps a tree, a cost ledger, what is in flight, an index, a display policy or escapes:
 * each bounds how fast subtee could be with its lines judged and read that way.
 */
import { createReadStream, mkdirSync, openSync, writevSync } from 'node:fs';
import { join } from 'node:path';
import { writeAllSync } from '../src/safe-open.js';
import { lineText } from '../src/model/line-view.js';
import { buildView, LazyText, scanJson, Tape, UNDECIDED, type Bytes } from '../src/model/scan.js';

const MODES = ['parse-all', 'scan-parse', 'scan-view', 'bytes'];
const [mode, out] = process.argv.slice(2);
if (!MODES.includes(mode!) || !out) {
  process.stderr.write(`usage: node dist/bench/floor.js ${MODES.join('|')} OUT < FILE\n`);
  process.exit(2);
}
mkdirSync(join(out, 'agents'), { recursive: true });

type Text = string | LazyText;
type Block = { type?: unknown; text?: Text; thinking?: Text; name?: unknown; input?: unknown };

type Channel = { jsonl: number; log: number; lines: Buffer[]; text: string[] };
const channels = new Map<string, Channel>();
const quarantine: Channel = open('quarantine');
const tape = new Tape(1 << 14);
const STREAM_EVENT = Buffer.from('{"type":"stream_event"');
const PARENT = Buffer.from('"parent_tool_use_id":"');
let lines = 0;

function open(name: string): Channel {
  const at = name === 'main' || name === 'quarantine' ? join(out!, name) : join(out!, 'agents', name);
  return { jsonl: openSync(`${at}.jsonl`, 'wx'), log: openSync(`${at}.log`, 'wx'), lines: [], text: [] };
}

/** A channel's files, named by its id where the id is a plain name, else by its number. */
function channel(id: string): Channel {
  let c = channels.get(id);
  if (c === undefined) channels.set(id, (c = open(/^\w[\w-]*$/.test(id) ? id : `channel-${channels.size}`)));
  return c;
}

function parsed(line: Buffer): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(lineText(line));
    const isObject = typeof v === 'object' && v !== null && !Array.isArray(v);
    return isObject ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function idOf(line: Buffer): string {
  const p = line.lastIndexOf(PARENT);
  if (p === -1) return 'main';
  return line.toString('latin1', p + PARENT.length, line.indexOf(0x22, p + PARENT.length));
}

const head = (text: unknown, chars: number) =>
  typeof text === 'string' || text instanceof LazyText ? text.slice(0, chars) : '';

function blockText(b: Block | null): string {
  if (b === null || typeof b !== 'object') return '';
  if (b.type === 'text') return `${b.text}\n`;
  if (b.type === 'thinking') return `[thinking] ${b.thinking}\n`;
  if (b.type === 'tool_use') return `[tool] ${b.name} ${head(JSON.stringify(b.input), 200)}\n`;
  if (b.type !== 'tool_result') return '';
  const c = (b as { content?: unknown }).content;
  const text = Array.isArray(c) ? c.map((x) => head(x?.text, 500)).join('') : head(c, 500);
  return `[result] ${text.slice(0, 500)}\n`;
}

/** The line's value, or only its channel's id: neither when it is not a JSON object. */
function judge(line: Buffer): { value?: Record<string, unknown>; id?: string } {
  if (mode === 'parse-all') return { value: parsed(line) };
  if (mode === 'bytes') return { id: idOf(line) };
  tape.reset(1 << 14);
  const at = line[0] === 0x7b ? scanJson(line, 0, line.length, tape) : -1;
  if (at === UNDECIDED) return { value: parsed(line) };
  if (at < 0) return {};
  if (mode === 'scan-view') return { value: buildView(line as Bytes, tape, at) };
  const streamEvent = line.subarray(0, STREAM_EVENT.length).equals(STREAM_EVENT);
  return streamEvent ? { id: idOf(line) } : { value: parsed(line) };
}

function take(line: Buffer): void {
  lines++;
  const { value, id = value && parentOf(value) } = judge(line);
  if (id === undefined) return void quarantine.lines.push(line);
  const c = channel(id);
  c.lines.push(line);
  const content = (value?.message as { content?: unknown } | undefined)?.content;
  if (Array.isArray(content)) for (const b of content) c.text.push(blockText(b as Block | null));
}

function parentOf(value: Record<string, unknown>): string {
  const p = value.parent_tool_use_id;
  return typeof p === 'string' && p !== '' ? p : 'main';
}

const NL = Buffer.from('\n');

/** Writes every part, gathered by writev as subtee's files sink does. */
function writevAll(fd: number, parts: Buffer[]): void {
  for (let k = 0; k < parts.length; k += 1024) {
    const some = parts.slice(k, k + 1024);
    let total = 0;
    for (const part of some) total += part.length;
    const written = writevSync(fd, some);
    if (written < total) writeAllSync(fd, Buffer.concat(some).subarray(written));
  }
}
function flush(c: Channel): void {
  if (c.lines.length > 0) {
    const parts: Buffer[] = [];
    for (const l of c.lines) parts.push(l, NL);
    writevAll(c.jsonl, parts);
    c.lines = [];
  }
  if (c.text.length > 0) {
    writeAllSync(c.log, Buffer.from(c.text.join('')));
    c.text = [];
  }
}

let rest: Buffer | undefined;
for await (const chunk of createReadStream('', { fd: 0, highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
  const buf = rest ? Buffer.concat([rest, chunk]) : chunk;
  let start = 0;
  for (let nl = buf.indexOf(10); nl !== -1; start = nl + 1, nl = buf.indexOf(10, start))
    if (nl > start) take(buf.subarray(start, nl));
  rest = start < buf.length ? Buffer.from(buf.subarray(start)) : undefined;
  flush(quarantine);
  for (const c of channels.values()) flush(c);
}
if (rest) take(rest);
flush(quarantine);
for (const c of channels.values()) flush(c);
process.stderr.write(`${lines} lines, ${channels.size} channels\n`);
