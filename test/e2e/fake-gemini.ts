import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';

/**
 * A scripted stand-in for the Gemini API's `streamGenerateContent` (SSE), for running the
 * real Gemini CLI headless on loopback. Stateless like fake-api.ts: each request is answered
 * from the script named by the `SCRIPT:name:arg…` directive in the conversation's task and
 * from how many model turns it already has.
 */

export type GeminiPart =
  | { text: string }
  | { text: string; thought: true }
  | { functionCall: { name: string; args: Record<string, unknown> } };

export type GeminiReply =
  { kind: 'parts'; parts: GeminiPart[] } | { kind: 'error'; status: number; message: string };

export interface GeminiTurn {
  script: string;
  args: string[];
  /** Model turns the conversation already has. */
  turn: number;
  /** The tools this conversation is offered (a subagent is offered `complete_task`). */
  tools: Set<string>;
  /** The function responses of the latest user turn, by tool name. */
  lastResponses: Array<{ name: string; response: unknown }>;
}

const say = (text: string): GeminiReply => ({ kind: 'parts', parts: [{ text }] });
const call = (name: string, args: Record<string, unknown>): GeminiPart => ({ functionCall: { name, args } });
const shell = (command: string): GeminiPart =>
  call('run_shell_command', { command, description: 'scripted command' });

/**
 * How an agent ends its work: the main agent answers in text; a subagent must call
 * `complete_task` with its result, or the CLI reports it did not finish.
 */
function finish(t: GeminiTurn, text: string): GeminiReply {
  if (t.tools.has('complete_task'))
    return { kind: 'parts', parts: [{ text }, call('complete_task', { result: { response: text } })] };
  return say(text);
}

/** Starts one subagent per directive in the same turn, then reports once their results are in. */
function delegate(t: GeminiTurn, directives: string[], label: string): GeminiReply {
  if (t.turn === 0) {
    // `missing` asks for an agent the CLI does not have: the call itself fails.
    const agentOf = (d: string) => (d === 'missing' ? 'no_such_agent' : 'generalist');
    const calls = directives.map((d) =>
      call('invoke_agent', { agent_name: agentOf(d), prompt: `SCRIPT:${d}` }),
    );
    return { kind: 'parts', parts: [{ text: `Delegating ${directives.length} parts.` }, ...calls] };
  }
  return finish(t, `All ${directives.length} parts reported. [${label}]`);
}

export const GEMINI_SCRIPTS: Record<string, (t: GeminiTurn) => GeminiReply> = {
  /** say — one answer after a thought, no tools. */
  say: (t) => ({
    kind: 'parts',
    parts: [
      { text: 'Nothing to run.', thought: true },
      ...(finish(t, 'Plain answer from gemini.') as any).parts,
    ],
  }),
  /** shell:N — one command, then a report. */
  shell(t) {
    const n = t.args[0] ?? '1';
    if (t.turn === 0) {
      return {
        kind: 'parts',
        parts: [
          { text: 'Plan: run one command.', thought: true },
          { text: 'Running a command.' },
          shell(`echo hello-from-gemini-${n}`),
        ],
      };
    }
    return finish(t, `Command finished. [shell ${n}]`);
  },
  /** fail — one command that exits 3. */
  fail(t) {
    if (t.turn === 0)
      return {
        kind: 'parts',
        parts: [{ text: 'Running a failing command.' }, shell('echo doomed-output; exit 3')],
      };
    return finish(t, 'The command failed. [fail]');
  },
  /** leaf:NAME — a subagent that runs one command and reports. */
  leaf(t) {
    const name = t.args[0] ?? '0';
    if (t.turn === 0)
      return { kind: 'parts', parts: [{ text: `Leaf ${name} starting.` }, shell(`echo leaf-${name}-ok`)] };
    return finish(t, `Leaf ${name} report: done.`);
  },
  /** slow:SECONDS — a subagent whose one command runs that long, then reports. */
  slow(t) {
    const seconds = t.args[0] ?? '1';
    if (t.turn === 0) return { kind: 'parts', parts: [{ text: 'Slow work.' }, shell(`sleep ${seconds}`)] };
    return finish(t, `Slow ${seconds} s report: done.`);
  },
  /** broken — a subagent whose model request fails. */
  broken: () => ({ kind: 'error', status: 400, message: 'scripted failure for this subagent' }),
  /** spawn:A:B… — the main agent starts one subagent per script (`leaf.0` is `SCRIPT:leaf:0`). */
  spawn: (t) =>
    delegate(t, t.args.length ? t.args.map((c) => c.replace(/\./g, ':')) : ['leaf:0', 'leaf:1'], 'spawn'),
  /** nest:K — a chain of subagents K levels deep below this agent. */
  nest(t) {
    const depth = Number(t.args[0] ?? 0);
    if (depth <= 0) return GEMINI_SCRIPTS.leaf({ ...t, args: ['deep'] });
    return delegate(t, [`nest:${depth - 1}`], `nest ${depth}`);
  },
};

