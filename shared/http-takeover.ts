// Takes a socket away from Node's HTTP server when an upgrade arrived as an ordinary request. That happens when the
// request carries `Upgrade` but its `Connection` lacks "upgrade" (some proxies rewrite Connection; the router tunnels
// such requests through unchanged): Node then emits 'request', not 'upgrade', and keeps parsing the socket as HTTP —
// the first Noise or DERP frame would be a parse error and Node would answer it with a 400 in the middle of the
// stream. Used by the coordination service (/ts2021), the relay (/derp), and the router once a service has answered
// such a request with 101 (the router then owns the raw bytes both ways).
//
// Node has no public API for this, so we undo what the server set up in its connection listener, the same steps it
// takes itself before emitting 'upgrade' (stop the parser consuming the socket, drop its listeners, forget the
// response object). This leans on Node internals: it is checked against the pinned Node 24 by
// test/coordination/noise-upgrade.test.ts and the relay's tests, and when an expected piece is missing it returns null, so the caller
// refuses the request with a hint instead of corrupting the connection.
import type net from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';

interface NodeParser {
  _consumed?: boolean;
  unconsume?: () => void;
  remove?: () => void;
  finish?: () => void;
}

type ServerSocket = net.Socket & { parser?: NodeParser | null; _httpMessage?: (ServerResponse & { req?: IncomingMessage }) | null };

/** Listeners Node's HTTP server puts on every connection (by function name; bound ones are prefixed "bound "). */
const SERVER_LISTENERS: Record<string, string[]> = {
  data: ['bound socketOnData'],
  end: ['bound socketOnEnd'],
  close: ['bound socketOnClose'],
  drain: ['bound socketOnDrain'],
  error: ['socketOnError'],
  timeout: ['socketOnTimeout'],
  pause: ['onSocketPause'],
  resume: ['onSocketResume'],
};

export function takeOverRequestSocket(req: IncomingMessage): net.Socket | null {
  const socket = req.socket as ServerSocket;
  // A body not yet read would still be in the parser's hands. Neither the control protocol nor DERP sends one; the
  // router forwards an upgrade's body to the service before its 101, so the request is complete by then.
  const length = req.headers['content-length'];
  if (!req.complete && (req.headers['transfer-encoding'] || (length !== undefined && length !== '0'))) return null;
  const parser = socket.parser;
  if (!parser || typeof parser.unconsume !== 'function') return null;
  const res = socket._httpMessage;
  if (res && res.req !== req) return null; // an earlier pipelined response is still pending on this socket

  if (parser._consumed) parser.unconsume();
  parser._consumed = false;
  // Out of the server's connection list, so server.close() does not reap it as an idle keep-alive connection.
  parser.remove?.();
  socket.parser = null;
  (req as IncomingMessage & { parser?: unknown }).parser = null;
  res?.detachSocket(socket);
  for (const [event, names] of Object.entries(SERVER_LISTENERS)) {
    for (const fn of socket.listeners(event)) {
      if (names.includes((fn as { name: string }).name)) socket.removeListener(event, fn as (...a: unknown[]) => void);
    }
  }
  // The server wrapped these to re-route 'data' listeners into its parser; give the socket its own back.
  for (const m of ['on', 'addListener', 'prependListener', 'setEncoding'] as const) {
    if (Object.hasOwn(socket, m)) delete (socket as unknown as Record<string, unknown>)[m];
  }
  socket.setTimeout(0);
  return socket;
}
