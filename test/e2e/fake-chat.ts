import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A scripted stand-in for an OpenAI-compatible Chat Completions API, for running the real
 * GitHub Copilot CLI and opencode headless on loopback. Stateless like fake-api.ts: each request
 * is answered from the script named by a directive (`CHAT:name:arg…`) in the conversation's
 * first user message and from how many assistant turns the conversation already has, so
 * concurrent subagents need no coordination. A request without tools (opencode's session
 * title) gets a short plain answer.
 */

export interface ToolCall {
  /** What the call does, whichever CLI asks: the server names it after the CLI's own tools. */
  kind: 'shell' | 'spawn';
  /** The shell command, or the child's prompt. */
  text: string;
  description: string;
}

export type ChatReply =
  { kind: 'message'; text: string; calls: ToolCall[] } | { kind: 'error'; status: number; message: string };

export interface ChatTurn {
  /** The whole directive, `CHAT:name:arg…`. */
  directive: string;
  script: string;
  args: string[];
  /** Assistant turns the conversation already has. */
  turn: number;
  /** The text of the last tool result, for scripts that report it. */
  lastTool: string;
  /** Whether the CLI offers this agent a tool that starts a subagent (`task`). */
  canSpawn: boolean;
}

const say = (text: string, calls: ToolCall[] = []): ChatReply => ({ kind: 'message', text, calls });
const shell = (command: string): ToolCall => ({ kind: 'shell', text: command, description: 'run a command' });
const spawnCall = (prompt: string, description: string): ToolCall => ({
  kind: 'spawn',
  text: prompt,
  description,
});

/** A subagent that runs one command and reports. */
function leaf(t: ChatTurn, name: string): ChatReply {
  if (t.turn === 0) return say(`Leaf ${name}: checking.`, [shell(`echo leaf-${name}`)]);
  return say(`Leaf ${name} report: done.`);
}

export const CHAT_SCRIPTS: Record<string, (t: ChatTurn) => ChatReply> = {
  /** plain — one answer, no tools. */
  plain: () => say('The answer is 42. [plain]'),
  /** shell — one command, then a report of its output. */
  shell(t) {
    if (t.turn === 0) return say('Running a command.', [shell('echo hello-from-shell')]);
    return say(`Command finished: ${t.lastTool.split('\n')[0].slice(0, 80)} [shell]`);
  },
  /** failcmd — one command that exits 3, then a report. */
  failcmd(t) {
    if (t.turn === 0) return say('Running a command that fails.', [shell('echo about-to-fail; exit 3')]);
    return say('The command failed as expected. [failcmd]');
  },
  /** spawn:N — N subagents at once, each running a command. */
  spawn(t) {
    const n = Number(t.args[0] ?? 2);
    if (t.turn === 0) {
      const calls = Array.from({ length: n }, (_, i) => spawnCall(`CHAT:leaf:${i}`, `part ${i}`));
      return say(`Delegating ${n} parts.`, calls);
    }
    return say(`All ${n} parts reported. [spawn]`);
  },
  leaf: (t) => leaf(t, t.args[0] ?? 'x'),
  /** nest:K — a chain of subagents K levels deep below this agent. */
  nest(t) {
    const k = Number(t.args[0] ?? 0);
    if (k <= 0) return leaf(t, 'bottom');
    // A CLI that gives subagents no spawning tool ends the chain here.
    if (!t.canSpawn) return leaf(t, `level-${k}-cannot-spawn`);
    if (t.turn === 0)
      return say(`Level ${k}: delegating deeper.`, [spawnCall(`CHAT:nest:${k - 1}`, `level ${k - 1}`)]);
    return say(`Level ${k} report: done.`);
  },
  /** failsub — one subagent whose model requests fail beside one that completes. */
  failsub(t) {
    if (t.turn === 0)
      return say('Two parts, one doomed.', [
        spawnCall('CHAT:doomed', 'doomed part'),
        spawnCall('CHAT:leaf:ok', 'healthy part'),
      ]);
    return say('One part failed, one reported. [failsub]');
  },
  doomed: () => ({ kind: 'error', status: 400, message: 'scripted failure for this subagent' }),
  /** printer:S — one command that prints a line a second for S seconds, then a report. */
  printer(t) {
    const seconds = Number(t.args[0] ?? 5);
    if (t.turn === 0)
      return say(`Printing for ${seconds} s.`, [
        shell(`for i in $(seq 1 ${seconds}); do echo tick-$i; sleep 1; done`),
      ]);
    return say('Printer report: the command is still printing.');
  },
  /**
   * latesub:S:W — a subagent whose command prints for S seconds (past Copilot's 30 s wait for
   * a sync command), while main, once the subagent reported, runs a command of W seconds.
   */
  latesub(t) {
    const [printSeconds = '45', waitSeconds = '20'] = t.args;
    const printer = spawnCall(`CHAT:printer:${printSeconds}`, 'printer');
    if (t.turn === 0) return say('One printing part.', [printer]);
    if (t.turn === 1) return say('Waiting for the printer.', [shell(`sleep ${waitSeconds}; echo waited`)]);
    return say('The printer reported. [latesub]');
  },
  /** slowsub:S — one subagent whose command is silent for S seconds, then a report. */
  slowsub(t) {
    const slow = spawnCall(`CHAT:longcmd:${t.args[0] ?? 10}`, 'slow part');
    if (t.turn === 0) return say('One slow part.', [slow]);
    return say('The slow part reported. [slowsub]');
  },
  /** longcmd:S — one command silent for S seconds, then a report. */
  longcmd(t) {
    if (t.turn === 0) return say('Running a long command.', [shell(`sleep ${t.args[0] ?? 60}; echo slept`)]);
    return say('The long command finished. [longcmd]');
  },
};

