import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { systemReason, UsageError } from '../../errors.js';
import { canonicalHost, hostHeaderParts, isLoopback } from '../../loopback.js';
import type { ReportFeed } from '../../views/report/live.js';
import { contentSecurityPolicy } from '../../views/report/page.js';

export const REPORT_SERVER_DEFAULTS = Object.freeze({
  /** How long a browser waits before reconnecting after the stream drops. */
  retryMs: 1000,
  /** A comment line this often keeps idle connections (and proxies) from timing out. */
  keepAliveMs: 15_000,
  /** At shutdown, how long clients get to receive the last events. */
  closeGraceMs: 2000,
});

export interface ServeAddress {
  host: string;
  port: number;
}

export interface ReportServerOptions extends ServeAddress {
  feed: ReportFeed;
  /** The page's HTML (built once per request: it embeds the run's current facts). */
  page: () => string;
  retryMs?: number;
  keepAliveMs?: number;
  closeGraceMs?: number;
}

export interface ReportServer {
  readonly url: string;
  readonly port: number;
  /** Event-stream connections open now. */
  readonly clients: number;
  /** Sends every client what it has not had yet, ends the streams, and stops the server. */
  close(): Promise<void>;
  /** Drops every event-stream connection at once, as a network failure would. */
  dropClients(): void;
}

/**
 * The live page's server: `GET /` is the page and `GET /events` its server-sent event
 * stream; nothing else is served (no files). Bound to loopback, it also refuses requests
 * whose Host header names another host, so a web page elsewhere cannot reach it through
 * DNS rebinding.
 */
export function startReportServer(options: ReportServerOptions): Promise<ReportServer> {
  const o = { ...REPORT_SERVER_DEFAULTS, ...options };
  const streams = new Set<ServerResponse>();
  /** Set by close(): called when the last event stream closes. */
  let onStreamsClosed: (() => void) | null = null;
  let port = o.port;
  // This machine's own names, compared as a browser writes them (`[::ffff:127.0.0.1]` arrives
  // as `[::ffff:7f00:1]`).
  const ownNames = new Set(['127.0.0.1', 'localhost', '::1', canonicalHost(o.host)]);
  const isOwnHost = (header: string | undefined) => {
    const parts = hostHeaderParts(header ?? '');
    if (!parts || !ownNames.has(parts.host)) return false;
    // A URL leaves out port 80 for http: only then may a Host have no port.
    return parts.port === String(port) || (parts.port === '' && port === 80);
  };

  const events = (req: IncomingMessage, res: ServerResponse) => {
    const header = req.headers['last-event-id'];
    const last = typeof header === 'string' && /^\d{1,15}$/.test(header.trim()) ? Number(header.trim()) : 0;
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      Connection: 'keep-alive',
      'X-Content-Type-Options': 'nosniff',
    });
    res.write(`retry: ${o.retryMs}\n\n`);
    streams.add(res);
    // Aborted when the page goes: its wait for the next event, or for room in its socket, ends.
    const gone = new AbortController();
    const ping = setInterval(() => res.write(': keep-alive\n\n'), o.keepAliveMs).unref();
    res.on('close', () => {
      gone.abort();
      clearInterval(ping);
      streams.delete(res);
      if (streams.size === 0) onStreamsClosed?.();
    });
    // It stops with an AbortError when the page goes, or its socket's error: the page is gone.
    follow(res, last, gone.signal).catch(() => {});
  };

  /** Writes the feed's events after `cursor` to the page as they come, one drain at a time. */
  const follow = async (res: ServerResponse, cursor: number, signal: AbortSignal) => {
    while (!res.destroyed && !res.writableEnded) {
      let full = false;
      for (const ev of o.feed.since(cursor)) {
        cursor = ev.id;
        if (!res.write(`id: ${ev.id}\nevent: ${ev.type}\ndata: ${ev.data}\n\n`)) {
          full = true;
          break;
        }
      }
      if (full) await once(res, 'drain', { signal });
      else if (o.feed.ended) res.end();
      else await once(o.feed, 'published', { signal });
    }
  };

  const server = createServer((req, res) => {
    const send = (status: number, text: string) => {
      res.writeHead(status, {
        'Content-Type': 'text/plain; charset=utf-8',
        'X-Content-Type-Options': 'nosniff',
      });
      res.end(`${text}\n`);
    };
    if (isLoopback(o.host) && !isOwnHost(req.headers.host)) return send(403, 'forbidden host');
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'method not allowed');
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/' || path === '/report.html') {
      const html = o.page();
      res.writeHead(200, {
        'Content-Type': 'text/html; charset=utf-8',
        'Content-Security-Policy': `${contentSecurityPolicy(true)}; frame-ancestors 'none'`,
        'X-Content-Type-Options': 'nosniff',
        'Referrer-Policy': 'no-referrer',
        'Cache-Control': 'no-store',
      });
      return res.end(req.method === 'HEAD' ? undefined : html);
    }
    if (path === '/events' && req.method === 'GET') return events(req, res);
    return send(404, 'not found');
  });

  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => reject(cannotListen(o, err)));
    server.listen(o.port, o.host, () => {
      const addr = server.address();
      port = typeof addr === 'object' && addr ? addr.port : o.port;
      const url = `http://${hostForUrl(o.host)}:${port}/`;
      let closing: Promise<void> | null = null;
      resolve({
        url,
        port,
        get clients() {
          return streams.size;
        },
        dropClients() {
          for (const res of streams) res.destroy();
        },
        close() {
          closing ??= new Promise<void>((done) => {
            // Event streams end by themselves once they have sent everything of an ended
            // feed; whatever is still open after the grace period is cut. Once the last one
            // has closed, the connections left (kept alive, idle) are closed at once.
            const force = setTimeout(() => server.closeAllConnections(), o.closeGraceMs);
            force.unref();
            server.close(() => {
              clearTimeout(force);
              done();
            });
            server.closeIdleConnections();
            onStreamsClosed = () => server.closeAllConnections();
            if (streams.size === 0) onStreamsClosed();
          });
          return closing;
        },
      });
    });
  });
}

function cannotListen(address: ServeAddress, err: NodeJS.ErrnoException): UsageError {
  const where = `${hostForUrl(address.host)}:${address.port}`;
  return new UsageError(
    'ERR_BAD_OPTION',
    `--serve: cannot listen on ${where}: ${systemReason(err)}`,
    err,
  );
}

/**
 * Listens on the address and closes again: a command line checks `--serve` this way before
 * it reads any input, so an address that cannot be had fails before anything is written.
 */
export function checkServeAddress(address: ServeAddress): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => reject(cannotListen(address, err)));
    probe.listen(address.port, address.host, () => probe.close(() => resolve()));
  });
}

function hostForUrl(host: string): string {
  return isIP(host) === 6 ? `[${host}]` : host;
}
