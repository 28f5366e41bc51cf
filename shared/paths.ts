// Where each process finds the others: Unix sockets in the private run directory (mode 700), so nothing but the
// router is reachable from outside and no client can bypass it to forge the headers it sets.
import fs from 'node:fs';
import type { Server } from 'node:net';
import path from 'node:path';
import type { Config } from './config.ts';

export type ServiceName = 'coordination' | 'console' | 'relay';

export function serviceSocket(cfg: Config, service: ServiceName): string {
  return path.join(cfg.runDir, `${service}.sock`);
}

/** The coordination service's admin API (console and `hse` CLI only; never routed). */
export function adminSocket(cfg: Config): string {
  return path.join(cfg.runDir, 'coordination-admin.sock');
}

export function redisSocket(cfg: Config): string {
  return path.join(cfg.runDir, 'redis.sock');
}

/** Creates data and run directories with owner-only permissions. */
export function ensureDirs(cfg: Config): void {
  fs.mkdirSync(cfg.dataDir, { recursive: true, mode: 0o700 });
  fs.mkdirSync(cfg.runDir, { recursive: true, mode: 0o700 });
  fs.chmodSync(cfg.runDir, 0o700);
}

/** Removes a stale socket file left by a killed process, then lets the caller listen on it. */
export function clearSocket(file: string): void {
  try {
    fs.unlinkSync(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
}

/**
 * Listens on a Unix socket in the run directory: a stale file from a killed process is removed first, and only this
 * user (the router runs as the same user) may connect.
 */
export function listenOnSocket(server: Server, file: string): Promise<void> {
  clearSocket(file);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(file, () => {
      server.off('error', reject);
      fs.chmodSync(file, 0o600);
      resolve();
    });
  });
}

/** Header the router always sets to the resolved client address; services read only this. */
export const CLIENT_IP_HEADER = 'x-hse-client-ip';
