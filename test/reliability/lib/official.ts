// Official Tailscale clients (test/harness/tailscale.ts) for the long fault runs: started, logged in with a pre-auth
// key, and waited for until each is Running and sees the others online.
import type { AdminClient } from '../../../shared/admin-client.ts';
import { haveTailscale, TsNode } from '../../harness/tailscale.ts';

export interface Official {
  nodes: TsNode[];
  /** "nodekey:<hex>" by client name, as the server registered it. */
  nodeKeys: Record<string, string>;
  /** Tailscale addresses and MagicDNS name of each, as the client itself reports them. */
  identities(): Promise<Record<string, string>>;
  destroy(): Promise<void>;
}

export async function startOfficial(url: string, authKey: string, admin: AdminClient, names = ['alpha', 'bravo']): Promise<Official | null> {
  if (!haveTailscale()) return null;
  // An http:// login server means an http DERP node; the client needs this knob for that.
  const nodes = names.map((name) => new TsNode({ name, env: { TS_DEBUG_USE_DERP_HTTP: '1' } }));
  const official: Official = {
    nodes,
    nodeKeys: {},
    async identities() {
      const out: Record<string, string> = {};
      for (const n of nodes) {
        const s = await n.status();
        out[n.name] = `${s.Self.DNSName} ${s.Self.TailscaleIPs.join(',')}`;
      }
      return out;
    },
    async destroy() {
      for (const n of nodes) await n.destroy();
    },
  };
  try {
    for (const n of nodes) {
      await n.start();
      await n.up(url, [`--auth-key=${authKey}`]);
    }
    for (const n of nodes) {
      const others = names.filter((x) => x !== n.name);
      await n.waitFor(
        (s) => s.BackendState === 'Running' && others.every((o) => n.peers(s).some((p) => p.HostName === o && p.Online)),
        `${n.name} running with its peers online`,
        120_000,
      );
    }
    const all = await admin.listNodes({ actor: 'reliability-run', ip: '' });
    for (const name of names) official.nodeKeys[name] = all.find((x) => x.hostname === name)!.nodeKey;
  } catch (e) {
    await official.destroy();
    throw e;
  }
  return official;
}
