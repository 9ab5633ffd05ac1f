// Limits on connections, so that slow or idle clients cannot exhaust the server: how long a request
// may take to arrive, how long an idle connection is kept, and how many connections one client
// address may hold open at once.
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import proxyAddr from '@fastify/proxy-addr';
import { DEFAULT_CONNECTIONS_PER_ADDRESS } from '../config.js';

export interface ConnectionLimits {
  /** All of a request's headers must arrive within this (Node's headersTimeout). */
  headersMs: number;
  /** The whole request, body included, must arrive within this; then 408 and the connection is closed (requestTimeout). */
  requestMs: number;
  /** An idle keep-alive connection is closed after this (keepAliveTimeout). */
  keepAliveMs: number;
  /** How often Node looks for requests past those deadlines (connectionsCheckingInterval). */
  checkEveryMs: number;
  /** Open connections one client address may hold; 0 for no limit. Connections from trusted proxies are not counted. */
  perAddress: number;
}

export const CONNECTION_LIMITS: ConnectionLimits = {
  headersMs: 10_000,
  requestMs: 30_000,
  keepAliveMs: 72_000,
  checkEveryMs: 1000,
  perAddress: DEFAULT_CONNECTIONS_PER_ADDRESS,
};

/**
 * Refuses a connection from an address that already holds `max` open ones: an HTTP client gets a
 * 429 with a JSON message before the connection is closed; over TLS it is closed at once (no
 * handshake is spent on it). Addresses `trustProxy` trusts are never counted: a proxy's connections
 * carry many clients, and the proxy's own limits apply to them.
 */
export function limitConnectionsPerAddress(server: Server, max: number, trustProxy: boolean | string, tls: boolean): void {
  if (max <= 0 || trustProxy === true) return;
  const trusted = trustProxy === false ? () => false : proxyAddr.compile(trustProxy.split(',').map((s) => s.trim()));
  const open = new Map<string, number>();
  server.prependListener('connection', (socket: Socket) => {
    const address = (socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    if (trusted(address, 0)) return;
    const count = (open.get(address) ?? 0) + 1;
    if (count > max) {
      socket.on('error', () => {});
      if (tls) return void socket.destroy();
      return void socket.end(TOO_MANY_CONNECTIONS, () => socket.destroy());
    }
    open.set(address, count);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
}

const REFUSAL = JSON.stringify({ message: 'Too many open connections from this address. Close some, or try again shortly.' });
const TOO_MANY_CONNECTIONS =
  'HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json; charset=utf-8\r\n' +
  `Content-Length: ${Buffer.byteLength(REFUSAL)}\r\nRetry-After: 1\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n${REFUSAL}`;
