#!/usr/bin/env node
// A Claude Agent SDK run, followed live with subtee: one transcript per subagent in OUT/,
// index.json, and OUT.jsonl, the recording `subtee --out again OUT.jsonl` replays later.
//
//   node examples/claude-agent-sdk.mjs "Review src/ with two subagents in parallel" OUT
//
// The SDK starts Claude Code: CLAUDE_CODE_PATH names the binary to run (by default the SDK's
// own). In a sandbox (IS_SANDBOX=1) tools run without asking.
import { createWriteStream } from 'node:fs';
import { finished } from 'node:stream/promises';
import { query } from '@anthropic-ai/claude-agent-sdk';
import { open } from 'subtee';
import { teeJsonl } from 'subtee/adapters';
/** @import { SubagentHandle } from 'subtee' */

const [prompt = 'Say hello.', out = 'sdk-run'] = process.argv.slice(2);
const sandboxed = process.env.IS_SANDBOX === '1';
const messages = query({
  prompt,
  options: {
    forwardSubagentText: true,
    pathToClaudeCodeExecutable: process.env.CLAUDE_CODE_PATH || undefined,
    ...(sandboxed ? { permissionMode: 'bypassPermissions', allowDangerouslySkipPermissions: true } : {}),
  },
});

const recording = createWriteStream(`${out}.jsonl`);
const run = open(teeJsonl(messages, recording), { out });
const reports = [];
/** @param {SubagentHandle} agent its depth is null while its spawn call is unseen */
const indent = (agent) => '  '.repeat((agent.depth ?? 1) - 1);
for await (const agent of run.allSubagents) { // every depth, as each starts
  console.log(`${indent(agent)}${agent.name} started (${agent.id})`);
  reports.push(
    agent.outcome.then((o) => console.log(`${indent(agent)}${agent.name} ${o.status}: ${o.summary ?? ''}`)),
  );
}
const index = await run.done;
await Promise.all(reports);
recording.end();
await finished(recording);
console.log(`${index.channels.length - 1} subagents, transcripts in ${out}/, recording in ${out}.jsonl`);
