import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, ClickHouseLogLevel, type ClickHouseClient } from '@clickhouse/client';

/** Debian's clickhouse-server (18.16), which `.ci/run` installs when it is missing. */
export const CLICKHOUSE_SERVER = '/usr/sbin/clickhouse-server';

export function clickhouseAvailable(): boolean {
  return spawnSync(CLICKHOUSE_SERVER, ['--help'], { stdio: 'ignore' }).error === undefined;
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

export interface ClickHouseServer {
  url: string;
  dir: string;
  client: ClickHouseClient;
  /** Rows of a query as objects. */
  rows<T = Record<string, unknown>>(sql: string): Promise<T[]>;
  /** SIGKILL: no shutdown, whatever was not on disk is gone. */
  kill(): Promise<void>;
  /** SIGSTOP / SIGCONT: a server that stops answering without closing anything. */
  pause(): void;
  resume(): void;
  /** Starts the server again on the same ports and data folder, and waits until it answers. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts a real ClickHouse server for a test: loopback only, free ports, its own data folder
 * and a minimal config, as root. Ready when `/ping` answers (polled, never a fixed sleep).
 */
export async function startClickHouse(): Promise<ClickHouseServer> {
  const dir = mkdtempSync(join(tmpdir(), 'subtee-clickhouse-'));
  const [httpPort, tcpPort] = [await freePort(), await freePort()];
  const config = join(dir, 'config.xml');
  writeFileSync(
    config,
    `<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><console>1</console></logger>
  <http_port>${httpPort}</http_port>
  <tcp_port>${tcpPort}</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>${dir}/data/</path>
  <tmp_path>${dir}/tmp/</tmp_path>
  <user_files_path>${dir}/user_files/</user_files_path>
  <users_config>/etc/clickhouse-server/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>5368709</mark_cache_size>
</yandex>
`,
  );
  const url = `http://127.0.0.1:${httpPort}`;
  const client = createClient({ url, log: { level: ClickHouseLogLevel.OFF } });
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();

  const ping = async () => {
    try {
      const r = await fetch(`${url}/ping`);
      return r.ok && (await r.text()).startsWith('Ok');
    } catch {
      return false;
    }
  };

  const start = async () => {
    const log = openSync(join(dir, 'server.log'), 'a');
    const c = spawn(CLICKHOUSE_SERVER, [`--config-file=${config}`], { stdio: ['ignore', log, log] });
    child = c;
    exited = new Promise((resolve) => c.once('exit', () => resolve()));
    const deadline = Date.now() + 60_000;
    while (!(await ping())) {
      if (c.exitCode !== null || Date.now() > deadline) {
        throw new Error(
          `clickhouse-server did not start:\n${readFileSync(join(dir, 'server.log'), 'utf8').slice(-2000)}`,
        );
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  await start();
  return {
    url,
    dir,
    client,
    async rows<T>(sql: string) {
      return (await (await client.query({ query: sql, format: 'JSONEachRow' })).json()) as T[];
    },
    async kill() {
      child?.kill('SIGKILL');
      await exited;
    },
    pause() {
      child?.kill('SIGSTOP');
    },
    resume() {
      child?.kill('SIGCONT');
    },
    start,
    async stop() {
      await client.close();
      if (child && child.exitCode === null) {
        child.kill('SIGCONT');
        child.kill('SIGKILL');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
