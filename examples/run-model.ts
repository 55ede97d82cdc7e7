// The run model alone: lines in, frozen typed events out; no stream, nothing written.
import { readFileSync } from 'node:fs';
import { RunModel, type ModelEvent } from 'subtee/model';

const said = (e: ModelEvent): string | null => {
  switch (e.type) {
    case 'open':
    case 'spawn':
      return `${e.type} ${e.channel.id} under ${e.channel.parent ?? 'main'}`;
    case 'status':
      return `status ${e.channel.id} ${e.channel.status}`;
    default:
      return null; // 'routed', 'usage', 'toolCall', 'toolResult'
  }
};
const model = new RunModel();
const input = new Map<string, number>(); // input tokens per channel, from the usage events
const calls = new Map<string, number>(); // tool calls per channel
readFileSync(process.argv[2], 'utf8')
  .split('\n')
  .forEach((text, i) => {
    if (text.trim() === '') return;
    const routed = model.take(JSON.parse(text), i + 1); // { type: 'routed', lineNo, channel, changes, … }
    for (const change of routed.changes) console.log(said(change));
    const id = routed.channel.id ?? 'main';
    input.set(id, (input.get(id) ?? 0) + (routed.usage?.tokens.input_tokens ?? 0));
    calls.set(id, (calls.get(id) ?? 0) + routed.tools.filter((t) => t.type === 'toolCall').length);
  });
for (const [id, n] of calls) console.log(`usage ${id} ${n} tool calls, ${input.get(id)} input tokens`);
console.log(`${model.tree.size - 1} subagents, ${model.warnings.length} warnings`);
