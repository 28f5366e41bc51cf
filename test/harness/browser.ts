// The system's Chromium (Debian's package, installed by .ci/run), driven by playwright-core: the real browser the
// console and sign-in tests use, never one downloaded by playwright. Flags: no sandbox (tests run as root), no GPU, and
// nothing that reaches out on its own (QUIC, background networking, component updates, sync) — the machine has no
// internet and the tests must only talk to loopback.
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
