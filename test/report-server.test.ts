import assert from 'node:assert/strict';
import { request } from 'node:http';
import { test } from 'node:test';
import { startReportServer } from '../src/chain/sinks/report-server.js';
import { LiveReport, ReportFeed } from '../src/views/report/live.js';
import { pageHtml } from '../src/views/report/page.js';

/** Status of a GET to the server's address with the Host header given. */
function statusWithHost(host: string, port: number, hostHeader: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path: '/', headers: { host: hostHeader } }, (res) => {
      res.resume();
      resolve(res.statusCode!);
    });
    req.on('error', reject);
    req.end();
  });
}

test('a page served on a loopback address answers its own names only (DNS rebinding), [::1] included', async () => {
  for (const host of ['::1', '127.0.0.1', 'localhost']) {
    const feed = new ReportFeed();
    const live = new LiveReport(feed, undefined, 'test');
    const server = await startReportServer({
      host,
      port: 0,
      feed,
      page: () => pageHtml(live.skeleton()),
      closeGraceMs: 10,
    });
    try {
      const port = server.port;
      const connectTo = host === 'localhost' ? '127.0.0.1' : host;
      for (const own of [`[::1]:${port}`, `127.0.0.1:${port}`, `localhost:${port}`]) {
        assert.equal(await statusWithHost(connectTo, port, own), 200, `${host} answers ${own}`);
      }
      for (const foreign of [
        `attacker.example:${port}`,
        'attacker.example',
        `[::2]:${port}`,
        `127.0.0.1:${port + 1}`,
      ]) {
        assert.equal(await statusWithHost(connectTo, port, foreign), 403, `${host} refuses ${foreign}`);
      }
    } finally {
      await server.close();
    }
  }
});
