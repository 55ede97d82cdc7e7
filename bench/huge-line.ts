/**
 * Writes a stream-json stream with one line of N MiB to stdout, generated as it is written
 * (never held): a subagent's tool result with escapes and multi-byte text throughout.
 *
 *   node dist/bench/huge-line.js 2048 | subtee --out OUT
 */
const mib = Number(process.argv[2] ?? '200');
const out = process.stdout;
const write = (b: Buffer | string) =>
  new Promise<void>((resolve) => (out.write(b) ? resolve() : out.once('drain', () => resolve())));
const unit = Buffer.from('lorem ipsum é 日本 🚀 \\n \\" \\\\ \\u00e9 \\t end. ');
const piece = Buffer.alloc(1024 * 1024, ' ');
for (let at = 0; at + unit.length <= piece.length; at += unit.length) unit.copy(piece, at);

await write('{"type":"system","subtype":"init","session_id":"s","claude_code_version":"2.1.220"}\n');
await write(
  '{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"toolu_01huge","name":"Agent","input":{"subagent_type":"Explore"}}]},"parent_tool_use_id":null}\n',
);
await write('{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"');
for (let k = 0; k < mib; k++) await write(piece);
await write('"}]},"parent_tool_use_id":"toolu_01huge"}\n{"type":"result","subtype":"success"}\n');
