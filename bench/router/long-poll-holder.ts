// Stand-in upstream for the long-poll measurement: on a Unix socket, answers every request with 200 and one small
// chunk, then holds the response open and silent, as a map stream between updates. Run as its own process so its
// sockets neither count against the load client's file limit nor its memory against the proxy's.
//
//   node bench/router/long-poll-holder.ts <socket path>
import fs from 'node:fs';
import http from 'node:http';

const socketPath = process.argv[2];
if (!socketPath) {
  process.stderr.write('usage: long-poll-holder.ts <unix socket path>\n');
  process.exit(2);
}
let held = 0;
const server = http.createServer((req, res) => {
  held++;
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'cache-control': 'no-store' });
  res.write('{}\n');
  req.socket.once('close', () => held--);
});
server.requestTimeout = 0;
server.headersTimeout = 60_000;
server.keepAliveTimeout = 0;
server.timeout = 0;
try {
  fs.unlinkSync(socketPath);
} catch {
  // nothing to clear
}
server.listen(socketPath, () => process.stdout.write(`long-poll holder listening on ${socketPath}\n`));
setInterval(() => process.stdout.write(`held ${held}\n`), 5000).unref();
process.on('SIGTERM', () => process.exit(0));
