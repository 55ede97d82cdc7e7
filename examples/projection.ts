// Prints each subagent as it starts, its text as it arrives, and how it ended:
//   claude -p … --output-format stream-json --verbose --forward-subagent-text | node projection.js
import { open, type SubagentHandle } from 'subtee';

// A recorded file (gzip too) or stdin; any output folder, or none.
const run = open(process.argv[2] ?? process.stdin, { out: process.argv[3] });

async function follow(sub: SubagentHandle): Promise<void> {
  const indent = '  '.repeat(sub.depth ?? 1);
  console.log(`${indent}▶ ${sub.name} "${sub.description}"`);
  const nested: Array<Promise<void>> = [];
  const spawning = (async () => {
    for await (const child of sub.subagents) nested.push(follow(child));
  })();
  for await (const message of sub.messages) {
    for await (const text of message.text) console.log(`${indent}  ${text}`); // each block as it arrives
  }
  const out = await sub.outcome; // how it ended, failed or not (`output` rejects for a failure)
  const where = sub.background ? 'in the background' : 'in the foreground';
  const tokens = `${out.tokens} tokens, ${out.subtree.tokens} with its subagents`;
  const failure = out.error ? `: ${out.error}` : '';
  console.log(`${indent}■ ${sub.name} ${out.status} ${where}: ${tokens}${failure}`);
  await spawning;
  await Promise.all(nested);
}

const followers: Array<Promise<void>> = [];
for await (const sub of run.subagents) followers.push(follow(sub)); // the top level; nested ones in follow()
await Promise.all(followers);
const index = await run.done; // the index.json document, typed
const output = await run.output; // the result line: result, costUsd, turns, durationMs, usage
console.log(`${index.channels.length - 1} subagents`);
console.log(`run ${output.status}: ${output.turns ?? '?'} turns, $${output.costUsd?.toFixed(4) ?? '?'}`);
