/**
 * Live latency: lines are written into subtee's stdin through a pipe at a steady rate, and
 * the time from each write to the line being in its channel's .jsonl file is measured.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, openSync, readSync, closeSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export async function measureLatency(
  bin: string,
  opts: { linesPerSecond: number; seconds: number; channels: number },
) {
  const dir = mkdtempSync(join(tmpdir(), 'subtee-latency-'));
  const out = join(dir, 'out');
  const child = spawn(process.execPath, [bin, '--out', out, '--stdout', 'none', '-q'], {
    stdio: ['pipe', 'ignore', 'inherit'],
  });
  const ids = Array.from({ length: opts.channels }, (_, i) => `toolu_lat${i}`);
  const total = opts.linesPerSecond * opts.seconds;
  const sentAt: number[] = [];
  const seen: number[] = new Array(total).fill(-1);
  // Spawn lines first so every channel has its file.
  for (const id of ids)
    child.stdin.write(
      JSON.stringify({
        type: 'assistant',
        parent_tool_use_id: null,
        message: { id: `s${id}`, content: [{ type: 'tool_use', id, name: 'Agent', input: {} }] },
      }) + '\n',
    );
  await new Promise((r) => setTimeout(r, 300));
  const fds = new Map<string, { fd: number; buf: string }>();
  const poll = () => {
    for (const id of ids) {
      const p = join(out, 'agents', `${id}.jsonl`);
      let f = fds.get(id);
      if (!f) {
        if (!existsSync(p)) continue;
        f = { fd: openSync(p, 'r'), buf: '' };
        fds.set(id, f);
      }
      const b = Buffer.alloc(1 << 16);
      let n: number;
      while ((n = readSync(f.fd, b, 0, b.length, null)) > 0) f.buf += b.toString('utf8', 0, n);
      let nl: number;
      while ((nl = f.buf.indexOf('\n')) >= 0) {
        const m = /"seq":(\d+)/.exec(f.buf.slice(0, nl));
        if (m && seen[Number(m[1])] < 0) seen[Number(m[1])] = performance.now();
        f.buf = f.buf.slice(nl + 1);
      }
    }
  };
  const start = performance.now();
  const interval = 1000 / opts.linesPerSecond;
  let i = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const due = Math.min(total, Math.floor((performance.now() - start) / interval) + 1);
      while (i < due) {
        const id = ids[i % ids.length];
        sentAt[i] = performance.now();
        child.stdin.write(
          JSON.stringify({
            type: 'assistant',
            parent_tool_use_id: id,
            seq: i,
            message: { id: `m${i}`, content: [{ type: 'text', text: `line ${i} ${'x'.repeat(200)}` }] },
          }) + '\n',
        );
        i++;
      }
      poll();
      if (i >= total && seen.every((t) => t >= 0)) return resolve();
      if (performance.now() - start > opts.seconds * 1000 + 10_000) return resolve();
      setImmediate(tick);
    };
    tick();
  });
  child.stdin.end();
  await new Promise((r) => child.on('close', r));
  for (const f of fds.values()) closeSync(f.fd);
  rmSync(dir, { recursive: true, force: true });
  const lat = seen.map((t, k) => (t < 0 ? Infinity : t - sentAt[k])).sort((a, b) => a - b);
  const q = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))];
  return {
    p50: q(0.5),
    p99: q(0.99),
    max: lat[lat.length - 1],
    lost: lat.filter((x) => x === Infinity).length,
    lines: total,
  };
}
