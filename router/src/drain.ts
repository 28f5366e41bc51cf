// Graceful stop on SIGTERM/SIGINT (pm2 stop, docker stop):
//   1. stop accepting: the listening sockets close, so new connections are refused at once and the supervisor's
//      next instance (or the proxy's retry) can take over; idle keep-alive connections are closed;
//   2. let requests already in flight finish, up to a deadline, answering them with `Connection: close`;
//   3. close the tunnels (Noise control sessions, DERP): they never finish on their own, and the clients reconnect;
//   4. the caller exits 0.
// Long-polls that are still open at the deadline are cut like tunnels; their clients retry too.
import type http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TunnelSet } from './tunnel.ts';

export class Drain {
  private inFlight = 0;
  private idleWaiters: (() => void)[] = [];
  private readonly servers: http.Server[] = [];
  draining = false;

  addServer(server: http.Server): void {
    this.servers.push(server);
  }

  /** Counts a forwarded request until its response is finished or its connection gone. */
  track(res: http.ServerResponse): void {
    this.inFlight++;
    res.once('close', () => {
      this.inFlight--;
      if (!this.draining) return;
      // The connection it ran on may now be idle; close it rather than wait for keep-alive to expire.
      for (const s of this.servers) s.closeIdleConnections();
      if (this.inFlight === 0) for (const w of this.idleWaiters.splice(0)) w();
    });
  }

  get requestsInFlight(): number {
    return this.inFlight;
  }

  /** Runs the drain; resolves true if every request finished before the deadline. */
  async run(tunnels: TunnelSet, deadlineMs: number): Promise<boolean> {
    this.draining = true;
    for (const s of this.servers) s.close();
    const ac = new AbortController();
    const idle = this.inFlight === 0 ? Promise.resolve(true) : new Promise<boolean>((resolve) => this.idleWaiters.push(() => resolve(true)));
    const clean = await Promise.race([idle, sleep(deadlineMs, false, { signal: ac.signal }).catch(() => false)]);
    ac.abort();
    tunnels.closeAll();
    for (const s of this.servers) s.closeAllConnections();
    return clean;
  }
}
