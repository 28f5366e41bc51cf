// Each node's CapMap (tailcfg.NodeCapMap), and the capability names grants translate to.
//
// Reference: tailcfg/nodecap and tailcfg/peercap, and what the client checks:
//   - Taildrop (feature/taildrop): the sender needs "https://tailscale.com/cap/file-sharing" in its own CapMap ("file
//     sharing not enabled by Tailscale admin" otherwise). It may then send to its own user's untagged devices; a
//     device of another user is a target only when the sender's filter grants it the peer capability
//     "https://tailscale.com/cap/file-sharing-target" from that device, and the receiver accepts the file only when
//     its filter grants the sender "https://tailscale.com/cap/file-send" (or the sender is its own user's untagged
//     device). Tailscale's policy has no grant for this; hse's extension is the grant capability
//     "tailscale.com/cap/file-sharing" (src may send files to dst), which becomes file-send on the destinations and
//     file-sharing-target on the sources;
//   - Tailscale SSH (ipn/ipnlocal): `tailscale set --ssh` needs "https://tailscale.com/cap/ssh" in the CapMap;
//     hse gives it to the nodes an ssh rule targets (Tailscale gives it to every node), with "ssh-env-vars" so
//     acceptEnv works and "ssh-behavior-v1" as Tailscale sends it to every node (its captured maps): sessions run
//     the command in-process instead of through `su -l`, which would drop the session's SSH_CONNECTION/SSH_CLIENT
//     (ssh/tailssh/incubator.go forceV1Behavior);
//   - Taildrive: "drive:share" and "drive:access" node attributes (from nodeAttrs, passed through like any attribute)
//     and the grant capability tailscale.com/cap/drive, whose companion tailscale.com/cap/drive-sharer the sources get;
//   - nodeAttrs: every attr becomes a key with a null value, every app capability a key with its values, as Tailscale
//     sends them; randomizeClientPort: true is the attribute "randomize-client-port" on every node.
import type { NodeCapMap } from '../tailcfg/tailcfg.ts';
import type { Model } from './model.ts';
import type { Resolver } from './resolve.ts';
import type { SSHCompiler } from './ssh.ts';

export const CAP_FILE_SHARING = 'https://tailscale.com/cap/file-sharing';
export const CAP_SSH = 'https://tailscale.com/cap/ssh';
export const CAP_SSH_ENV = 'ssh-env-vars';
export const CAP_SSH_BEHAVIOR_V1 = 'ssh-behavior-v1';
export const CAP_RANDOMIZE_PORT = 'randomize-client-port';

/**
 * Grant capabilities with a companion the grant's sources get (values null). rename: the capability the destinations
 * get instead of the name written in the policy.
 */
export const COMPANIONS: Record<string, { companion: string; rename?: string }> = {
  'tailscale.com/cap/drive': { companion: 'tailscale.com/cap/drive-sharer' },
  'tailscale.com/cap/relay': { companion: 'tailscale.com/cap/relay-target' },
  'tailscale.com/cap/file-sharing': { companion: 'https://tailscale.com/cap/file-sharing-target', rename: 'https://tailscale.com/cap/file-send' },
};

export function capName(policyName: string): string {
  return COMPANIONS[policyName]?.rename ?? policyName;
}

export function buildCaps(model: Model, r: Resolver, ssh: SSHCompiler, taildrop: boolean, hash: (s: string) => string) {
  const tn = r.tn;
  const targets = model.nodeAttrs.map((a) => r.union(a.target, (s) => r.devices(s)));
  const keyOf: string[] = new Array(tn.n);
  const maps = new Map<string, { caps: NodeCapMap; hash: string }>();
  for (let i = 0; i < tn.n; i++) {
    const matched: number[] = [];
    targets.forEach((b, k) => {
      if (b.has(i)) matched.push(k);
    });
    const sshDst = ssh.isDestination(i);
    const key = `${matched.join(',')}|${sshDst ? 1 : 0}`;
    keyOf[i] = key;
    if (maps.has(key)) continue;
    const caps: NodeCapMap = {};
    if (taildrop) caps[CAP_FILE_SHARING] = null;
    if (model.policy.randomizeClientPort) caps[CAP_RANDOMIZE_PORT] = null;
    if (sshDst) {
      caps[CAP_SSH] = null;
      caps[CAP_SSH_ENV] = null;
      caps[CAP_SSH_BEHAVIOR_V1] = null;
    }
    for (const k of matched) {
      for (const [name, values] of Object.entries(model.nodeAttrs[k].caps)) {
        const prev = caps[name];
        // The same attribute from several entries: values add up, as Tailscale merges them.
        caps[name] = values === null ? (prev ?? null) : [...(prev ?? []), ...values];
      }
    }
    Object.freeze(caps);
    maps.set(key, { caps, hash: hash(JSON.stringify(Object.entries(caps).sort())) });
  }
  return {
    capMapFor: (i: number): NodeCapMap => maps.get(keyOf[i])!.caps,
    hashFor: (i: number): string => maps.get(keyOf[i])!.hash,
  };
}
