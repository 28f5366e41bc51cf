// The STUN server: UDP sockets on HSE_STUN_PORT that answer binding requests with the sender's address as seen here.
// One socket per listen address (by default 0.0.0.0 and :: with IPv6-only set, so each family has its own socket and
// replies leave from the family they came in on). A host without IPv6 gets a warning and IPv4 service.
import dgram from 'node:dgram';
import type { Logger } from '../../../shared/log.ts';
import { bindingResponse, parseBindingRequest } from './stun.ts';

export interface StunStats {
  answered: number;
  ignored: number;
}

/** Errors that mean "this host has no IPv6 here", not "something is wrong". */
const NO_IPV6 = new Set(['EAFNOSUPPORT', 'EADDRNOTAVAIL', 'EPROTONOSUPPORT']);

export class StunServer {
  readonly stats: StunStats = { answered: 0, ignored: 0 };
  private readonly log: Logger;
  private readonly sockets: dgram.Socket[] = [];

  constructor(log: Logger) {
    this.log = log;
  }

  /** Binds every address; returns the "address:port" list actually served. Throws when none could be bound. */
  async listen(addresses: string[], port: number): Promise<string[]> {
    const served: string[] = [];
    for (const address of addresses) {
      const v6 = address.includes(':');
      try {
        const socket = await this.bind(address, port, v6);
        this.sockets.push(socket);
        served.push(v6 ? `[${address}]:${port}` : `${address}:${port}`);
      } catch (e) {
        const err = e as NodeJS.ErrnoException;
        if (v6 && NO_IPV6.has(err.code ?? '')) {
          this.log.warn('IPv6 unavailable; STUN answers IPv4 only', { address, error: err.code });
          continue;
        }
        const hint =
          err.code === 'EADDRINUSE'
            ? ` (another program holds UDP ${port}; stop it or set HSE_STUN_PORT)`
            : err.code === 'EACCES'
              ? ` (ports below 1024 need privileges; set HSE_STUN_PORT)`
              : '';
        throw new Error(`cannot listen for STUN on UDP ${address} port ${port}: ${err.code ?? err.message}${hint}`);
      }
    }
    if (served.length === 0) throw new Error(`STUN could not listen on any of ${addresses.join(', ')}`);
    return served;
  }

  private bind(address: string, port: number, v6: boolean): Promise<dgram.Socket> {
    const socket = dgram.createSocket({ type: v6 ? 'udp6' : 'udp4', ipv6Only: v6 });
    return new Promise((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(port, address, () => {
        socket.removeListener('error', reject);
        // After binding, an error concerns one datagram at most; the server carries on.
        socket.on('error', (e: Error) => this.log.warn('STUN socket error', { address, error: e.message }));
        socket.on('message', (msg, rinfo) => this.onMessage(socket, msg, rinfo));
        resolve(socket);
      });
    });
  }

  private onMessage(socket: dgram.Socket, msg: Buffer, rinfo: dgram.RemoteInfo): void {
    const req = parseBindingRequest(msg);
    const res = req && bindingResponse(req.txId, rinfo.address, rinfo.port);
    if (!res) {
      this.stats.ignored++;
      return;
    }
    this.stats.answered++;
    socket.send(res, rinfo.port, rinfo.address, (e) => {
      if (e) this.log.debug('STUN reply not sent', { to: rinfo.address, error: e.message });
    });
  }

  close(): void {
    for (const s of this.sockets.splice(0)) s.close();
  }
}
