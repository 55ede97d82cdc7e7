// Exact output tokens per channel from Claude Code's own transcripts: real runs of the CLI
// against the scripted API, recorded with the transcripts it wrote (test/e2e/record-transcripts.ts),
// checked against an independent count of those files made here, line by line.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { get } from 'node:http';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, test } from 'node:test';
import { PRICE_TABLE } from '../src/model/prices.js';
import { DEFAULT_STAGES } from '../src/chain/chain.js';
import { EndedTranscripts, readTranscripts } from '../src/chain/transcripts.js';
import { open, type RunEvent, type SubagentHandle } from '../src/index.js';
import { BIN, FIXTURES, tmpDir } from './helpers/helpers.js';
import { claudeCommand, describeWithClaude } from './e2e/claude.js';
import { startSubtee } from './helpers/browser.js';

const RECORDED = join(FIXTURES, 'transcripts');
const SHAPES = ['nested-depth-3', 'binary-tree-depth-2', 'background-fanout-3', 'forwarding-off-2'];

interface Count {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  model: string;
}

/** A transcript's tokens: each assistant message once (by message id and request id). */
function countFile(path: string): Count {
  const seen = new Map<string, Count>();
  for (const text of readFileSync(path, 'utf8').split('\n')) {
    if (text === '') continue;
    const line = JSON.parse(text);
    if (line.type !== 'assistant' || line.message?.model === '<synthetic>') continue;
    const u = line.message.usage;
    seen.set(`${line.message.id} ${line.requestId}`, {
      input: u.input_tokens ?? 0,
      output: u.output_tokens ?? 0,
      cacheRead: u.cache_read_input_tokens ?? 0,
      cacheWrite: u.cache_creation_input_tokens ?? 0,
      model: line.message.model,
    });
  }
  const total: Count = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, model: '' };
  for (const c of seen.values()) {
    total.input += c.input;
    total.output += c.output;
    total.cacheRead += c.cacheRead;
    total.cacheWrite += c.cacheWrite;
    total.model = c.model;
  }
  return total;
}

/** The session folder of a recording: `config/projects/<slug>/`, and its session id. */
function sessionOf(shape: string): { project: string; session: string } {
  const projects = join(RECORDED, shape, 'config', 'projects');
  const [slug] = readdirSync(projects);
  const project = join(projects, slug);
  const file = readdirSync(project).find((f) => f.endsWith('.jsonl'))!;
  return { project, session: file.slice(0, -'.jsonl'.length) };
}

/** Per channel (null for main, else the spawn's tool_use id), the transcript's count. */
function independentCount(shape: string): Map<string | null, Count> {
  const { project, session } = sessionOf(shape);
  const counts = new Map<string | null, Count>([[null, countFile(join(project, `${session}.jsonl`))]]);
  const subagents = join(project, session, 'subagents');
  for (const name of readdirSync(subagents).filter((f) => f.endsWith('.meta.json'))) {
    const meta = JSON.parse(readFileSync(join(subagents, name), 'utf8'));
    counts.set(meta.toolUseId, countFile(join(subagents, name.replace('.meta.json', '.jsonl'))));
  }
  return counts;
}

function run(args: string[]): { index: any; stderr: string; out: string } {
  const out = join(tmpDir(), 'out');
  const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', ...args], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return { index: JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')), stderr: r.stderr, out };
}

const byId = (index: any) => new Map<string | null, any>(index.channels.map((c: any) => [c.id, c]));
const near = (a: number, b: number, label: string) =>
  assert.ok(Math.abs(a - b) < 1e-9, `${label}: ${a} vs ${b}`);