/** The scenarios every Chat Completions CLI runs, by fixture name. */
export const CHAT_SCENARIOS = [
  { name: 'plain', prompt: 'CHAT:plain' },
  { name: 'shell', prompt: 'CHAT:shell' },
  { name: 'spawn-2', prompt: 'CHAT:spawn:2' },
  { name: 'nested-2', prompt: 'CHAT:nest:2' },
  { name: 'failing-command', prompt: 'CHAT:failcmd' },
  { name: 'failing-subagent', prompt: 'CHAT:failsub' },
] as const;

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((part: any) => (typeof part?.text === 'string' ? part.text : '')).join('\n');
}

/**
 * Scenarios about time and interruption, each for one CLI: recorded by `npm run record` and
 * read back from their recordings. `killOn`: the recorder kills the CLI's process group
 * (SIGKILL) once its output matches, as a CI job's timeout or an OOM kill would.
 */
export const TIMED_CHAT_SCENARIOS: ReadonlyArray<{
  cli: 'copilot' | 'opencode';
  name: string;
  prompt: string;
  killOn?: RegExp;
}> = [
  { cli: 'copilot', name: 'late-subagent-output', prompt: 'CHAT:latesub:45:20' },
  { cli: 'opencode', name: 'killed-mid-step', prompt: 'CHAT:longcmd:60', killOn: /"type":"text"/ },
];

/** Picks the script for one request, or null for side requests (titles, summaries…). */
export function chatTurnOf(body: any): ChatTurn | null {
  const messages: any[] = Array.isArray(body?.messages) ? body.messages : [];
  const tools: any[] = Array.isArray(body?.tools) ? body.tools : [];
  const first = messages.find((m) => m?.role === 'user');
  if (!first || tools.length === 0) return null;
  const match = /CHAT:([a-z]+)((?::[A-Za-z0-9_.-]+)*)/.exec(textOf(first.content));
  if (!match || !CHAT_SCRIPTS[match[1]]) return null;
  const results = messages.filter((m) => m?.role === 'tool');
  return {
    directive: match[0],
    script: match[1],
    args: match[2] ? match[2].slice(1).split(':') : [],
    turn: messages.filter((m) => m?.role === 'assistant').length,
    lastTool: textOf(results[results.length - 1]?.content),
    canSpawn: tools.some((tool) => tool?.function?.name === 'task'),
  };
}

/** The arguments of a call, shaped for the tool the CLI declared (its own names and fields). */
function toolArguments(call: ToolCall, tools: any[]): { name: string; args: Record<string, unknown> } {
  const names = new Set(tools.map((tool) => tool?.function?.name));
  if (call.kind === 'shell')
    return {
      name: names.has('bash') ? 'bash' : 'shell',
      args: { command: call.text, description: call.description },
    };
  const task = tools.find((tool) => tool?.function?.name === 'task');
  const fields = Object.keys(task?.function?.parameters?.properties ?? {});
  const name = call.description.replace(/[^a-z0-9]/gi, '');
  // Copilot's task: name, description, prompt, agent_type, mode;
  // opencode's: description, prompt, subagent_type.
  if (fields.includes('agent_type'))
    return {
      name: 'task',
      args: {
        name,
        description: call.description,
        prompt: call.text,
        agent_type: 'general-purpose',
        mode: 'sync',
      },
    };
  return {
    name: 'task',
    args: { description: call.description, prompt: call.text, subagent_type: 'general' },
  };
}

