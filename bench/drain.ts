/** The Node read floor: read the input and do nothing with it. */
import { createReadStream } from 'node:fs';

let bytes = 0;
for await (const chunk of createReadStream('', { fd: 0, highWaterMark: 1 << 20 }))
  bytes += (chunk as Buffer).length;
process.stderr.write(`${bytes} bytes\n`);
