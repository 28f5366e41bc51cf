// Taking a client socket away from Node's HTTP server, for an upgrade that arrived as an ordinary request.
//
// Node emits 'upgrade' (with the socket handed over) only when the request's Connection header lists "upgrade". A
// request that carries `Upgrade:` but whose Connection does not (a proxy that passes Upgrade but sends
// `Connection: close`, as nginx does by default) arrives in the 'request' handler with the socket still owned by the
// server's HTTP parser. When the service answers 101 we must own the raw bytes that follow, so we do what Node does
// itself on its upgrade path:
//   - remove the server's socket listeners that feed the parser or act on its behalf ('data', 'end', 'drain',
//     'error', 'timeout'); the 'close' listener stays so the server still frees its parser and request state;
//   - add our own 'data' consumer (the caller pipes the socket), which makes Node stop consuming the socket's handle
//     natively, so every byte from now on reaches us and none reaches the parser.
// Bytes the client sent after the head *before* our 101 (it should wait for it) were already parsed as a next
// request and cannot be recovered; real clients (Tailscale, DERP, WebSocket) wait.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

const SERVER_LISTENERS = ['data', 'end', 'drain', 'error', 'timeout'] as const;

/** Detaches `req.socket` from the HTTP server. Call it only once the upstream has switched protocols. */
export function takeOverSocket(req: IncomingMessage): Socket {
  const socket = req.socket;
  for (const event of SERVER_LISTENERS) {
    for (const listener of socket.listeners(event)) socket.removeListener(event, listener as (...args: unknown[]) => void);
  }
  socket.setTimeout(0);
  return socket;
}
