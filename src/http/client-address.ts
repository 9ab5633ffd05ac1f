// Who a client is, for the limits that count by address (failed authentications, open connections).
// An IPv4 address is one client. An IPv6 address is not: a host is given a /64 at least (RFC 6177),
// and takes any address in it at will, so one counted by its whole address got a fresh limit for each
// guess (a review sent 100 wrong passwords from one /64 with no 429; from one address, 10 then 429s).
// So an IPv6 client is its /64, and an IPv4 address written as IPv6 (::ffff:192.0.2.1) is the IPv4 one.
//
// Behind TRUST_PROXY the address is the proxy's X-Forwarded-For, as the proxy wrote it: some write a
// port after it (`192.0.2.1:1001`, `2001:db8:0:0:0:0:0:1:443`) or brackets round an IPv6 one
// (`[2001:db8::1]:443`), and an IPv4 address may come as IPv6 in hex (`::ffff:c000:201`). Each is read
// by ipaddr.js as the address it is; until 2026-11-29 each was counted as typed, so a new port was a
// new client, unthrottled (a review). What still reads as no address is counted as typed: it is the
// proxy's writing, not the client's, and one key for all such let one client lock out every other
// (a review of the first version of this fix).
import ipaddr from 'ipaddr.js';

/** A dotted IPv4 address (as the socket gives one), or one written as IPv6 that way (a server listening on `::`): counted at once, without a parser. */
const DOTTED = /^(?:::ffff:)?((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3})$/i;

/** A key this function made for an IPv6 client: its /64. */
const SLASH_64 = /^[0-9a-f]{1,4}(?::[0-9a-f]{1,4}){3}::\/64$/;

/** Keys of the addresses read lately: parsing an IPv6 address costs microseconds, on every request (mayBlock). Bounded, as addresses come from clients. */
const lately = new Map<string, string>();
const LATELY_MAX = 4096;

/** The key a client address is counted under: an IPv4 address as it is, an IPv6 address as its /64 (`2001:db8:1:2::/64`). A key given again is itself. */
export function addressKey(address: string): string {
  const dotted = DOTTED.exec(address);
  if (dotted) return dotted[1]!;
  if (SLASH_64.test(address)) return address;
  let key = lately.get(address);
  if (key === undefined) {
    key = read(address);
    if (lately.size >= LATELY_MAX) lately.clear();
    lately.set(address, key);
  }
  return key;
}

function read(address: string): string {
  // A port after it, brackets round it: [2001:db8::1]:443, [2001:db8::1], 192.0.2.1:1001, ::ffff:192.0.2.1:80, eight groups and a port.
  const bare =
    /^\[([^\]]*)\](?::\d+)?$/.exec(address)?.[1] ??
    /^(.*\d\.\d{1,3}):\d+$/.exec(address)?.[1] ??
    (address.split(':').length === 9 ? /^(.*):\d+$/.exec(address)?.[1] : undefined) ??
    address;
  if (!ipaddr.isValid(bare)) return address;
  const parsed = ipaddr.process(bare); // an IPv4 address written as IPv6, in any form, is the IPv4 one
  if (parsed.kind() === 'ipv4') return parsed.toString();
  return `${(parsed as ipaddr.IPv6).parts.slice(0, 4).map((n) => n.toString(16)).join(':')}::/64`;
}
