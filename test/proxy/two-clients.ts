// Two official Tailscale clients join a tailnet through a reverse proxy with a pre-auth key and ping each other
// through hse's relay, also reached through the proxy. Used behind each proxy example (behind-proxy.ts) and in front
// of the built image (test/image/).
import { TsNode, type TsStatus } from '../harness/tailscale.ts';

/** Runs the `hse` CLI wherever the image runs (the checkout, or `docker compose exec` in the container). */
export type HseCli = (...args: string[]) => Promise<string>;

const running = (x: TsStatus) => x.BackendState === 'Running';

/**
 * `tailscale ping` output. The harness keeps clients on the relay (TS_DEBUG_ALWAYS_USE_DERP), so after its pongs the
 * command ends with "direct connection not established" and status 1; that is the expected ending here.
 */
export async function pingViaRelay(n: TsNode, ip: string): Promise<string> {
  try {
    return (await n.cli(['ping', '--c=5', '--timeout=10s', ip], 60_000)).stdout;
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string };
    if (err.stderr?.includes('direct connection not established') && err.stdout) return err.stdout;
    throw e;
  }
}

/** Waits until `a` runs and sees `bName` online; returns `b`'s first Tailscale address. */
export async function seesOnline(a: TsNode, bName: string, timeoutMs?: number): Promise<string> {
  const s = await a.waitFor((x) => running(x) && a.peers(x).some((p) => p.HostName === bName && p.Online), `${a.name} to see ${bName} online`, timeoutMs);
  return a.peers(s).find((p) => p.HostName === bName)!.TailscaleIPs[0];
}

export interface TwoClients {
  /** The user the key was made for (created here). */
  user: string;
  loginUrl: string;
  /** The CA the proxy's certificate chains to: the clients trust only it. */
  caFile: string;
  names: [string, string];
  hse: HseCli;
  /** The started clients are pushed here as soon as they exist, so the caller can destroy them whatever happens. */
  nodes: TsNode[];
}

/** Creates the user and a reusable key, starts both clients, brings them up and pings a -> b. Returns the ping output. */
export async function joinTwoAndPing(o: TwoClients): Promise<string> {
  await o.hse('users', 'create', o.user);
  const key = (JSON.parse(await o.hse('keys', 'create', '--user', o.user, '--reusable', '--json')) as { key: string }).key;
  const pair: TsNode[] = [];
  for (const name of o.names) {
    // The client trusts only the throwaway CA: it reaches hse through the proxy's certificate or not at all.
    const n = new TsNode({ name, env: { SSL_CERT_FILE: o.caFile } });
    o.nodes.push(n);
    pair.push(n);
    await n.start();
  }
  const [a, b] = pair;
  await Promise.all([a.up(o.loginUrl, [`--auth-key=${key}`]), b.up(o.loginUrl, [`--auth-key=${key}`])]);
  const ip = await seesOnline(a, o.names[1]);
  await seesOnline(b, o.names[0]);
  return pingViaRelay(a, ip);
}
