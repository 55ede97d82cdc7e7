/**
 * LangGraph namespaces 10,000, 20,000 and 40,000 levels deep through the CLI, beside a linear
 * baseline on the same bytes (reading the file and parsing each line, which any mapper must
 * do): if subtee's time per MB stays flat as the depth doubles, its work is linear in it.
 *
 *   npm run build && node dist/bench/langgraph-depth.js [RUNS] [DEPTHS, comma-separated]
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const runs = Number(process.argv[2] ?? 3);
const depths = (process.argv[3] ?? '10000,20000,40000').split(',').map(Number);
const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'subtee.js');

/** A run with a subagent at the first level and a tool call and messages at the deepest. */
function deepNamespaceInput(depth: number): string {
  const segments = Array.from({ length: depth }, (_, i) => `tools:${i.toString(36)}`);
  const event = (method: string, namespace: string[], data: object) =>
    JSON.stringify({ type: 'event', method, params: { namespace, timestamp: 1_700_000_000_000, data } });

  return (
    [
      event('lifecycle', [], { event: 'running' }),
      event('tasks', segments.slice(0, 1), { id: 't', input: {}, metadata: { lc_agent_name: 'sub' } }),
      event('tasks', segments, { id: 'u', input: {}, metadata: { lc_agent_name: 'deeper' } }),
      event('tools', segments, { event: 'tool-started', tool_call_id: 'c1', tool_name: 'ls', input: {} }),
      event('messages', segments, { event: 'message-start', role: 'ai', id: 'm1' }),
      event('messages', segments, { event: 'message-finish', id: 'm1' }),
      event('tools', segments, { event: 'tool-finished', tool_call_id: 'c1', output: 'ok' }),
      event('lifecycle', segments, { event: 'completed' }),
      event('lifecycle', [], { event: 'completed' }),
    ].join('\n') + '\n'
  );
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

const dir = mkdtempSync(join(tmpdir(), 'subtee-lg-depth-'));
try {
  console.log(
    `| depth | MB | subtee → files, s | read + JSON.parse per line (linear floor), s | subtee s/MB | ratio |`,
  );
  console.log('|---|---|---|---|---|---|');
  for (const depth of depths) {
    const file = join(dir, `depth-${depth}.jsonl`);
    writeFileSync(file, deepNamespaceInput(depth));
    const mb = readFileSync(file).length / 1e6;
    const subtee: number[] = [];
    const floor: number[] = [];
    for (let run = 0; run < runs; run++) {
      const out = join(dir, `out-${depth}-${run}`);
      let t0 = performance.now();
      const r = spawnSync(process.execPath, [BIN, '--out', out, '-q', '--stdout', 'none', file]);
      subtee.push((performance.now() - t0) / 1000);
      if (r.status !== 0) throw new Error(`subtee exited ${r.status}: ${r.stderr}`);
      rmSync(out, { recursive: true, force: true });
      t0 = performance.now();
      const parse = spawnSync(process.execPath, [
        '-e',
        `let n=0;for(const l of require('fs').readFileSync(${JSON.stringify(file)},'utf8').split('\\n'))` +
          `if(l)n+=JSON.parse(l).params.namespace.length;`,
      ]);
      floor.push((performance.now() - t0) / 1000);
      if (parse.status !== 0) throw new Error(`baseline exited ${parse.status}`);
    }
    const [s, f] = [median(subtee), median(floor)];
    console.log(
      `| ${depth.toLocaleString('en')} | ${mb.toFixed(1)} | ${s.toFixed(2)} | ${f.toFixed(2)} | ` +
        `${(s / mb).toFixed(2)} | ${(s / f).toFixed(1)} |`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