describe('exact output tokens per channel from the transcripts of real Claude Code runs', () => {
  for (const shape of SHAPES) {
    test(`${shape}: each channel's tokens are its transcript's, its dollars that count priced by the ` +
      `table`, () => {
      const counts = independentCount(shape);
      const stream = join(RECORDED, shape, 'stream.jsonl');
      const { index, stderr } = run(['--transcripts', join(RECORDED, shape, 'config'), stream]);
      const channels = byId(index);
      assert.equal(channels.size, counts.size, 'a transcript per channel');
      for (const [id, count] of counts) {
        const ch = channels.get(id);
        assert.ok(ch, `channel ${id} in index.json`);
        assert.equal(ch.cost.basis, 'exact', `${id}: basis`);
        assert.equal(ch.usage.output_tokens, count.output, `${id}: output tokens`);
        assert.equal(ch.usage.input_tokens, count.input, `${id}: input tokens`);
        // The table's rates are Claude Code's own for these runs: the count priced by them.
        const rate = PRICE_TABLE.models[count.model];
        const usd =
          (count.input * rate.input +
            count.output * rate.output +
            count.cacheRead * rate.cache_read +
            count.cacheWrite * rate.cache_write_5m) /
          1e6;
        near(ch.cost.usd, usd, `${id}: dollars`);
      }
      const result = readFileSync(stream, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
        .filter((l) => l.type === 'result')
        .at(-1);
      const sum = index.channels.reduce((s: number, c: any) => s + c.cost.usd, 0);
      near(sum + index.cost.unattributed_usd, result.total_cost_usd, 'channels + unattributed = the result');
      const bases = { exact: counts.size, estimated: 0, stream: 0, unknown: 0 };
      assert.deepEqual(index.cost.channels_by_basis, bases);
      assert.equal(index.cost.output_tokens, 'exact');
      assert.match(stderr, new RegExp(`agents' output tokens ${counts.size} exact\\)`));
      assert.doesNotMatch(stderr, /~\$/);
    });
  }

  test('without the transcripts the same runs are estimated, ' +
    'marked ~ on stderr, and differ from the count', () => {
    const shape = 'binary-tree-depth-2';
    const counts = independentCount(shape);
    const { index, stderr } = run([join(RECORDED, shape, 'stream.jsonl')]);
    const differing = index.channels.filter((c: any) => c.usage.output_tokens !== counts.get(c.id)!.output);
    assert.ok(differing.length > 0, 'the estimate is not the transcripts’ count');
    for (const c of index.channels) assert.equal(c.cost.basis, 'estimated');
    assert.match(stderr, /~\$0\.\d+/);
  });

  test('a Claude config folder and its projects folder are both accepted; the cwd is not needed', () => {
    const shape = 'nested-depth-3';
    const stream = join(RECORDED, shape, 'stream.jsonl');
    const a = run(['--transcripts', join(RECORDED, shape, 'config'), stream]).index;
    const b = run(['--transcripts', join(RECORDED, shape, 'config', 'projects'), stream]).index;
    assert.deepEqual(a.cost, b.cost);
    assert.equal(b.cost.channels_by_basis.exact, 4);
  });
});

describe("a subagent's transcript is read when it ends: the live views show its exact figures then", () => {
  for (const shape of ['binary-tree-depth-2', 'background-fanout-3']) {
    test(`${shape}: each subagent's exact output tokens in the projection right after its end line, ` +
      `before the run's end`, async () => {
      const counts = independentCount(shape);
      const stream = join(RECORDED, shape, 'stream.jsonl');
      const lines = readFileSync(stream, 'utf8').split('\n').filter(Boolean);
      const stages = DEFAULT_STAGES.map((s) =>
        s.use === 'channel-router' ? { ...s, transcripts: join(RECORDED, shape, 'config') } : { ...s },
      );
      const input = new PassThrough();
      const run = open(input, { spec: { stages, sinks: [] } });
      const handles = new Map<string, SubagentHandle>();
      const following = (async () => {
        for await (const sub of run.allSubagents) handles.set(sub.id, sub);
      })();
      const events = run.events[Symbol.asyncIterator]();
      const seen: string[] = [];
      try {
        for (let i = 0; i < lines.length; i++) {
          input.write(`${lines[i]}\n`);
          // Fed one line at a time: the next is written once the chain has routed this one.
          let event: RunEvent;
          do event = (await events.next()).value as RunEvent;
          while (event.lineNo < i + 1);
          if (event.kind !== 'line') continue;
          for (const change of event.changes) {
            if (change.type !== 'status' || change.channel.id === null) continue;
            const id = change.channel.id;
            const outcome = await handles.get(id)!.outcome;
            assert.ok(i < lines.length - 1, `${id} ends before the run's last line`);
            assert.equal(outcome.usage.output_tokens, counts.get(id)!.output, `${id}: output tokens live`);
            assert.equal(outcome.cost.outputTokens, 'exact', `${id}: basis live`);
            seen.push(id);
          }
        }
      } finally {
        // A failed check ends the input too, and lets the run go on to its end.
        input.end();
        await events.return?.();
      }
      await following;
      const index = await run.done;
      assert.deepEqual(seen.sort(), [...counts.keys()].filter((id) => id !== null).sort());
      // What the run's end reads again agrees: the same figures, no warning.
      for (const c of index.channels) assert.equal(c.usage.output_tokens, counts.get(c.id)!.output);
      assert.deepEqual(
        index.warnings.filter((w: { code: string }) => w.code.startsWith('TRANSCRIPT_')),
        [],
      );
    });
  }
});

describe('a transcript taken when its subagent ended gives way to a later line of that subagent', () => {
  const shape = 'binary-tree-depth-2';

  /** The recording with one more message of a subagent, before or after the line that ends it. */
  function withExtraLine(where: 'before' | 'after'): { stream: string; id: string } {
    const lines = readFileSync(join(RECORDED, shape, 'stream.jsonl'), 'utf8').split('\n').filter(Boolean);
    const parsed = lines.map((l) => JSON.parse(l));
    // The first spawn's end: the tool_result of a spawn id some assistant line is the child of.
    const children = new Set(parsed.map((v) => v.parent_tool_use_id).filter(Boolean));
    const end = parsed.findIndex(
      (v) =>
        v.type === 'user' &&
        Array.isArray(v.message?.content) &&
        v.message.content.some((c: any) => c.type === 'tool_result' && children.has(c.tool_use_id)),
    );
    const id = parsed[end].message.content.find((c: any) => c.type === 'tool_result').tool_use_id;
    const own = parsed
      .slice(0, end)
      .filter((v) => v.type === 'assistant' && v.parent_tool_use_id === id)
      .at(-1);
    const usage = { input_tokens: 10, output_tokens: 1 };
    const extra = { ...own, message: { ...own.message, id: 'msg_extra', usage } };
    lines.splice(where === 'before' ? end : end + 1, 0, JSON.stringify(extra));
    const stream = join(tmpDir(), 'stream.jsonl');
    writeFileSync(stream, `${lines.join('\n')}\n`);
    return { stream, id };
  }

  test("a usage line after the end: the stream's figures and TRANSCRIPT_DISAGREES, as before the end", () => {
    const config = join(RECORDED, shape, 'config');
    const counts = independentCount(shape);
    const runs = (['before', 'after'] as const).map((where) => {
      const { stream, id } = withExtraLine(where);
      return { id, index: run(['--transcripts', config, stream]).index };
    });
    for (const { id, index } of runs) {
      const channel = byId(index).get(id);
      assert.equal(channel.usage.input_tokens, counts.get(id)!.input + 10, 'the stream counts both messages');
      assert.notEqual(channel.cost.basis, 'exact');
      const disagrees = index.warnings.filter((w: any) => w.code === 'TRANSCRIPT_DISAGREES');
      assert.equal(disagrees.length, 1);
      assert.match(disagrees[0].message, /2 messages, the stream 3/);
      // The channels add up to the run's figures per model.
      const models = Object.values(index.cost.models) as any[];
      const sum = (f: (c: any) => number) => index.channels.reduce((a: number, c: any) => a + f(c), 0);
      assert.equal(sum((c) => c.usage.input_tokens), models.reduce((a, m) => a + m.input_tokens, 0));
      near(sum((c) => c.cost.usd), models.reduce((a, m) => a + m.usd, 0), 'dollars');
    }
    assert.deepEqual(runs[1].index.cost, runs[0].index.cost);
  });
});

describe('the transcripts read as subagents end: bounded work, one bad file spoils nothing', () => {
  const shape = 'binary-tree-depth-2';

  test('a session not found is searched for again only once the projects folder changed', () => {
    const c = copyOf(shape);
    const projects = join(c.config, 'projects');
    const away = join(tmpDir(), 'away');
    renameSync(c.project, away);
    for (let i = 0; i < 50; i++) mkdirSync(join(projects, `other-${i}`));
    const ended = new EndedTranscripts({ dir: c.config });
    const agent = firstAgent(c.subagents.replace(c.project, away));
    for (let i = 0; i < 300; i++) assert.equal(ended.channel(`toolu_${i}`, c.session, null), null);
    assert.equal(ended.listings.projects, 1, 'one search for 300 ends');
    renameSync(away, c.project);
    assert.notEqual(ended.channel(agent.toolUseId, c.session, null), null, 'found once it is there');
    assert.equal(ended.listings.projects, 2);
  });

  test('an id with no meta file lists the subagents folder again only once the folder changed', () => {
    const c = copyOf(shape);
    const agent = firstAgent(c.subagents);
    const meta = join(c.subagents, `${agent.name}.meta.json`);
    const aside = join(tmpDir(), 'meta.json');
    renameSync(meta, aside);
    const ended = new EndedTranscripts({ dir: c.config });
    for (let i = 0; i < 300; i++) assert.equal(ended.channel(agent.toolUseId, c.session, null), null);
    assert.equal(ended.listings.subagents, 1, 'one listing for 300 ends');
    renameSync(aside, meta);
    const read = ended.channel(agent.toolUseId, c.session, null);
    assert.notEqual(read, null, 'read once its meta file is there');
    assert.equal(ended.listings.subagents, 2);
  });

  test('a meta file that does not parse: the others read as they end, the end names it', () => {
    const c = copyOf(shape);
    writeFileSync(join(c.subagents, 'agent-a0.meta.json'), '{"toolUseId":');
    const ids = [...independentCount(shape).keys()].filter((id): id is string => id !== null);
    const ended = new EndedTranscripts({ dir: c.config });
    for (const id of ids) assert.notEqual(ended.channel(id, c.session, null), null, id);
    const found = readTranscripts({ dir: c.config, sessionId: c.session, cwd: null });
    assert.deepEqual([...found.subagents.keys()].sort(), ids.sort());
    assert.deepEqual(found.problems, [`${join(c.subagents, 'agent-a0.meta.json')}: not JSON`]);
  });

  test('past maxSubagents, the reads as subagents end and at the end read the same subagents', () => {
    const c = copyOf(shape);
    const ids = [...independentCount(shape).keys()].filter((id): id is string => id !== null);
    // More subagents than the limit, more than one past it.
    const agent = firstAgent(c.subagents);
    for (let k = 0; k < 20; k++) {
      cpSync(join(c.subagents, `${agent.name}.jsonl`), join(c.subagents, `agent-x${k}.jsonl`));
      writeFileSync(join(c.subagents, `agent-x${k}.meta.json`), JSON.stringify({ toolUseId: `toolu_x${k}` }));
      ids.push(`toolu_x${k}`);
    }
    const maxSubagents = 10;
    const ended = new EndedTranscripts({ dir: c.config, maxSubagents });
    const found = readTranscripts({ dir: c.config, sessionId: c.session, cwd: null, maxSubagents });
    assert.equal(found.subagents.size, maxSubagents);
    for (const id of ids)
      assert.equal(ended.channel(id, c.session, null) !== null, found.subagents.has(id), id);
  });
});

/** A copy of a recording's config folder to damage. */
function copyOf(shape: string): { config: string; project: string; session: string; subagents: string } {
  const config = join(tmpDir(), 'config');
  cpSync(join(RECORDED, shape, 'config'), config, { recursive: true });
  const { project, session } = sessionOf(shape);
  const mine = join(config, 'projects', project.split('/').at(-1)!);
  return { config, project: mine, session, subagents: join(mine, session, 'subagents') };
}

function firstAgent(subagents: string): { name: string; toolUseId: string } {
  const meta = readdirSync(subagents).find((f) => f.endsWith('.meta.json'))!;
  const toolUseId = JSON.parse(readFileSync(join(subagents, meta), 'utf8')).toolUseId;
  return { name: meta.replace('.meta.json', ''), toolUseId };
}

describe('a transcript that is missing, partial, disagrees or is a link is named, never mixed in', () => {
  const shape = 'binary-tree-depth-2';
  const stream = join(RECORDED, shape, 'stream.jsonl');
  const warning = (index: any, code: string) => index.warnings.find((w: any) => w.code === code);

  test('missing: TRANSCRIPT_MISSING, that channel stays estimated, the others exact', () => {
    const c = copyOf(shape);
    const agent = firstAgent(c.subagents);
    rmSync(join(c.subagents, `${agent.name}.meta.json`));
    const { index } = run(['--transcripts', c.config, stream]);
    assert.match(warning(index, 'TRANSCRIPT_MISSING').message, /for 1 channel\(s\) with usage/);
    const channels = byId(index);
    assert.equal(channels.get(agent.toolUseId).cost.basis, 'estimated');
    assert.equal(index.cost.channels_by_basis.exact, 6);
  });

  test('cut short (the last line half written): TRANSCRIPT_PARTIAL, the stream’s figures stand', () => {
    const c = copyOf(shape);
    const agent = firstAgent(c.subagents);
    const file = join(c.subagents, `${agent.name}.jsonl`);
    const text = readFileSync(file, 'utf8');
    writeFileSync(file, text.slice(0, text.length - 40));
    const { index } = run(['--transcripts', c.config, stream]);
    assert.match(warning(index, 'TRANSCRIPT_PARTIAL').message, /ends in a line cut short/);
    assert.equal(byId(index).get(agent.toolUseId).cost.basis, 'estimated');
  });

  test('another message count: TRANSCRIPT_DISAGREES naming both figures, the stream’s stand', () => {
    const c = copyOf(shape);
    const agent = firstAgent(c.subagents);
    const file = join(c.subagents, `${agent.name}.jsonl`);
    const lines = readFileSync(file, 'utf8').split('\n');
    let last = lines.length - 1;
    while (!lines[last].includes('"type":"assistant"')) last--;
    writeFileSync(file, lines.filter((_, i) => i !== last).join('\n'));
    const { index } = run(['--transcripts', c.config, stream]);
    assert.match(warning(index, 'TRANSCRIPT_DISAGREES').message, /1 messages, the stream 2/);
    assert.equal(byId(index).get(agent.toolUseId).cost.basis, 'estimated');
  });

  test('impossible figures in a transcript (negative, huge): TRANSCRIPT_PARTIAL, nothing negative', () => {
    for (const figure of ['-40', '1e308', '99999999999']) {
      const c = copyOf(shape);
      const agent = firstAgent(c.subagents);
      const file = join(c.subagents, `${agent.name}.jsonl`);
      const text = readFileSync(file, 'utf8');
      writeFileSync(file, text.replaceAll('"output_tokens":30', `"output_tokens":${figure}`));
      const { index } = run(['--transcripts', c.config, stream]);
      assert.match(warning(index, 'TRANSCRIPT_PARTIAL').message, /impossible usage\.output_tokens/, figure);
      const ch = byId(index).get(agent.toolUseId);
      assert.equal(ch.cost.basis, 'estimated');
      assert.ok(ch.usage.output_tokens >= 0 && ch.cost.usd >= 0);
    }
  });

  test('links are refused: a linked transcript, a linked subagents folder, a pipe', () => {
    const c = copyOf(shape);
    const agent = firstAgent(c.subagents);
    const file = join(c.subagents, `${agent.name}.jsonl`);
    const elsewhere = join(tmpDir(), 'elsewhere.jsonl');
    renameSync(file, elsewhere);
    symlinkSync(elsewhere, file);
    let { index } = run(['--transcripts', c.config, stream]);
    assert.match(warning(index, 'TRANSCRIPT_UNREADABLE').message, /a link, not followed/);
    assert.equal(byId(index).get(agent.toolUseId).cost.basis, 'estimated');

    const d = copyOf(shape);
    const folder = join(tmpDir(), 'agents-elsewhere');
    renameSync(d.subagents, folder);
    symlinkSync(folder, d.subagents);
    ({ index } = run(['--transcripts', d.config, stream]));
    assert.match(warning(index, 'TRANSCRIPT_UNREADABLE').message, /subagents: a link, not followed/);
    assert.equal(index.cost.channels_by_basis.exact, 1, 'main only');

    const e = copyOf(shape);
    const fifoAgent = firstAgent(e.subagents);
    const pipe = join(e.subagents, `${fifoAgent.name}.jsonl`);
    rmSync(pipe);
    assert.equal(spawnSync('mkfifo', [pipe]).status, 0);
    ({ index } = run(['--transcripts', e.config, stream]));
    assert.match(warning(index, 'TRANSCRIPT_UNREADABLE').message, /not a regular file/);
  });

  test('a stray subagent transcript is named TRANSCRIPT_UNMATCHED and counted to no channel', () => {
    const c = copyOf(shape);
    const agent = firstAgent(c.subagents);
    writeFileSync(join(c.subagents, 'agent-stray.meta.json'), JSON.stringify({ toolUseId: 'toolu_stray' }));
    cpSync(join(c.subagents, `${agent.name}.jsonl`), join(c.subagents, 'agent-stray.jsonl'));
    const { index } = run(['--transcripts', c.config, stream]);
    assert.match(warning(index, 'TRANSCRIPT_UNMATCHED').message, /toolu_stray/);
    assert.equal(index.channels.length, 7);
  });

  test('no transcript of the session at all: one TRANSCRIPT_UNREADABLE line, every channel estimated', () => {
    const empty = join(tmpDir(), 'empty-config');
    mkdirSync(join(empty, 'projects'), { recursive: true });
    const { index, stderr } = run(['--transcripts', empty, stream]);
    assert.match(warning(index, 'TRANSCRIPT_UNREADABLE').message, /no transcript of session/);
    assert.equal(index.cost.channels_by_basis.estimated, 7);
    assert.equal(stderr.split('\n').filter((l) => l.includes('TRANSCRIPT')).length, 1);
  });
});

/**
 * ccusage (20.0.24, which has a linux-x64 build) reads the same transcripts: a second witness
 * of each session's totals. Its offline price table lacks the models these runs used, so it
 * witnesses the tokens; the dollars are Claude Code's own result line's (checked above).
 */
function ccusage(config: string): { totals: any } | string {
  const r = spawnSync(
    'npx',
    // Its linux-x64 build is an optional dependency, which this repository's .npmrc leaves out.
    ['-y', '--include=optional', '--prefer-offline', 'ccusage@20.0.24', 'claude', 'session', '--offline',
      '--json', '--breakdown'],
    { encoding: 'utf8', timeout: 180_000, env: { ...process.env, CLAUDE_CONFIG_DIR: config } },
  );
  const why = r.error?.message ?? r.stderr.trim().split('\n')[0];
  if (r.status !== 0) return `ccusage 20.0.24 cannot run here: ${why}`;
  return JSON.parse(r.stdout);
}

describe('ccusage as a second witness', () => {
  for (const shape of SHAPES) {
    test(`${shape}: ccusage's session totals equal the channels' exact tokens`, (t) => {
      const witness = ccusage(join(RECORDED, shape, 'config'));
      if (typeof witness === 'string') return t.skip(witness);
      const stream = join(RECORDED, shape, 'stream.jsonl');
      const { index } = run(['--transcripts', join(RECORDED, shape, 'config'), stream]);
      const sum = (k: string) => index.channels.reduce((s: number, c: any) => s + (c.usage[k] ?? 0), 0);
      assert.equal(witness.totals.inputTokens, sum('input_tokens'));
      assert.equal(witness.totals.outputTokens, sum('output_tokens'));
      assert.equal(witness.totals.cacheReadTokens, sum('cache_read_input_tokens'));
    });
  }
});

/** The count of a config folder's one session, per channel (as independentCount, for a live folder). */
function countConfig(config: string): Map<string | null, Count> {
  const projects = join(config, 'projects');
  const [slug] = readdirSync(projects);
  const project = join(projects, slug);
  const session = readdirSync(project).find((f) => f.endsWith('.jsonl'))!.slice(0, -'.jsonl'.length);
  const counts = new Map<string | null, Count>([[null, countFile(join(project, `${session}.jsonl`))]]);
  const subagents = join(project, session, 'subagents');
  for (const name of readdirSync(subagents).filter((f) => f.endsWith('.meta.json'))) {
    const meta = JSON.parse(readFileSync(join(subagents, name), 'utf8'));
    counts.set(meta.toolUseId, countFile(join(subagents, name.replace('.meta.json', '.jsonl'))));
  }
  return counts;
}

describeWithClaude('subtee run finds Claude Code’s transcripts by itself', (apiUrl) => {
  for (const where of ['CLAUDE_CONFIG_DIR', '~/.claude'] as const) {
    test(`from ${where}, the session id and the command's cwd: every channel exact`, async () => {
      const config = join(tmpDir(), 'claude-config');
      const { argv, env, cleanup } = claudeCommand({
        prompt: 'SCRIPT:tree:2',
        apiUrl: apiUrl(),
        extraEnv: where === 'CLAUDE_CONFIG_DIR' ? { CLAUDE_CONFIG_DIR: config } : {},
      });
      try {
        const out = join(tmpDir(), 'out');
        const child = spawn(process.execPath, [BIN, 'run', '--out', out, '--stdout', 'none', '--', ...argv], {
          env,
          cwd: env.SUBTEE_E2E_CWD,
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let stderr = '';
        child.stderr.on('data', (d: Buffer) => (stderr += d));
        const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
        assert.equal(code, 0, stderr);
        const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
        const counts = countConfig(where === 'CLAUDE_CONFIG_DIR' ? config : join(env.HOME!, '.claude'));
        assert.equal(counts.size, 7);
        assert.deepEqual(index.cost.channels_by_basis, { exact: 7, estimated: 0, stream: 0, unknown: 0 });
        for (const c of index.channels)
          assert.equal(c.usage.output_tokens, counts.get(c.id)!.output, String(c.id));
        assert.doesNotMatch(stderr, /TRANSCRIPT_/);
      } finally {
        cleanup();
      }
    });
  }
});

test('a stream that states no usage (nothing answered yet) reads no transcript and warns of none', () => {
  const input = join(tmpDir(), 'quiet.jsonl');
  writeFileSync(input, `${JSON.stringify({ type: 'user', message: { role: 'user', content: 'hi' } })}\n`);
  const empty = join(tmpDir(), 'empty-config');
  mkdirSync(join(empty, 'projects'), { recursive: true });
  const { index, stderr } = run(['--transcripts', empty, input]);
  assert.doesNotMatch(stderr, /TRANSCRIPT_/);
  assert.equal(index.warnings.filter((w: any) => w.code.startsWith('TRANSCRIPT_')).length, 0);
  // With usage in the stream, the same folder is looked in and named.
  const used = join(tmpDir(), 'used.jsonl');
  const message = { id: 'm1', model: 'claude-opus-5-5', content: [], usage: { input_tokens: 3 } };
  writeFileSync(used, `${JSON.stringify({ type: 'assistant', message, parent_tool_use_id: null })}\n`);
  assert.match(
    run(['--transcripts', empty, used]).stderr,
    /TRANSCRIPT_UNREADABLE: .*the stream states no session id/,
  );
});

test("transcripts are read only from Claude Code's stream: under subtee run behind a wrapper, a " +
  'Codex or Gemini CLI stream reads none and warns of none', () => {
  const dir = tmpDir();
  const config = join(dir, 'claude-config');
  mkdirSync(join(config, 'projects'), { recursive: true });
  // A command of no known agent's name (as npx, env or a script would be): it may be Claude Code.
  const wrapper = join(dir, 'agent-wrapper.sh');
  writeFileSync(wrapper, '#!/bin/sh\ncat "$1"\n');
  chmodSync(wrapper, 0o755);
  const runWrapped = (file: string) => {
    const out = join(dir, `out-${Math.random().toString(36).slice(2)}`);
    const argv = [BIN, 'run', '--out', out, '--stdout', 'none', '-q', '--', wrapper, file];
    const r = spawnSync(process.execPath, argv, {
      encoding: 'utf8',
      env: { ...process.env, CLAUDE_CONFIG_DIR: config },
    });
    assert.equal(r.status, 0, r.stderr);
    return { stderr: r.stderr, index: JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')) };
  };
  for (const [producer, file] of [
    ['codex', 'codex/shell.jsonl'],
    ['codex', 'codex/two-subagents.jsonl'],
    ['gemini', 'gemini/shell.jsonl'],
    ['gemini', 'gemini/two-subagents.jsonl'],
  ]) {
    const { stderr, index } = runWrapped(join(FIXTURES, 'other-agents', file));
    assert.equal(index.producer, producer);
    assert.ok(index.cost.channels_by_basis.stream + index.cost.channels_by_basis.estimated > 0, file);
    assert.doesNotMatch(stderr, /TRANSCRIPT_/, file);
    assert.deepEqual(index.warnings.filter((w: any) => w.code.startsWith('TRANSCRIPT_')), [], file);
  }
  // The same wrapper printing Claude Code's stream: its transcripts are looked for, and named.
  const claude = runWrapped(join(FIXTURES, 'nested-depth-3.jsonl'));
  assert.equal(claude.index.producer, 'claude');
  assert.match(claude.stderr, /warning TRANSCRIPT_UNREADABLE: transcripts in .*no transcript of session/);
  // --transcripts given on a pipe: a Codex stream reads none of them either.
  const piped = spawnSync(
    process.execPath,
    [BIN, '--out', join(dir, 'piped'), '--stdout', 'none', '-q', '--transcripts', config],
    { input: readFileSync(join(FIXTURES, 'other-agents', 'codex', 'shell.jsonl')), encoding: 'utf8' },
  );
  assert.equal(piped.status, 0, piped.stderr);
  assert.doesNotMatch(piped.stderr, /TRANSCRIPT_/);
});

/**
 * The live page's server-sent events, read until the run ends: each channel's latest fields.
 * `connected` once the server answered (then the run may be fed).
 */
function liveChannels(url: string): { connected: Promise<void>; channels: Promise<Map<string | null, any>> } {
  let connected!: () => void;
  const ready = new Promise<void>((r) => (connected = r));
  const channels = new Promise<Map<string | null, any>>((resolve, reject) => {
    const latest = new Map<string | null, any>();
    get(new URL('events', url), (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        assert.match(text, /^event: end$/m, 'the page heard the run end');
        for (const block of text.split('\n\n')) {
          if (!/^event: channel$/m.test(block)) continue;
          const c = JSON.parse(/^data: (.*)$/m.exec(block)![1]);
          latest.set(c.id, c);
        }
        resolve(latest);
      });
      connected();
    }).on('error', reject);
  });
  return { connected: ready, channels };
}

describe('every view shows the same figures', () => {
  for (const shape of SHAPES) {
    test(`${shape}: the live page, pino, the summary and index.json show each channel's tokens`, async () => {
      const counts = independentCount(shape);
      const out = join(tmpDir(), 'out');
      const pino = join(tmpDir(), 'events.pino.log');
      const s = startSubtee([
        '--out', out, '--stdout', 'none', '--serve', '127.0.0.1:0',
        '--transcripts', join(RECORDED, shape, 'config'), `--pino=${pino}`,
      ]);
      const live = liveChannels(await s.url());
      await live.connected;
      s.child.stdin!.end(readFileSync(join(RECORDED, shape, 'stream.jsonl')));
      const [page, code] = await Promise.all([live.channels, s.closed]);
      assert.equal(code, 0, s.stderr());
      const index = byId(JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')));
      // pino: each channel's last status event.
      const status = new Map<string | null, any>();
      for (const text of readFileSync(pino, 'utf8').split('\n').filter(Boolean)) {
        const e = JSON.parse(text);
        if (e.kind === 'status') status.set(e.channel === 'main' ? null : e.channel, e);
      }
      // The summary's tree: `tokens N` is input plus output, one line per channel.
      const summary = s.stderr().split('\n').filter((l) => /  lines \d+  tokens \d+/.test(l));
      assert.equal(summary.length, counts.size, s.stderr());
      const summaryTokens = summary.map((l) => Number(/tokens (\d+)/.exec(l)![1])).sort((a, b) => a - b);
      const countTokens = [...counts.values()].map((c) => c.input + c.output).sort((a, b) => a - b);
      assert.deepEqual(summaryTokens, countTokens, 'the summary: input plus output tokens per channel');
      assert.equal(page.size, counts.size, 'the live page has every channel');
      for (const [id, count] of counts) {
        assert.equal(index.get(id).usage.output_tokens, count.output, `${id}: index.json`);
        assert.equal(page.get(id).usage.output, count.output, `${id}: the live page`);
        // pino tells a subagent's end (main's status is the run's, told by no event).
        if (id === null) continue;
        assert.equal(status.get(id)?.output_tokens, count.output, `${id}: pino's status event`);
      }
      assert.equal(status.size, counts.size - 1, 'a pino status event per subagent');
    });
  }
});
