// Your own pipeline() from the stage factories: one Session shared by every stage.
import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { Session } from 'subtee/chain';
import { createChannelRouter, createLineParser } from 'subtee/stages';
import { createFilesSink } from 'subtee/sinks';

const [file, out] = process.argv.slice(2);
const session = new Session();
await pipeline(
  createReadStream(file),
  createLineParser({ session }),
  createChannelRouter({ session }),
  createFilesSink({ session, out }), // the last sink ends the pipeline by itself
);
console.log(`${session.input.lines} lines, ${session.tree.size - 1} subagents → ${out}`);
