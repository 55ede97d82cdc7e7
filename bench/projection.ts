/**
 * A program on the library's projection, reading stdin into an output folder:
 *
 *   node dist/bench/projection.js OUT none|lifecycle|messages < FILE
 *
 * none: `open()` with no consumer; lifecycle: iterates `run.allSubagents` and awaits each
 * `output` (a failed subagent's rejects: it is counted, as a program would handle it);
 * messages: also reads every message of every subagent (one task per subagent).
 */
import { open } from '../src/index.js';

const [out, mode = 'none'] = process.argv.slice(2);
const run = open(process.stdin, { out });
let messages = 0;
let failed = 0;
const tasks: Array<Promise<unknown>> = [];
if (mode !== 'none') {
  for await (const sub of run.allSubagents) {
    tasks.push(sub.output.catch(() => failed++));
    if (mode === 'messages') {
      tasks.push(
        (async () => {
          for await (const _message of sub.messages) messages++;
        })(),
      );
    }
  }
}
await Promise.all(tasks);
const index = await run.done;
process.stderr.write(
  `${index.channels.length} channels, ${failed} failed, ${messages} subagent messages read\n`,
);