/** A fixed creation time: the answers do not depend on the clock. */
const CREATED = 1796000000;
let ids = 0;
const nextId = (prefix: string) => `${prefix}-${++ids}`;

/**
 * Token counts per answer, different per turn and per answer size, so a sum that counts a
 * turn twice or misses one is seen.
 */
export function usageOf(turn: ChatTurn | null, reply: ChatReply & { kind: 'message' }) {
  const prompt = 100 + 7 * (turn?.turn ?? 0) + (turn ? 0 : 3);
  const completion = 10 + (reply.text.length % 13) + 11 * reply.calls.length;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

function chunk(res: ServerResponse, id: string, model: string, body: Record<string, unknown>): void {
  res.write(
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: CREATED, model, ...body })}\n\n`,
  );
}

function streamReply(
  res: ServerResponse,
  model: string,
  turn: ChatTurn | null,
  reply: ChatReply & { kind: 'message' },
  tools: any[],
): void {
  const id = nextId('chatcmpl');
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  chunk(res, id, model, {
    choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }],
  });
  for (const piece of reply.text.match(/.{1,12}/gs) ?? [])
    chunk(res, id, model, { choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] });
  reply.calls.forEach((call, index) => {
    const { name, args } = toolArguments(call, tools);
    const json = JSON.stringify(args);
    chunk(res, id, model, {
      choices: [
        {
          index: 0,
          delta: {
            tool_calls: [{ index, id: nextId('call'), type: 'function', function: { name, arguments: '' } }],
          },
          finish_reason: null,
        },
      ],
    });
    for (let at = 0; at < json.length; at += 24) {
      chunk(res, id, model, {
        choices: [
          {
            index: 0,
            delta: { tool_calls: [{ index, function: { arguments: json.slice(at, at + 24) } }] },
            finish_reason: null,
          },
        ],
      });
    }
  });
  chunk(res, id, model, {
    choices: [{ index: 0, delta: {}, finish_reason: reply.calls.length > 0 ? 'tool_calls' : 'stop' }],
  });
  chunk(res, id, model, { choices: [], usage: usageOf(turn, reply) });
  res.write('data: [DONE]\n\n');
  res.end();
}

function jsonReply(
  res: ServerResponse,
  model: string,
  turn: ChatTurn | null,
  reply: ChatReply & { kind: 'message' },
): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({
      id: nextId('chatcmpl'),
      object: 'chat.completion',
      created: CREATED,
      model,
      choices: [{ index: 0, message: { role: 'assistant', content: reply.text }, finish_reason: 'stop' }],
      usage: usageOf(turn, reply),
    }),
  );
}

export interface ChatRequestLog {
  path: string;
  /** The directive of the conversation (`CHAT:leaf:0`), null for side requests. */
  directive: string | null;
  script: string | null;
  turn: number | null;
  tools: string[];
  /** The token counts the answer stated; null for an error. */
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
}

export interface FakeChat {
  /** The base URL with `/v1`, as both CLIs take it. */
  url: string;
  port: number;
  log: ChatRequestLog[];
  close(): Promise<void>;
}

export async function startFakeChat(): Promise<FakeChat> {
  const log: ChatRequestLog[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (data) => chunks.push(data));
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0];
      let body: any = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
      } catch {
        body = {};
      }
      const tools: any[] = Array.isArray(body.tools) ? body.tools : [];
      if (req.method === 'GET' && path.endsWith('/models')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({ object: 'list', data: [{ id: 'mock-model', object: 'model', owned_by: 'mock' }] }),
        );
        return;
      }
      if (req.method !== 'POST' || !path.endsWith('/chat/completions')) {
        log.push({ path, directive: null, script: null, turn: null, tools: [], usage: null });
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"not found"}}');
        return;
      }
      const model = typeof body.model === 'string' ? body.model : 'mock-model';
      const turn = chatTurnOf(body);
      const reply: ChatReply = turn ? CHAT_SCRIPTS[turn.script](turn) : say('Scripted session');
      log.push({
        path,
        directive: turn?.directive ?? null,
        script: turn?.script ?? null,
        turn: turn?.turn ?? null,
        tools: tools.map((tool) => tool?.function?.name),
        usage: reply.kind === 'message' ? usageOf(turn, reply) : null,
      });
      if (reply.kind === 'error') {
        res.writeHead(reply.status, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            error: { message: reply.message, type: 'invalid_request_error', code: 'scripted_failure' },
          }),
        );
        return;
      }
      if (body.stream) streamReply(res, model, turn, reply, tools);
      else jsonReply(res, model, turn, reply);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    port,
    log,
    close: async () => {
      server.closeAllConnections?.();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
