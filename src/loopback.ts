import { BlockList, isIP } from 'node:net';

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/**
 * A host as a URL parser (and so a browser) writes it: lower case, IPv4 in dotted quads
 * (`127.1` is 127.0.0.1), IPv6 compressed (`::ffff:127.0.0.1` is ::ffff:7f00:1), without
 * brackets. A host no URL can hold is returned in lower case.
 */
export function canonicalHost(host: string): string {
  const bracketed = isIP(host) === 6 ? `[${host}]` : host;
  let name: string;
  try {
    name = new URL(`http://${bracketed}/`).hostname;
  } catch {
    return host.toLowerCase();
  }
  return unbracketed(name);
}

/** A URL's hostname without the brackets it puts around an IPv6 address. */
const unbracketed = (hostname: string) => (hostname.startsWith('[') ? hostname.slice(1, -1) : hostname);

/**
 * Whether only this machine can connect to `host`: `localhost`, 127.0.0.0/8 and ::1 in any
 * spelling, IPv4-mapped ones (`::ffff:127.0.0.1`) included. A name that is not an address
 * (other than localhost) is not known to be loopback.
 */
export function isLoopback(host: string): boolean {
  const name = canonicalHost(host);
  if (name === 'localhost') return true;
  const family = isIP(name);
  return family !== 0 && LOOPBACK.check(name, family === 6 ? 'ipv6' : 'ipv4');
}

/** The canonical host and the port (`''` for none) a Host header names; null when it names none. */
export function hostHeaderParts(header: string): { host: string; port: string } | null {
  // A Host header is a name or an address and a port: nothing a URL would read as more.
  if (!/^[\w.:[\]-]+$/.test(header)) return null;
  let url: URL;
  try {
    url = new URL(`http://${header}/`);
  } catch {
    return null;
  }
  return { host: unbracketed(url.hostname), port: url.port };
}
