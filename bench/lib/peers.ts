// The programs the benchmarks compare against or drive, where each is looked for, and how to install one that is
// missing. headscale and derper are pinned builds in $GOBIN (default ~/go/bin) from bench/install-peers.sh, which
// `npm run bench:peers` runs and which also installs wrk; HEADSCALE_BIN and DERPER_BIN point elsewhere. A benchmark
// asks which of its peers are missing before it starts anything, measures ours regardless, and says what it left out.
import fs from 'node:fs';
import path from 'node:path';
import { findBinary } from '../../test/harness/process.ts';

const GOBIN = process.env.GOBIN ?? path.join(process.env.HOME ?? '/root', 'go/bin');
export const HEADSCALE = process.env.HEADSCALE_BIN ?? path.join(GOBIN, 'headscale');
export const DERPER = process.env.DERPER_BIN ?? path.join(GOBIN, 'derper');

export interface Peer {
  name: string;
  /** A path, or a name looked up on PATH (and in /usr/sbin). */
  program: string;
  /** The command that installs it. */
  install: string;
}

export const PEERS = {
  headscale: { name: 'headscale', program: HEADSCALE, install: 'npm run bench:peers' },
  derper: { name: 'derper', program: DERPER, install: 'npm run bench:peers' },
  wrk: { name: 'wrk', program: 'wrk', install: 'npm run bench:peers' },
  nginx: { name: 'nginx', program: 'nginx', install: 'apt-get install nginx' },
  caddy: { name: 'caddy', program: 'caddy', install: 'apt-get install caddy' },
} satisfies Record<string, Peer>;

function installed(program: string): boolean {
  if (!program.includes('/')) return findBinary(program) !== null;
  try {
    fs.accessSync(program, fs.constants.X_OK);
    return fs.statSync(program).isFile();
  } catch {
    return false;
  }
}

/** One line for each peer that cannot be run here: which, where it was looked for, how to install it. */
export function missingPeers(peers: Peer[]): string[] {
  return peers
    .filter((p) => !installed(p.program))
    .map((p) => `${p.name} is not installed (no ${p.program.includes('/') ? p.program : `${p.program} on PATH`}); install it with: ${p.install}`);
}

/** Throws the missing-peer line when `peer` cannot be run: for the start functions of each peer. */
export function requirePeer(peer: Peer): void {
  const [missing] = missingPeers([peer]);
  if (missing) throw new Error(missing);
}
