// Who a client is, for the limits that count by address (failed authentications, open connections).
// An IPv4 address is one client. An IPv6 address is not: a host is given a /64 at least (RFC 6177),
// and takes any address in it at will, so one counted by its whole address got a fresh limit for each
// guess (a review sent 100 wrong passwords from one /64 with no 429; from one address, 10 then 429s).
// So an IPv6 client is its /64, and an IPv4 address written as IPv6 (::ffff:192.0.2.1) is the IPv4 one.
//
// Behind TRUST_PROXY the address is the proxy's X-Forwarded-For, as the proxy wrote it: some write a
// port after it (`192.0.2.1:1001`) or brackets round an IPv6 one (`[2001:db8::1]:443`), and an
// IPv4 address may come as IPv6 in hex (`::ffff:c000:201`). Each is read by ipaddr.js as the address it
// is; until 2026-11-29 each was counted as typed, so a new port was a new client, unthrottled (a review).
import ipaddr from 'ipaddr.js';

/** A dotted IPv4 address as the socket gives one (no leading zeros, which ipaddr.js reads as octal): counted as it is, at once. */
const PLAIN_IPV4 = /^(?:0|[1-9]\d{0,2})(?:\.(?:0|[1-9]\d{0,2})){3}$/;

/** What the limits count an address that is none under: one client, so that garbage from a proxy shares one allowance rather than having one each. */
export const UNREADABLE_ADDRESS = 'unreadable';

/** The key a client address is counted under: an IPv4 address as it is, an IPv6 address as its /64 (`2001:db8:1:2::/64`). A key given again is itself. */
export function addressKey(address: string): string {
  if (PLAIN_IPV4.test(address) || address.endsWith('::/64') || address === UNREADABLE_ADDRESS) return address;
  // A port after it, brackets round it: [2001:db8::1]:443, [2001:db8::1], 192.0.2.1:1001.
  const bare = /^\[([^\]]*)\](?::\d+)?$/.exec(address)?.[1] ?? /^([\d.]+):\d+$/.exec(address)?.[1] ?? address;
  if (!ipaddr.isValid(bare)) return UNREADABLE_ADDRESS;
  const parsed = ipaddr.process(bare); // an IPv4 address written as IPv6, in any form, is the IPv4 one
  if (parsed.kind() === 'ipv4') return parsed.toString();
  return `${(parsed as ipaddr.IPv6).parts.slice(0, 4).map((n) => n.toString(16)).join(':')}::/64`;
}
