// A relay (DERP) user that reconnects by itself, for crash tests: our DERP client (services/relay/src/derp-client.ts)
// through the router with a registered node's private key, reopened with backoff whenever the relay or the router
// goes away. `ready` is true once the relay's ServerInfo arrived on the current connection.
import { setTimeout as sleep } from 'node:timers/promises';
import { DerpClient } from '../../../services/relay/src/derp-client.ts';

export class SimDerp {
  readonly port: number;
  readonly privateKey: Buffer;
  client: DerpClient | null = null;
  ready = false;
  /** When the current connection got its ServerInfo (ms since epoch). */
  readySince = 0;
  connections = 0;
  /** Restarting frames received (the relay said goodbye before going away). */
  restartingFrames = 0;
  lastError = '';
  private running = false;
  private loop: Promise<void> | null = null;

  constructor(port: number, privateKey: Buffer) {
    this.port = port;
    this.privateKey = privateKey;
  }

  start(): void {
    this.running = true;
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    let backoff = 250;
    while (this.running) {
      try {
        const c = await DerpClient.connect({ host: '127.0.0.1', port: this.port, privateKey: this.privateKey });
        this.client = c;
        await c.waitFor('serverInfo', () => true, 10_000);
        this.ready = true;
        this.readySince = Date.now();
        this.connections++;
        backoff = 250;
        // Read until the connection ends; note a goodbye.
        for (;;) {
          const m = await c.recv(3_600_000);
          if (m.type === 'restarting') this.restartingFrames++;
        }
      } catch (e) {
        this.lastError = (e as Error).message;
      }
      this.ready = false;
      this.client?.close();
      this.client = null;
      if (!this.running) break;
      await sleep(Math.floor(backoff / 2 + Math.random() * (backoff / 2)));
      backoff = Math.min(backoff * 2, 8_000);
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    this.client?.close();
    await this.loop;
  }
}
