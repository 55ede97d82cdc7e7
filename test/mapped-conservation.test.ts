import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createWriteStream, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { finished } from 'node:stream/promises';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { teeJsonl } from '../src/entry/adapters.js';
import { open } from '../src/index.js';
import { startRun } from './e2e/deep-agents.js';
import { BIN, FIXTURES, readTree, tmpDir } from './helpers/helpers.js';

// Every input line of a mapped producer's recording lands once where a user finds it: in a
// `.jsonl` file or quarantine.log byte for byte, or in a count index.json shows, so that
// `input.lines` is the lines in the folder plus `unwritten` plus `dropped`.

/** The recordings of the coding agents' CLIs under test/fixtures/other-agents, at any depth. */
function agentRecordings(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.jsonl')) found.push(path);
    }
  };
  walk(join(FIXTURES, 'other-agents'));
  return found;
}

/** A Deep Agents run's protocol events, recorded as `examples/deep-agents.mjs` records them. */
async function langGraphRecording(): Promise<string> {
  const dir = tmpDir();
  const path = join(dir, 'events.jsonl');
  const file = createWriteStream(path);
  await open(teeJsonl(await startRun(), file), { out: join(dir, 'live') }).done;
  file.end();
  await finished(file);
  return path;
}

/** The lines of a file, each without its newline (none when the file is absent). */
const linesOf = (bytes: Buffer | undefined): string[] =>
  bytes === undefined ? [] : bytes.toString('utf8').split('\n').slice(0, -1);

const run = promisify(execFile);

const isBlank = (line: string) => /^[ \t\r]*$/.test(line);

test("every input line of each mapped producer's recording is in the folder once, " +
  "and index.json's counts add up to the lines read", async () => {
  const recordings = [...agentRecordings(), await langGraphRecording()];
  const outs = recordings.map(() => join(tmpDir(), 'out'));
  // A few CLI runs at a time.
  for (let i = 0; i < recordings.length; i += 12) {
    const runs = recordings.slice(i, i + 12).map((recording, j) =>
      run(process.execPath, [BIN, '--out', outs[i + j], '-q', '--stdout', 'none', recording]),
    );
    await Promise.all(runs);
  }
  const producers = new Set<string>();
  recordings.forEach((recording, i) => {
    const name = recording.startsWith(FIXTURES) ? relative(FIXTURES, recording) : 'a Deep Agents run';
    const files = readTree(outs[i]);
    const index = JSON.parse(files.get('index.json')!.toString('utf8'));
    producers.add(index.producer);
    const read = linesOf(readFileSync(recording)).filter((line) => !isBlank(line));
    const inFolder = [...files]
      .filter(([path]) => path.endsWith('.jsonl') || path === 'quarantine.log')
      .flatMap(([, bytes]) => linesOf(bytes));
    const { lines, unwritten, dropped } = index.input;
    assert.equal(lines, read.length, `${name}: input.lines`);
    assert.equal(inFolder.length + unwritten + dropped, lines, `${name}: folder + unwritten + dropped`);
    assert.deepEqual(inFolder.sort(), read.sort(), `${name}: the folder's lines are the input's`);
  });
  assert.deepEqual([...producers].sort(), ['codex', 'copilot', 'gemini', 'langgraph', 'opencode']);
});