/** Picks the script for one request, or null for a request without a directive. */
export function geminiTurnOf(body: any): GeminiTurn | null {
  const contents: any[] = Array.isArray(body?.contents) ? body.contents : [];
  let directive: RegExpExecArray | null = null;
  for (const content of contents) {
    if (content?.role !== 'user' || !Array.isArray(content.parts)) continue;
    for (const part of content.parts) {
      const m =
        typeof part?.text === 'string' ? /SCRIPT:([a-z]+)((?::[A-Za-z0-9_.-]+)*)/.exec(part.text) : null;
      if (m && GEMINI_SCRIPTS[m[1]]) directive = m;
    }
  }
  if (!directive) return null;
  const tools = new Set<string>();
  for (const tool of Array.isArray(body?.tools) ? body.tools : []) {
    for (const declaration of tool?.functionDeclarations ?? []) tools.add(declaration?.name);
  }
  const last = contents[contents.length - 1];
  const lastResponses = (last?.role === 'user' && Array.isArray(last.parts) ? last.parts : [])
    .filter((p: any) => p?.functionResponse)
    .map((p: any) => ({ name: p.functionResponse.name, response: p.functionResponse.response }));
  return {
    script: directive[1],
    args: directive[2] ? directive[2].slice(1).split(':') : [],
    turn: contents.filter((c) => c?.role === 'model').length,
    tools,
    lastResponses,
  };
}

/** Tokens each reply reports, fixed so a reader can add them up. */
export const GEMINI_USAGE = {
  promptTokenCount: 100,
  candidatesTokenCount: 20,
  thoughtsTokenCount: 5,
  cachedContentTokenCount: 0,
};

function chunk(res: ServerResponse, model: string, parts: GeminiPart[], last: boolean): void {
  const u = GEMINI_USAGE;
  const data: Record<string, unknown> = {
    candidates: [{ content: { role: 'model', parts }, index: 0, ...(last ? { finishReason: 'STOP' } : {}) }],
    modelVersion: model,
  };
  if (last) {
    data.usageMetadata = {
      promptTokenCount: u.promptTokenCount,
      candidatesTokenCount: u.candidatesTokenCount,
      thoughtsTokenCount: u.thoughtsTokenCount,
      totalTokenCount: u.promptTokenCount + u.candidatesTokenCount + u.thoughtsTokenCount,
    };
  }
  res.write(`data: ${JSON.stringify(data)}\n\n`);
}

function streamReply(res: ServerResponse, model: string, parts: GeminiPart[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  // Text arrives in pieces, as the API streams it; calls and thoughts whole.
  const pieces: GeminiPart[] = [];
  for (const part of parts) {
    if ('text' in part && !('thought' in part))
      for (const piece of part.text.match(/.{1,8}/gs) ?? []) pieces.push({ text: piece });
    else pieces.push(part);
  }
  pieces.forEach((piece, index) => chunk(res, model, [piece], index === pieces.length - 1));
  if (pieces.length === 0) chunk(res, model, [{ text: '' }], true);
  res.end();
}

export interface FakeGemini {
  url: string;
  port: number;
  log: Array<{ path: string; script: string | null; turn: number | null }>;
  close(): Promise<void>;
}

export async function startFakeGemini(): Promise<FakeGemini> {
  const log: FakeGemini['log'] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0];
      let body: any = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
      } catch {
        body = {};
      }
      if (process.env.FAKE_DUMP)
        writeFileSync(
          `${process.env.FAKE_DUMP}/g-${Date.now()}-${log.length}.json`,
          JSON.stringify({ path, body }),
        );
      const m = /^\/v1beta\/models\/([^/:]+):(streamGenerateContent|generateContent|countTokens)$/.exec(path);
      if (req.method !== 'POST' || !m) {
        log.push({ path, script: null, turn: null });
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{}');
        return;
      }
      if (m[2] === 'countTokens') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"totalTokens":10}');
        return;
      }
      const t = geminiTurnOf(body);
      log.push({ path, script: t?.script ?? null, turn: t?.turn ?? null });
      const reply = t ? GEMINI_SCRIPTS[t.script](t) : say('OK');
      if (reply.kind === 'error') {
        res.writeHead(reply.status, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            error: { code: reply.status, message: reply.message, status: 'INVALID_ARGUMENT' },
          }),
        );
        return;
      }
      if (m[2] === 'generateContent') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            candidates: [{ content: { role: 'model', parts: reply.parts }, finishReason: 'STOP', index: 0 }],
          }),
        );
        return;
      }
      streamReply(res, m[1], reply.parts);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    log,
    close: async () => {
      server.closeAllConnections?.();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
