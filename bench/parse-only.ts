/** subtee's parser and router alone, writing nothing: `node dist/bench/parse-only.js < FILE`. */
import { createReadStream } from 'node:fs';
import { runChain } from '../src/chain/chain.js';

const input = createReadStream('', { fd: 0, highWaterMark: 1 << 20 });
const run = await runChain(input, { stages: [{ use: 'line-parser' }, { use: 'channel-router' }], sinks: [] });
process.stderr.write(`${run.input.lines} lines, ${run.tree.size} channels\n`);
