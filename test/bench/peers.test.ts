// The benchmarks decide up front which of the peers they compare against are installed (bench/lib/peers.ts), so that
// a missing one is named with its install command and our own figures are still measured and printed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { missingPeers, PEERS } from '../../bench/lib/peers.ts';

test('a peer that is not installed is named, with where it was looked for and the command that installs it', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-peers-'));
  try {
    const present = path.join(dir, 'headscale');
    fs.writeFileSync(present, '#!/bin/sh\n', { mode: 0o755 });
    const absent = path.join(dir, 'derper');
    const notExecutable = path.join(dir, 'caddy');
    fs.writeFileSync(notExecutable, '', { mode: 0o644 });
    const missing = missingPeers([
      { ...PEERS.headscale, program: present },
      { ...PEERS.derper, program: absent },
      { ...PEERS.caddy, program: notExecutable },
    ]);
    t.deepEqual(missing, [
      `derper is not installed (no ${absent}); install it with: npm run bench:peers`,
      `caddy is not installed (no ${notExecutable}); install it with: apt-get install caddy`,
    ]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a peer given by name is looked up on PATH', (t) => {
  t.deepEqual(missingPeers([{ name: 'sh', program: 'sh', install: 'apt-get install dash' }]), []);
  t.deepEqual(missingPeers([{ ...PEERS.wrk, program: 'no-such-program-hse' }]), [
    'wrk is not installed (no no-such-program-hse on PATH); install it with: npm run bench:peers',
  ]);
});
