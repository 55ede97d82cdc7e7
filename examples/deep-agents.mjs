#!/usr/bin/env node
// A Deep Agents run, followed live with subtee: the v3 run stream goes straight into open().
// Subagents (LangGraph namespaces) become subtee channels: OUT/ gets one transcript per
// subagent and index.json, OUT.jsonl the protocol events `subtee --out again OUT.jsonl` replays.
//
//   node examples/deep-agents.mjs OUT
//
// The model is scripted (LangChain's fakeModel) so this runs offline; use your chat model.
import { createWriteStream } from 'node:fs';
import { finished } from 'node:stream/promises';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { fakeModel } from '@langchain/core/testing';
import { createDeepAgent } from 'deepagents';
import { open } from 'subtee';
import { teeJsonl } from 'subtee/adapters';
/** @import { BaseMessage, ToolCall } from '@langchain/core/messages' */
/** @import { SubagentHandle } from 'subtee' */

const out = process.argv[2] ?? 'deep-agents-run';

// The coordinator asks a researcher, who asks a writer; each reports back.
/** @type {(id: string, subagent_type: string, description: string) => ToolCall} */
const task = (id, subagent_type, description) => ({
  id,
  name: 'task',
  type: 'tool_call',
  args: { subagent_type, description },
});
/** @param {BaseMessage[]} messages */
function answer(messages) {
  const first = String(messages.find((m) => m.getType() === 'human')?.content ?? '');
  const answered = messages.some((m) => m.getType() === 'ai');
  if (first.startsWith('Research')) {
    if (answered) return new AIMessage('Findings: three sources agree.');
    const ask = task('call_write', 'writer', 'Write up the findings');
    return new AIMessage({ content: 'Asking a writer.', tool_calls: [ask] });
  }
  if (first.startsWith('Write')) return new AIMessage('Draft: the sources agree.');
  if (answered) return new AIMessage('Done: see the draft.');
  const ask = task('call_research', 'researcher', 'Research the question');
  return new AIMessage({ content: 'Delegating.', tool_calls: [ask] });
}
const model = fakeModel();
for (let i = 0; i < 20; i++) model.respond(answer);

const writer = { name: 'writer', description: 'Writes things up.', systemPrompt: 'You write.' };
const researcher = createDeepAgent({ model, name: 'researcher', subagents: [writer] });
const agent = createDeepAgent({
  model,
  subagents: [{ name: 'researcher', description: 'Researches.', runnable: researcher }, writer],
});
const question = { messages: [new HumanMessage('What do the sources say?')] };
const stream = await agent.streamEvents(question, { version: 'v3' });

const recording = createWriteStream(`${out}.jsonl`);
const run = open(teeJsonl(stream, recording), { out });
// As with Deep Agents: run.subagents is the top level, each handle's subagents the nested ones.
/** @param {SubagentHandle} sub @param {string} indent */
async function follow(sub, indent) {
  console.log(`${indent}${sub.name} started (${sub.cause.tool_call_id})`);
  for await (const message of sub.messages) {
    const text = await message.text;
    if (message.role === 'assistant' && text) console.log(`${indent}  ${text}`);
  }
  for await (const nested of sub.subagents) await follow(nested, `${indent}  `);
  console.log(`${indent}${sub.name} ${(await sub.outcome).status}`);
}
for await (const sub of run.subagents) await follow(sub, '');
const index = await run.done;
recording.end();
await finished(recording);
console.log(
  `${index.producer}: ${index.channels.length - 1} subagents, ` +
    `transcripts in ${out}/, recording in ${out}.jsonl`,
);
