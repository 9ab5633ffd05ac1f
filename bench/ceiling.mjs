// The ceiling: a bare node:http server answering every request with a fixed small JSON body,
// the same shape and size as Almoner's /me answer. Prints {"port":N} on stdout once listening.
import http from 'node:http';

const body = Buffer.from(JSON.stringify({ success: true, message: 'Authenticated', data: { name: 'Bench', email: 'bench@example.org' } }));
const headers = { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length };

const server = http.createServer((req, res) => {
  req.resume(); // read and discard any body, as a real server must before answering on a kept-alive connection
  res.writeHead(200, headers);
  res.end(body);
});
server.keepAliveTimeout = 72_000; // like Fastify's default; connections stay open for the whole run
server.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n'));
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
// Never outlive the harness: it holds our stdin open, and it closes when the harness goes.
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
