/**
 * Real Deep Agents, run offline: `createDeepAgent` with nested subagents and LangChain's
 * `fakeModel()` answering every model call from a script. Each agent's first human message
 * is `DO:<step>`; the step says what that agent's model answers on its first turn (text,
 * optional reasoning, `task` calls that start subagents, an ordinary tool call) and the
 * agent reports on its next turn. The `task` calls make Deep Agents start real subagents.
 */
import { createDeepAgent } from 'deepagents';
import { AIMessage, HumanMessage, type BaseMessage } from '@langchain/core/messages';
import { fakeModel } from '@langchain/core/testing';

export interface Step {
  text: string;
  reasoning?: string;
  /** Subagents to start, each by its type and the step it runs. */
  spawn?: Array<{ type: 'researcher' | 'writer' | 'analyst'; step: string }>;
  /** Also call the built-in `ls` tool. */
  ls?: boolean;
  usage?: { input_tokens: number; output_tokens: number };
  /** The model throws this error instead of answering (on the agent's first turn). */
  fail?: string;
}

export type Script = Record<string, Step>;

/** Three levels below the coordinator: analyst → researcher → writer, beside a plain writer. */
export const NESTED_SCRIPT: Script = {
  root: {
    reasoning: 'Split the work three ways.',
    text: 'Coordinator: delegating.',
    spawn: [
      { type: 'analyst', step: 'a1' },
      { type: 'writer', step: 'w-top' },
    ],
    ls: true,
    usage: { input_tokens: 120, output_tokens: 30 },
  },
  a1: {
    text: 'Analyst: asking a researcher.',
    spawn: [{ type: 'researcher', step: 'r1' }],
    usage: { input_tokens: 40, output_tokens: 12 },
  },
  r1: {
    reasoning: 'Two writers will do.',
    text: 'Researcher: two writers.',
    spawn: [
      { type: 'writer', step: 'w1' },
      { type: 'writer', step: 'w2' },
    ],
  },
  w1: { text: 'Writer w1: draft one.' },
  w2: { text: 'Writer w2: draft two.', ls: true },
  'w-top': { text: 'Writer top: summary.' },
};

const typeOf = (m: BaseMessage) => m.getType();

/** The model's answer to one call, from the step named by the conversation's first human message. */
export function answer(script: Script, messages: BaseMessage[]): AIMessage {
  const first = messages.find((m) => typeOf(m) === 'human');
  const step = /DO:([A-Za-z0-9_-]+)/.exec(String(first?.content ?? ''))?.[1] ?? 'root';
  const plan = script[step] ?? { text: `unknown step ${step}` };
  const turns = messages.filter((m) => typeOf(m) === 'ai').length;
  if (turns > 0) return new AIMessage({ content: `${step} report: done.` });
  if (plan.fail !== undefined) throw new Error(plan.fail);
  const content = plan.reasoning
    ? [
        { type: 'reasoning', reasoning: plan.reasoning },
        { type: 'text', text: plan.text },
      ]
    : plan.text;
  const toolCalls = (plan.spawn ?? []).map((s, i) => ({
    name: 'task',
    args: { description: `DO:${s.step}`, subagent_type: s.type },
    id: `call_${step}_${i}`,
    type: 'tool_call' as const,
  }));
  if (plan.ls)
    toolCalls.push({
      name: 'ls',
      args: { path: '/' } as never,
      id: `call_${step}_ls`,
      type: 'tool_call' as const,
    });
  return new AIMessage({
    content: content as never,
    tool_calls: toolCalls,
    ...(plan.usage
      ? {
          usage_metadata: { ...plan.usage, total_tokens: plan.usage.input_tokens + plan.usage.output_tokens },
        }
      : {}),
  });
}

/** The coordinator, with analyst (→ researcher → writer), researcher and writer subagents. */
export function scriptedDeepAgent(script: Script = NESTED_SCRIPT) {
  const model = fakeModel();
  for (let i = 0; i < 500; i++) model.respond((messages) => answer(script, messages));
  const writer = { name: 'writer', description: 'Writes a short text.', systemPrompt: 'You write.' };
  const researcher = createDeepAgent({ model, name: 'researcher', subagents: [writer] });
  const analyst = createDeepAgent({
    model,
    name: 'analyst',
    subagents: [{ name: 'researcher', description: 'Researches.', runnable: researcher }],
  });
  return createDeepAgent({
    model,
    subagents: [
      { name: 'analyst', description: 'Analyses with researchers.', runnable: analyst },
      { name: 'researcher', description: 'Researches.', runnable: researcher },
      writer,
    ],
  });
}

/** The coordinator's v3 run stream for the script's root step. */
export async function startRun(script: Script = NESTED_SCRIPT) {
  const agent = scriptedDeepAgent(script);
  return agent.streamEvents({ messages: [new HumanMessage('DO:root')] }, { version: 'v3' });
}
