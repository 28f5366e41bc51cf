// The skeleton every hse process runs in, so they all behave the same way for the operator:
//
//   settings   loadConfig() once; a refused setting is one line naming the variable, exit 2 (config.ts).
//   logger     one Logger named for the process (the settings' warnings are printed once by loadConfig).
//   start      the service's own wiring (its main.ts) returns how to stop it. A StartupError (damaged key file,
//              unwritable data directory, ...) is one line naming the file or variable and the reason, exit 2: the
//              supervisor does not restart it (ecosystem.config.js, stop_exit_codes), because a restart cannot fix
//              what the operator must. Any other failure to start is logged and exits 1, which is retried.
//   signals    SIGTERM / SIGINT: the service stops within one drain deadline (DRAIN_DEADLINE_MS), then the process
//              exits 0 (and notes the clean stop, so the next start is not slowed); a second signal exits at once.
//   backoff    a process that exited soon after its previous start waits 0.5 s, growing ×1.5 to 15 s, before it
//              starts again (shared/restart-backoff.ts).
//   bugs       an uncaught exception or unhandled rejection is logged with its stack and the process exits 1, so the
//              supervisor restarts it in a known state — never swallowed and carried on in an unknown one.
//
// It also makes the HTTP servers the services listen with on their private sockets (createServiceServer): the same
// 32 KiB head limit the router admits, no clocks on bodies or long-polls (the router guards slow heads), and one
// answer to a malformed request.
import type http from 'node:http';
import * as nodeHttp from './node-http.ts';
import type { Duplex } from 'node:stream';
import { type Config, loadConfig } from './config.ts';
import { StartupError } from './errors.ts';
import { Logger } from './log.ts';
import { ensureDirs } from './paths.ts';
import { stoppedCleanly, waitAfterQuickExit } from './restart-backoff.ts';

/** How long a service gets to finish in-flight work after SIGTERM. pm2's kill_timeout (15 s) is longer. */
export const DRAIN_DEADLINE_MS = 10_000;

/** The largest request head any hse server accepts; the router admits this much, so every service must too. */
export const MAX_HEADER_BYTES = 32 * 1024;

export interface ServiceContext {
  cfg: Config;
  log: Logger;
}

export interface RunningService {
  /** Stops accepting work and finishes or ends what is in flight by `deadline` (ms since epoch). */
  stop(deadline: number): Promise<void>;
  /** What is in flight, for the "shutting down" log line (open streams, clients, ...). */
  inFlight?(): Record<string, unknown>;
}

export type ProcessName = 'router' | 'coordination' | 'console' | 'relay';

/** Prints the one-line refusal of a StartupError and exits 2. */
export function exitForStartupError(name: string, e: StartupError): never {
  process.stderr.write(`hse ${name}: cannot start: ${e.subject}: ${e.reason}\n`);
  process.exit(2);
}

/** Creates the data and run directories, or refuses to start naming the directory and why. */
function prepareDirs(cfg: Config): void {
  try {
    ensureDirs(cfg);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const variable = err.path?.startsWith(cfg.runDir) ? 'HSE_RUN_DIR' : 'HSE_DATA_DIR';
    const why = err.code === 'EACCES' || err.code === 'EPERM' ? 'permission denied for this user' : (err.code ?? err.message);
    throw new StartupError(variable, `cannot create or use ${err.path ?? cfg.dataDir}: ${why}`);
  }
}

/**
 * Runs a service: settings, logger, directories, then `start`; wires signals and the crash policy. `start` returns
 * once the service listens (it logs its own "listening" line).
 */
export function runService(kind: ProcessName, start: (ctx: ServiceContext) => Promise<RunningService>): void {
  const cfg = loadConfig(kind);
  // The further router processes of HSE_ROUTER_PROCESSES log, and keep their restart backoff, under names of their own.
  const name = kind === 'router' && cfg.routerInstance > 1 ? `router-${cfg.routerInstance}` : kind;
  const log = new Logger(name, cfg.logLevel);
  let running: RunningService | null = null;
  let stopping = false;

  // Output that can no longer be written (the supervisor's pipe closed) is no reason to stop serving, and a write error
  // reported as a crash would be written to the same closed pipe again: ignore it.
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});
  process.on('uncaughtException', (e: Error) => {
    log.error('unexpected error; exiting so the supervisor restarts this process', { error: e.stack ?? e.message });
    process.exit(1);
  });
  process.on('unhandledRejection', (reason: unknown) => {
    log.error('unhandled promise rejection; exiting so the supervisor restarts this process', { error: (reason as Error)?.stack ?? String(reason) });
    process.exit(1);
  });

  const stop = (signal: string): void => {
    if (stopping) {
      log.warn(`second ${signal}: exiting without waiting`);
      process.exit(0);
    }
    stopping = true;
    const deadline = Date.now() + DRAIN_DEADLINE_MS;
    log.info('shutting down', { signal, ...running?.inFlight?.(), deadlineMs: DRAIN_DEADLINE_MS });
    // Whatever is still running at the deadline is cut off: the exit does not wait for it.
    setTimeout(() => {
      log.warn('work still in flight at the stop deadline; exiting anyway');
      process.exit(0);
    }, DRAIN_DEADLINE_MS + 500).unref();
    const done = running ? running.stop(deadline) : Promise.resolve();
    done
      .catch((e: Error) => log.warn('error while stopping', { error: e.message }))
      .finally(() => {
        log.info('stopped');
        stoppedCleanly(cfg.runDir, name);
        process.exit(0);
      });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  void (async () => {
    try {
      prepareDirs(cfg);
      // A process that keeps exiting soon after starting waits longer each time (pm2 restarts at once; see
      // shared/restart-backoff.ts for why the backoff lives here).
      await waitAfterQuickExit(cfg.runDir, name);
      running = await start({ cfg, log });
      if (stopping) await running.stop(Date.now() + DRAIN_DEADLINE_MS);
    } catch (e) {
      if (e instanceof StartupError) {
        // Final, not a crash: the next start (after the operator's fix) must not wait as if it were a restart loop.
        stoppedCleanly(cfg.runDir, name);
        exitForStartupError(name, e);
      }
      log.error('could not start', { error: (e as Error).stack ?? String(e) });
      process.exit(1);
    }
  })();
}

/**
 * An HTTP server for a service's private Unix socket. Long-polls, live tails and tunnels last hours, so there is no
 * request or idle timeout (the router limits slow heads); heads up to MAX_HEADER_BYTES are accepted, as the router
 * admits them; a request Node cannot parse gets 400 (431 for an oversized head) and the connection is closed.
 */
export function createServiceServer(log: Logger, handler?: http.RequestListener): http.Server {
  const server = nodeHttp.createServer({ maxHeaderSize: MAX_HEADER_BYTES }, handler);
  server.requestTimeout = 0;
  server.timeout = 0;
  server.keepAliveTimeout = 65_000;
  server.on('clientError', (e: NodeJS.ErrnoException, socket: Duplex) => {
    log.debug('malformed request from the router', { error: e.message });
    if (socket.destroyed) return;
    const status = e.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : '400 Bad Request';
    socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  });
  return server;
}

/** Closes a server and resolves when its connections are gone or at `deadline`, whichever is first. */
export function closeServer(server: http.Server, deadline: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(
      () => {
        server.closeAllConnections();
        resolve();
      },
      Math.max(0, deadline - Date.now()),
    );
    timer.unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}
