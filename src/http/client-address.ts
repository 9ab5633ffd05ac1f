// Who a client is, for the limits that count by address (failed authentications, open connections).
// An IPv4 address is one client. An IPv6 address is not: a host is given a /64 at least (RFC 6177),
// and takes any address in it at will, so one counted by its whole address got a fresh limit for each
// guess (a review sent 100 wrong passwords from one /64 with no 429; from one address, 10 then 429s).
// So an IPv6 client is its /64, and an IPv4 address written as IPv6 (::ffff:192.0.2.1) is the IPv4 one.

/** The key a client address is counted under: an IPv4 address as it is, an IPv6 address as its /64 (`2001:db8:1:2::/64`). Anything else as it is. */
export function addressKey(address: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (!address.includes(':') || address.endsWith('/64')) return address;
  const [head = '', tail] = address.split('%')[0]!.split('::');
  const groups = (part: string | undefined) => (part ? part.split(':') : []);
  const left = groups(head);
  const right = groups(tail);
  // A dotted IPv4 tail (64:ff9b::192.0.2.1) is two groups; it never reaches the first four.
  const width = (gs: string[]) => gs.reduce((n, g) => n + (g.includes('.') ? 2 : 1), 0);
  const all = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - width(left) - width(right))).fill('0'), ...right];
  const prefix = all.slice(0, 4).map((g) => Number.parseInt(g, 16));
  if (prefix.length < 4 || prefix.some((n) => !Number.isInteger(n) || n < 0 || n > 0xffff)) return address;
  return `${prefix.map((n) => n.toString(16)).join(':')}::/64`;
}
