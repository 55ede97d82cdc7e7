import assert from 'node:assert/strict';
import {
  createServer as createHttpServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  request,
} from 'node:http';
import { once } from 'node:events';
import { test } from 'node:test';
import {
  REPORT_SERVER_DEFAULTS,
  type ReportServer,
  startReportServer,
} from '../src/chain/sinks/report-server.js';
import { LiveReport, ReportFeed } from '../src/views/report/live.js';
import { contentSecurityPolicy, pageHtml } from '../src/views/report/page.js';
import { processWarnings } from './helpers/helpers.js';
import { connect as connectTcp, createServer as createNetServer } from 'node:net';
import { UsageError } from '../src/errors.js';
import { isLoopback } from '../src/loopback.js';

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

test('a page served on a loopback address answers its ' +
  'own names only (DNS rebinding), [::1] included', async () => {
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

// The live report server over real loopback HTTP: routes, headers, the Host check, the event
// stream's format, resumption, backpressure and shutdown. Each test waits on what the client
// receives or on the server's own counters, never on a clock.

const PAGE = '<!doctype html><title>page</title>';

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

function fetchText(
  port: number,
  opts: { path?: string; method?: string; host?: string; headers?: Record<string, string> } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: opts.host ?? '127.0.0.1',
        port,
        path: opts.path ?? '/',
        method: opts.method ?? 'GET',
        headers: opts.headers,
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** An event-stream client: everything received so far, and promises on what comes next. */
interface EventClient {
  res: IncomingMessage;
  text(): string;
  /** Resolves once the received text satisfies `ready`. */
  until(ready: (text: string) => boolean): Promise<string>;
  /** Resolves with the whole text when the server ends the stream; `cut` if the connection dropped. */
  done: Promise<{ text: string; cut: boolean }>;
}

function openEvents(
  port: number,
  headers: Record<string, string> = {},
  paused = false,
): Promise<EventClient> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/events', headers, agent: false }, (res) => {
      let text = '';
      const waits: Array<{ ready: (t: string) => boolean; resolve: (t: string) => void }> = [];
      const check = () => {
        for (const w of [...waits]) {
          if (w.ready(text)) {
            waits.splice(waits.indexOf(w), 1);
            w.resolve(text);
          }
        }
      };
      res.setEncoding('utf8');
      if (paused) res.pause();
      res.on('data', (chunk: string) => {
        text += chunk;
        check();
      });
      const done = new Promise<{ text: string; cut: boolean }>((settle) => {
        let ended = false;
        res.on('end', () => {
          ended = true;
          settle({ text, cut: false });
        });
        res.on('close', () => settle({ text, cut: !ended }));
        res.on('error', () => settle({ text, cut: true }));
      });
      resolve({
        res,
        text: () => text,
        until: (ready) =>
          new Promise((ok) => {
            waits.push({ ready, resolve: ok });
            check();
          }),
        done,
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** The `id` fields of an event-stream text, in order. */
const idsOf = (text: string) => [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));

/** Resolves once `ready()` holds, checking again after each turn of the event loop's timers. */
async function eventually(ready: () => boolean): Promise<void> {
  while (!ready()) await new Promise((resolve) => setTimeout(resolve, 5));
}

async function withServer(
  options: Partial<Parameters<typeof startReportServer>[0]>,
  body: (server: ReportServer, feed: ReportFeed) => Promise<void>,
): Promise<void> {
  const feed = options.feed ?? new ReportFeed();
  const server = await startReportServer({
    host: '127.0.0.1',
    port: 0,
    page: () => PAGE,
    closeGraceMs: 50,
    ...options,
    feed,
  });
  try {
    await body(server, feed);
  } finally {
    await server.close();
  }
}

test('GET / and /report.html serve the page with its ' +
  'security headers; HEAD sends the headers only', async () => {
  let built = 0;
  const page = () => `${PAGE}<p>${++built}</p>`;
  await withServer({ page }, async (server) => {
    for (const path of ['/', '/report.html', '/?x=1', '/report.html?y']) {
      const reply = await fetchText(server.port, { path });
      assert.equal(reply.status, 200, path);
      assert.equal(reply.body, `${PAGE}<p>${built}</p>`, 'the page is built per request');
      assert.equal(reply.headers['content-type'], 'text/html; charset=utf-8');
      assert.equal(
        reply.headers['content-security-policy'],
        `${contentSecurityPolicy(true)}; frame-ancestors 'none'`,
      );
      assert.equal(reply.headers['x-content-type-options'], 'nosniff');
      assert.equal(reply.headers['referrer-policy'], 'no-referrer');
      assert.equal(reply.headers['cache-control'], 'no-store');
    }
    assert.equal(built, 4);
    const head = await fetchText(server.port, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.body, '');
    assert.equal(head.headers['content-type'], 'text/html; charset=utf-8');
  });
});

test('other paths are 404, other methods 405, HEAD of the event stream 404, all as plain text', async () => {
  await withServer({}, async (server) => {
    const cases: Array<[string, string, number, string]> = [
      ['GET', '/other', 404, 'not found\n'],
      ['GET', '/events/x', 404, 'not found\n'],
      ['GET', '/report.htm', 404, 'not found\n'],
      ['HEAD', '/events', 404, ''],
      ['POST', '/', 405, 'method not allowed\n'],
      ['PUT', '/events', 405, 'method not allowed\n'],
      ['DELETE', '/other', 405, 'method not allowed\n'],
    ];
    for (const [method, path, status, body] of cases) {
      const reply = await fetchText(server.port, { method, path });
      assert.equal(reply.status, status, `${method} ${path}`);
      assert.equal(reply.body, body, `${method} ${path}`);
      assert.equal(reply.headers['content-type'], 'text/plain; charset=utf-8');
      assert.equal(reply.headers['x-content-type-options'], 'nosniff');
    }
    assert.equal(server.clients, 0, 'none of these opened an event stream');
  });
});

test('the Host check: names are case-blind, a bare name ' +
  'needs port 80, other loopback addresses name themselves', async () => {
  await withServer({}, async (server) => {
    const port = server.port;
    assert.equal(server.url, `http://127.0.0.1:${port}/`);
    const status = async (host: string) => (await fetchText(port, { headers: { host } })).status;
    assert.equal(await status(`LOCALHOST:${port}`), 200);
    assert.equal(await status(`LocalHost:${port}`), 200);
    const forbidden = await fetchText(port, { headers: { host: '127.0.0.1' } });
    assert.equal(forbidden.status, 403, 'no port: only port 80 may omit it');
    assert.equal(forbidden.body, 'forbidden host\n');
    assert.equal(forbidden.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(await status('localhost'), 403);
    // The Host check comes before the method and the path.
    assert.equal(
      (await fetchText(port, { method: 'POST', path: '/x', headers: { host: 'evil' } })).status,
      403,
    );
  });
  // The whole of 127/8 is loopback: a server bound to another of its addresses answers that name.
  await withServer({ host: '127.0.0.2' }, async (server) => {
    const port = server.port;
    assert.equal(server.url, `http://127.0.0.2:${port}/`);
    const status = async (host: string) =>
      (await fetchText(port, { host: '127.0.0.2', headers: { host } })).status;
    assert.equal(await status(`127.0.0.2:${port}`), 200);
    assert.equal(await status(`127.0.0.1:${port}`), 200);
    assert.equal(await status(`127.0.0.3:${port}`), 403);
  });
  // A server on all interfaces is meant to be reached by other names: no Host check.
  await withServer({ host: '0.0.0.0' }, async (server) => {
    assert.equal(server.url, `http://0.0.0.0:${server.port}/`);
    assert.equal((await fetchText(server.port, { headers: { host: 'reports.example' } })).status, 200);
  });
});

test('on port 80 a Host without a port is the same host', async (t) => {
  let server: ReportServer;
  try {
    server = await startReportServer({
      host: '127.0.0.4',
      port: 80,
      feed: new ReportFeed(),
      page: () => PAGE,
      closeGraceMs: 50,
    });
  } catch (err) {
    return t.skip(`cannot listen on port 80 here (${(err as Error).message})`);
  }
  try {
    assert.equal(server.port, 80);
    assert.equal(server.url, 'http://127.0.0.4:80/');
    const status = async (host: string) =>
      (await fetchText(80, { host: '127.0.0.4', headers: { host } })).status;
    for (const own of ['127.0.0.4', '127.0.0.4:80', 'localhost', '127.0.0.1', '[::1]'])
      assert.equal(await status(own), 200, own);
    for (const foreign of ['attacker.example', 'attacker.example:80', '127.0.0.4:81'])
      assert.equal(await status(foreign), 403, foreign);
  } finally {
    await server.close();
  }
});

test('loopback in any spelling, IPv4-mapped included; names and other addresses are not', () => {
  const loopback = [
    'localhost',
    'LOCALHOST',
    '127.0.0.1',
    '127.255.0.9',
    '::1',
    '0:0:0:0:0:0:0:1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:2',
  ];
  const elsewhere = [
    '0.0.0.0',
    '::',
    '10.0.0.1',
    '128.0.0.1',
    '::2',
    '::ffff:10.0.0.1',
    '127.attacker.example',
    'example.com',
  ];
  for (const host of loopback) assert.equal(isLoopback(host), true, host);
  for (const host of elsewhere) assert.equal(isLoopback(host), false, host);
  // Written the short way, still an address: 127.1 and 2130706433 are 127.0.0.1.
  for (const host of ['127.1', '2130706433', '0x7f.1']) assert.equal(isLoopback(host), true, host);
});

test('bound to 127.1 (127.0.0.1 written short), the Host check applies', async () => {
  await withServer({ host: '127.1' }, async (server) => {
    const status = async (host: string) => (await fetchText(server.port, { headers: { host } })).status;
    assert.equal(await status(`127.0.0.1:${server.port}`), 200);
    assert.equal(await status(`127.1:${server.port}`), 200);
    assert.equal(await status(`attacker.example:${server.port}`), 403);
  });
});

test('bound to an IPv4-mapped loopback address, a foreign Host is refused', async (t) => {
  let server: ReportServer;
  try {
    server = await startReportServer({
      host: '::ffff:127.0.0.1',
      port: 0,
      feed: new ReportFeed(),
      page: () => PAGE,
      closeGraceMs: 50,
    });
  } catch (err) {
    return t.skip(`cannot listen on ::ffff:127.0.0.1 here (${(err as Error).message})`);
  }
  try {
    const status = async (host: string) =>
      (await fetchText(server.port, { host: '127.0.0.1', headers: { host } })).status;
    // As typed, and as a browser or fetch() writes it.
    for (const own of [
      '[::ffff:127.0.0.1]',
      '[::ffff:7f00:1]',
      '[0:0:0:0:0:ffff:7f00:1]',
      '127.0.0.1',
      '[0:0:0:0:0:0:0:1]',
    ])
      assert.equal(await status(`${own}:${server.port}`), 200, own);
    assert.equal(await status(`attacker.example:${server.port}`), 403);
    assert.equal(await status(`[::ffff:7f00:2]:${server.port}`), 403);
    assert.equal(await status(`evil@127.0.0.1:${server.port}`), 403);
    const reply = await fetch(server.url);
    assert.equal(reply.status, 200, `the printed address ${server.url} answers fetch()`);
    await reply.text();
  } finally {
    await server.close();
  }
});

test('an IPv6 address is bracketed in the URL and the Host names; an IPv4 one is not', async () => {
  await withServer({ host: '::1' }, async (server) => {
    assert.equal(server.url, `http://[::1]:${server.port}/`);
    const reply = await fetchText(server.port, { host: '::1', headers: { host: `[::1]:${server.port}` } });
    assert.equal(reply.status, 200);
  });
});

test('the event stream: headers, the retry line, then ' +
  'every event as id/event/data, ended with the feed', async () => {
  const feed = new ReportFeed();
  feed.publish('run', '{"n":1}');
  feed.publish('channel', '{"n":2}');
  await withServer({ feed, retryMs: 1234, keepAliveMs: 60_000 }, async (server) => {
    const client = await openEvents(server.port);
    assert.equal(client.res.statusCode, 200);
    assert.equal(client.res.headers['content-type'], 'text/event-stream; charset=utf-8');
    assert.equal(client.res.headers['cache-control'], 'no-store');
    assert.equal(client.res.headers['connection'], 'keep-alive');
    assert.equal(client.res.headers['x-content-type-options'], 'nosniff');
    const expectedStart =
      'retry: 1234\n\nid: 1\nevent: run\ndata: {"n":1}\n\nid: 2\nevent: channel\ndata: {"n":2}\n\n';
    assert.equal(await client.until((t) => t.length >= expectedStart.length), expectedStart);
    assert.equal(server.clients, 1);
    // Events published later reach the open stream as they come.
    feed.publish('entries', '{"n":3}');
    await client.until((t) => t.includes('id: 3\n'));
    feed.end();
    const { text, cut } = await client.done;
    assert.equal(cut, false, 'the server ends the stream itself');
    assert.equal(
      text,
      `${expectedStart}id: 3\nevent: entries\ndata: {"n":3}\n\nid: 4\nevent: end\ndata: {}\n\n`,
    );
    await eventually(() => server.clients === 0);
  });
});

test('the retry line defaults to REPORT_SERVER_DEFAULTS.retryMs', async () => {
  const feed = new ReportFeed();
  feed.end();
  await withServer({ feed }, async (server) => {
    const { text } = await (await openEvents(server.port)).done;
    assert.equal(text, `retry: ${REPORT_SERVER_DEFAULTS.retryMs}\n\nid: 1\nevent: end\ndata: {}\n\n`);
    assert.equal(REPORT_SERVER_DEFAULTS.retryMs, 1000);
  });
});

test('Last-Event-ID resumes after that id; a value that ' +
  'is not 1 to 15 digits starts from the beginning', async () => {
  const feed = new ReportFeed();
  for (let i = 0; i < 5; i++) feed.publish('entries', `{"i":${i}}`);
  feed.end();
  await withServer({ feed }, async (server) => {
    const ids = async (lastEventId?: string) => {
      const headers: Record<string, string> =
        lastEventId === undefined ? {} : { 'last-event-id': lastEventId };
      return idsOf((await (await openEvents(server.port, headers)).done).text);
    };
    assert.deepEqual(await ids(), [1, 2, 3, 4, 5, 6]);
    assert.deepEqual(await ids('3'), [4, 5, 6]);
    assert.deepEqual(await ids(' 2 '), [3, 4, 5, 6], 'surrounding blanks are ignored');
    assert.deepEqual(await ids('0'), [1, 2, 3, 4, 5, 6]);
    assert.deepEqual(await ids('000000000000005'), [6], 'fifteen digits is a number');
    assert.deepEqual(await ids('999999999999999'), []);
    for (const bad of ['1000000000000000', 'x3', '3x', '-3', '3.5', 'abc', '']) {
      assert.deepEqual(await ids(bad), [1, 2, 3, 4, 5, 6], JSON.stringify(bad));
    }
  });
});

test('50 pages following the feed each get every event in order, with no listener-leak ' +
  'warning; pages that go leave no listener on the feed', async () => {
  const warnings = processWarnings();
  const feed = new ReportFeed();
  await withServer({ feed }, async (server) => {
    const stay = await Promise.all(Array.from({ length: 50 }, () => openEvents(server.port)));
    const leave = await Promise.all(Array.from({ length: 20 }, () => openEvents(server.port)));
    await eventually(() => feed.listenerCount('published') === 70);
    for (const client of leave) client.res.destroy();
    await eventually(() => server.clients === 50);
    assert.equal(feed.listenerCount('published'), 50);
    for (let i = 1; i <= 5; i++) feed.publish('entries', `{"i":${i}}`);
    feed.end();
    for (const client of stay) assert.deepEqual(idsOf((await client.done).text), [1, 2, 3, 4, 5, 6]);
    await eventually(() => server.clients === 0);
  });
  assert.equal(feed.listenerCount('published') + feed.listenerCount('error'), 0);
  assert.deepEqual(await warnings.settled(), []);
});

test('a client that stops reading holds its stream back, then gets every event once, in order', async () => {
  // Events keep coming while the client is stalled: the server waits for one drain at a time
  // rather than piling up writes (and 'drain' listeners, which Node reports as a leak).
  const warnings = processWarnings();
  const feed = new ReportFeed();
  const big = 'x'.repeat(64 * 1024);
  const count = 300; // about 20 MB: far more than the socket buffers hold
  await withServer({ feed }, async (server) => {
    const client = await openEvents(server.port, {}, true);
    await eventually(() => server.clients === 1);
    for (let i = 1; i <= count; i++) feed.publish('entries', `{"i":${i},"pad":"${big}"}`);
    feed.end();
    client.res.resume();
    const { text, cut } = await client.done;
    assert.equal(cut, false);
    const expected = Array.from({ length: count + 1 }, (_, i) => i + 1);
    assert.deepEqual(idsOf(text), expected);
    assert.deepEqual(
      [...text.matchAll(/^data: \{"i":(\d+),/gm)].map((m) => Number(m[1])),
      expected.slice(0, count),
    );
  });
  assert.deepEqual(await warnings.settled(), []);
});

test('idle streams get keep-alive comments', async () => {
  await withServer({ keepAliveMs: 5 }, async (server) => {
    const client = await openEvents(server.port);
    const text = await client.until((t) => t.split(': keep-alive\n\n').length > 3);
    assert.match(text, /^retry: 1000\n\n(: keep-alive\n\n)+$/);
  });
});

test('clients counts open streams; dropClients cuts them all', async () => {
  await withServer({}, async (server) => {
    assert.equal(server.clients, 0);
    const first = await openEvents(server.port);
    const second = await openEvents(server.port);
    await first.until((t) => t.startsWith('retry:'));
    await second.until((t) => t.startsWith('retry:'));
    assert.equal(server.clients, 2);
    first.res.destroy();
    await eventually(() => server.clients === 1);
    server.dropClients();
    assert.equal((await second.done).cut, true);
    await eventually(() => server.clients === 0);
  });
});

test('close waits for a slow client to receive what it has not had yet, then stops listening', async () => {
  const feed = new ReportFeed();
  const big = 'y'.repeat(64 * 1024);
  const count = 200;
  const server = await startReportServer({
    host: '127.0.0.1',
    port: 0,
    feed,
    page: () => PAGE,
    closeGraceMs: 600_000,
  });
  const client = await openEvents(server.port, {}, true);
  await eventually(() => server.clients === 1);
  for (let i = 1; i <= count; i++) feed.publish('entries', `{"i":${i},"pad":"${big}"}`);
  feed.end();
  const closed = server.close();
  assert.equal(server.close(), closed, 'closing twice is one close');
  client.res.resume();
  const { text, cut } = await client.done;
  assert.equal(cut, false);
  assert.deepEqual(
    idsOf(text),
    Array.from({ length: count + 1 }, (_, i) => i + 1),
  );
  await closed;
  await assert.rejects(fetchText(server.port), (err: NodeJS.ErrnoException) => err.code === 'ECONNREFUSED');
});

test('close with an idle keep-alive connection open still finishes', async () => {
  const server = await startReportServer({
    host: '127.0.0.1',
    port: 0,
    feed: new ReportFeed(),
    page: () => PAGE,
    closeGraceMs: 600_000,
  });
  // A raw keep-alive request: the connection stays open and idle after the reply.
  const socket = connectTcp(server.port, '127.0.0.1');
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (received += chunk));
  const socketClosed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  socket.write(`GET /other HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nConnection: keep-alive\r\n\r\n`);
  await eventually(() => received.includes('not found\n'));
  await server.close();
  await socketClosed;
});

// Node's own keep-alive timeout (5 s) would close an idle connection left open: the test's bound
// is below it, so a close that did not notice the last stream closing fails.
const BELOW_KEEP_ALIVE_MS = 4000;

test('close ends once the last event stream has closed: the kept-alive connection its stream ended ' +
  'on is closed then, not left to the keep-alive timeout', { timeout: BELOW_KEEP_ALIVE_MS }, async () => {
  assert.ok(createHttpServer().keepAliveTimeout > BELOW_KEEP_ALIVE_MS);
  const feed = new ReportFeed();
  feed.publish('run', '{}');
  const server = await startReportServer({
    host: '127.0.0.1',
    port: 0,
    feed,
    page: () => PAGE,
    closeGraceMs: 600_000,
  });
  // A raw keep-alive request, as a browser's EventSource makes: the connection outlives the stream.
  const socket = connectTcp(server.port, '127.0.0.1');
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (received += chunk));
  const socketClosed = once(socket, 'close');
  socket.write(`GET /events HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nConnection: keep-alive\r\n\r\n`);
  await eventually(() => received.includes('id: 1\n'));
  let closed = false;
  const closing = server.close().then(() => (closed = true));
  // While the feed goes on, the stream stays open and close waits for it.
  feed.publish('entries', '{}');
  await eventually(() => received.includes('id: 2\n'));
  assert.equal(closed, false);
  assert.equal(server.clients, 1);
  feed.end();
  await closing;
  await socketClosed;
  assert.match(received, /^HTTP\/1\.1 200 OK\r\n/);
  assert.match(received, /\r\nConnection: keep-alive\r\n/);
  assert.ok(received.endsWith('event: end\ndata: {}\n\n\r\n0\r\n\r\n'), 'the stream ended, not cut');
  assert.equal(server.clients, 0);
});

test('close cuts a stream that is still open after the grace period', async () => {
  const feed = new ReportFeed();
  feed.publish('run', '{}');
  const server = await startReportServer({
    host: '127.0.0.1',
    port: 0,
    feed,
    page: () => PAGE,
    closeGraceMs: 20,
  });
  const client = await openEvents(server.port);
  await client.until((t) => t.includes('id: 1\n'));
  await server.close();
  const { text, cut } = await client.done;
  assert.equal(cut, true, 'the feed never ended: the stream is cut, not ended');
  assert.deepEqual(idsOf(text), [1]);
  await eventually(() => server.clients === 0);
});

test('a port in use fails with ERR_BAD_OPTION naming the address and the reason', async () => {
  const holder = createNetServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const port = (holder.address() as { port: number }).port;
  try {
    await assert.rejects(
      startReportServer({ host: '127.0.0.1', port, feed: new ReportFeed(), page: () => PAGE }),
      (err: unknown) => {
        assert.ok(err instanceof UsageError);
        assert.equal(err.code, 'ERR_BAD_OPTION');
        assert.ok(err.message.includes(`127.0.0.1:${port}`), err.message);
        const why = ': the address is already in use';
        assert.ok(err.message.endsWith(why), `the reason in words: ${err.message}`);
        return true;
      },
    );
  } finally {
    holder.close();
  }
  const v6 = createNetServer();
  await new Promise<void>((resolve) => v6.listen(0, '::1', resolve));
  const v6port = (v6.address() as { port: number }).port;
  try {
    await assert.rejects(
      startReportServer({ host: '::1', port: v6port, feed: new ReportFeed(), page: () => PAGE }),
      (err: unknown) => {
        assert.ok(err instanceof UsageError && err.message.includes(`[::1]:${v6port}`), String(err));
        return true;
      },
    );
  } finally {
    v6.close();
  }
});
