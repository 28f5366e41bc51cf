// The tests that change the host's network interfaces — the container engine's bridge and veths (test/image/) and
// the network namespaces of the route tests (test/netns/) — run on their own, after the main suite (test/run-suites.sh).
// A Tailscale client that sees interfaces come and go re-binds and may drop its relay connection, which the main
// suite's tests of long-held connections would count as a proxy cutting them.
import base from './ava.config.js';

export default { ...base, files: ['test/image/**/*.test.ts', 'test/netns/**/*.test.ts'], concurrency: 1 };
