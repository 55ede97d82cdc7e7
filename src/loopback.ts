import { BlockList, isIP } from 'node:net';

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/**
 * Whether only this machine can connect to `host`: `localhost`, 127.0.0.0/8 and ::1 in any
 * spelling, IPv4-mapped ones (`::ffff:127.0.0.1`) included. A name that is not an address
 * (other than localhost) is not known to be loopback.
 */
export function isLoopback(host: string): boolean {
  if (host.toLowerCase() === 'localhost') return true;
  const family = isIP(host);
  return family !== 0 && LOOPBACK.check(host, family === 6 ? 'ipv6' : 'ipv4');
}
