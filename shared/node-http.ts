// node:http's functions, loaded without the cost of an ES-module import of it. An `import … from 'node:http'` in an
// ES module makes Node build the module's namespace, which reads every export once, and node:http's WebSocket,
// CloseEvent and MessageEvent exports are lazy getters that load undici (fetch, WebSocket, web streams, and with them
// tls, http2, zlib, perf_hooks, worker_threads): +2.3 MiB of heap and ~13 MiB resident in a process that uses none of
// it (Node 24.21, measured with process.moduleLoadList and RSS; bench/README.md, memory at rest). require() reads no
// export it is not asked for. Types come from `import type … from 'node:http'` as before.
import type * as Http from 'node:http';
import { createRequire } from 'node:module';

const http = createRequire(import.meta.url)('node:http') as typeof Http;

export const createServer: typeof Http.createServer = http.createServer;
export const request: typeof Http.request = http.request;
export const Agent: typeof Http.Agent = http.Agent;
export const get: typeof Http.get = http.get;
