// Prints each subagent as it starts, its text as it arrives, and how it ended:
//   claude -p … --output-format stream-json --verbose --forward-subagent-text | node projection.js
import { createReadStream } from 'node:fs';
import { open, type SubagentHandle } from 'subtee';

const input = process.argv[2] ? createReadStream(process.argv[2]) : process.stdin;
const run = open(input, { out: process.argv[3] }); // any output folder, or none

async function follow(sub: SubagentHandle): Promise<void> {
  const indent = '  '.repeat(sub.depth ?? 1);
  console.log(`${indent}▶ ${sub.name} "${sub.description}"`);
  for await (const message of sub.messages) {
    if (message.role === 'assistant' && message.text) console.log(`${indent}  ${message.text}`);
  }
  const out = await sub.output;
  const where = sub.background ? 'in the background' : 'in the foreground';
  const tokens = `${out.tokens} tokens, ${out.subtree.tokens} with its subagents`;
  console.log(`${indent}■ ${sub.name} ${out.status} ${where}: ${tokens}`);
}

const followers: Array<Promise<void>> = [];
for await (const sub of run.subagents) followers.push(follow(sub)); // every depth, as each starts
await Promise.all(followers);
const index = await run.done; // the index.json document
console.log(`${(index.channels as unknown[]).length - 1} subagents`);
