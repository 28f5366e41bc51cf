// A small authoritative DNS server on loopback for split-DNS tests: answers A/AAAA queries for the names it is given,
// NXDOMAIN for everything else, over UDP and TCP on the same port (the Tailscale client's forwarder sends UDP and
// races TCP for queries that arrived over TCP: tailscale net/dns/resolver/forwarder.go). Every question it gets is
// recorded, so a test can tell that an answer came from here and not from somewhere else.
import dgram from 'node:dgram';
import net from 'node:net';
import dnsPacket from 'dns-packet';
import { freeUdpPort } from './process.ts';

export interface DnsServer {
  port: number;
  /** "127.0.0.1:<port>", as a resolver address. */
  addr: string;
  /** Names asked, lowercase without the trailing dot, in order. */
  asked: string[];
  stop(): Promise<void>;
}

/** records: name (no trailing dot) -> addresses; IPv4 answers A questions, IPv6 AAAA. */
export async function startDnsServer(records: Record<string, string[]>): Promise<DnsServer> {
  const asked: string[] = [];
  const table = new Map(Object.entries(records).map(([k, v]) => [k.toLowerCase().replace(/\.$/, ''), v]));

  const answer = (query: Buffer): Buffer => {
    const q = dnsPacket.decode(query);
    const question = q.questions?.[0];
    const name = (question?.name ?? '').toLowerCase().replace(/\.$/, '');
    asked.push(name);
    const addrs = table.get(name);
    const answers = (addrs ?? [])
      .filter((a) => (question?.type === 'A' && net.isIPv4(a)) || (question?.type === 'AAAA' && net.isIPv6(a)))
      .map((data) => ({ type: question!.type as 'A' | 'AAAA', class: 'IN' as const, name: question!.name, ttl: 60, data }));
    return dnsPacket.encode({
      id: q.id,
      type: 'response',
      // The rcode is the low four bits of the flags (dns-packet encodes no separate field): 3 = NXDOMAIN.
      flags: dnsPacket.AUTHORITATIVE_ANSWER | ((q.flags ?? 0) & dnsPacket.RECURSION_DESIRED) | (addrs ? 0 : 3),
      questions: q.questions,
      answers,
    });
  };

  // The same port for both: a free UDP port, then TCP on it (retried if TCP happens to be taken there).
  for (let attempt = 0; ; attempt++) {
    const port = await freeUdpPort();
    const udp = dgram.createSocket('udp4');
    const tcp = net.createServer((sock) => {
      let buf = Buffer.alloc(0);
      sock.on('data', (d: Buffer) => {
        buf = Buffer.concat([buf, d]);
        while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
          const len = buf.readUInt16BE(0);
          const reply = answer(buf.subarray(2, 2 + len));
          buf = buf.subarray(2 + len);
          const head = Buffer.alloc(2);
          head.writeUInt16BE(reply.length);
          sock.write(Buffer.concat([head, reply]));
        }
      });
      sock.on('error', () => {});
    });
    udp.on('message', (msg, rinfo) => {
      try {
        udp.send(answer(msg), rinfo.port, rinfo.address);
      } catch {
        // not a DNS query; ignore it as a real server would
      }
    });
    try {
      await new Promise<void>((resolve, reject) => {
        udp.once('error', reject);
        udp.bind(port, '127.0.0.1', () => resolve());
      });
      await new Promise<void>((resolve, reject) => {
        tcp.once('error', reject);
        tcp.listen(port, '127.0.0.1', () => resolve());
      });
    } catch (e) {
      udp.close();
      tcp.close();
      if (attempt < 5) continue;
      throw e;
    }
    return {
      port,
      addr: `127.0.0.1:${port}`,
      asked,
      stop: async () => {
        udp.close();
        await new Promise<void>((r) => tcp.close(() => r()));
      },
    };
  }
}
