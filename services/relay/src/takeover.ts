// Taking a socket away from Node's HTTP server for an upgrade that arrived as an ordinary request.
//
// Node emits 'upgrade' only when Connection lists "upgrade". The router always sends it, but a request that reaches
// this socket with `Upgrade: DERP` and no such Connection token (a client or tool run straight against the socket)
// lands in the request handler, its socket still read by the server's HTTP parser. We do what Node's own upgrade
// path does (lib/_http_server.js, onParserExecuteCommon): stop the parser consuming the socket natively
// (unconsume), drop it from the server's connection list (remove, so no request timeout fires on a tunnel), and
// remove the listeners that feed it. The 'close' listener stays, so the server still frees its request state.
// Bytes the client sent after its head before our 101 were parsed as HTTP and are lost; DERP and WebSocket clients
// wait for the 101 (a Derp-Fast-Start client does not, so it needs the upgrade path).
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

interface InternalParser {
  _consumed?: boolean;
  unconsume?: () => void;
  remove?: () => void;
}

const PARSER_LISTENERS = ['data', 'end', 'drain', 'error', 'timeout', 'pause', 'resume'] as const;

/** The request's socket, detached from the HTTP server; null when this Node's internals do not allow it. */
export function takeOverRequestSocket(req: IncomingMessage): Socket | null {
  const socket = req.socket as Socket & { parser?: InternalParser | null };
  const parser = socket.parser;
  if (!parser || typeof parser.unconsume !== 'function' || typeof parser.remove !== 'function') return null;
  if (parser._consumed) parser.unconsume();
  parser._consumed = false;
  parser.remove();
  socket.parser = null;
  for (const event of PARSER_LISTENERS) {
    for (const listener of socket.listeners(event)) socket.removeListener(event, listener as (...args: unknown[]) => void);
  }
  socket.setTimeout(0);
  return socket;
}
