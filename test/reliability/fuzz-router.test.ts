// Fuzzing the router's client-address handling as a process: random X-Forwarded-For / X-Real-IP / Forwarded /
// True-Client-IP header sets (valid, trusted, garbage, repeated, oddly spaced, Latin-1) sent over raw TCP to the real
// router with trusted proxies configured. Whatever arrives, the router answers (or refuses with 400), the service
// behind it sees exactly the address the resolution rule gives and none of the client's forwarding headers, and the
// router stays up. The pure function has its own model-based property tests (test/router/client-ip.test.ts).
import fs from 'node:fs';
import http from 'node:http';
import test from 'ava';
import fc from 'fast-check';
import ipaddr from 'ipaddr.js';
import { parseConfig } from '../../shared/config.ts';
import { resolveClientAddress } from '../../router/src/client-ip.ts';
import { batches, FUZZ_BATCHES } from './lib/fuzz-batches.ts';
import { startImage, type Image } from '../harness/image.ts';
import { rawExchange, dechunk } from './lib/raw-http.ts';

const TRUSTED = '127.0.0.1, 10.0.0.0/8, 2001:db8::/32';
let image: Image;
let echo: http.Server;

test.before(async () => {
  image = await startImage({ services: [], env: { HSE_TRUSTED_PROXIES: TRUSTED } });
  // The coordination socket gets an echo of the headers that reached it.
  echo = http.createServer((req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(req.headers)));
  await new Promise<void>((r) => echo.listen(image.socket('coordination'), r));
});

test.after.always(async () => {
  await new Promise((r) => echo?.close(r));
  await image?.stop();
});

const trusted = parseConfig({ HSE_TRUSTED_PROXIES: TRUSTED }).trustedProxies;

// Mostly addresses (trusted and not), some junk; control characters now and then (the HTTP parser refuses those).
const addressLike = fc.oneof(
  { arbitrary: fc.ipV4(), weight: 4 },
  { arbitrary: fc.ipV6(), weight: 3 },
  {
    arbitrary: fc.constantFrom(
      '10.1.2.3',
      '10.255.0.1',
      '127.0.0.1',
      '2001:db8::7',
      '::ffff:10.0.0.9',
      '::ffff:203.0.113.5',
      '[2001:db8::1]',
      '203.0.113.9:443',
      'unknown',
      '_hidden',
      '',
    ),
    weight: 4,
  },
  { arbitrary: fc.string({ maxLength: 20 }), weight: 2 },
  { arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 12 }), weight: 1 },
);
const listValue = fc.array(addressLike, { maxLength: 6 }).chain((parts) => fc.constantFrom(', ', ',', ' , ', ',,').map((sep) => parts.join(sep)));
const headerSet = fc.record({
  xff: fc.array(listValue, { maxLength: 3 }),
  realIp: fc.option(addressLike, { nil: undefined }),
  forwarded: fc.option(
    fc.oneof(
      listValue.map((v) => `for=${v}`),
      fc.string(),
    ),
    { nil: undefined },
  ),
  trueClient: fc.option(addressLike, { nil: undefined }),
  spacing: fc.constantFrom('', ' ', '\t', '  '),
});

test("random forwarding headers: the service sees the rule's address and never the client's headers; the router stays up", async (t) => {
  let answered = 0;
  let refused = 0;
  await batches(t, 'forwarding-header sets', 'router', image.procs.router!.proc.pid!, 300, () =>
    fc.assert(
      fc.asyncProperty(headerSet, async (h) => {
        const lines: string[] = ['GET /fuzz HTTP/1.1', 'Host: fuzz'];
        for (const v of h.xff) lines.push(`X-Forwarded-For:${h.spacing}${v}${h.spacing}`);
        if (h.realIp !== undefined) lines.push(`X-Real-IP: ${h.realIp}`);
        if (h.forwarded !== undefined) lines.push(`Forwarded: ${h.forwarded}`);
        if (h.trueClient !== undefined) lines.push(`True-Client-IP: ${h.trueClient}`);
        lines.push('Connection: close', '', '');
        const r = await rawExchange(image.port, lines.join('\r\n'));
        if (r.status === 400) {
          // Node's parser refuses control characters in a header value: that connection only.
          refused++;
          return;
        }
        if (r.status !== 200) throw new Error(`router answered ${r.status}: ${r.head}`);
        answered++;
        const seen = JSON.parse(dechunk(r.head, r.body).toString('utf8')) as Record<string, string>;
        // What Node hands the router: each header line's value without surrounding spaces and tabs.
        const xffLines = h.xff.map((v) => v.replace(/^[ \t]+|[ \t]+$/g, ''));
        const expected = resolveClientAddress('127.0.0.1', xffLines.length ? xffLines : undefined, trusted);
        if (seen['x-hse-client-ip'] !== expected) throw new Error(`client address ${seen['x-hse-client-ip']}, rule says ${expected}`);
        if (!ipaddr.isValid(seen['x-hse-client-ip'])) throw new Error(`not an address: ${seen['x-hse-client-ip']}`);
        if (seen['x-forwarded-for'] !== expected) throw new Error(`X-Forwarded-For passed on as ${seen['x-forwarded-for']}`);
        for (const forged of ['x-real-ip', 'forwarded', 'true-client-ip']) if (forged in seen) throw new Error(`${forged} reached the service`);
      }),
      { numRuns: 300 },
    ),
  );
  t.log(`${answered} answered, ${refused} refused by the HTTP parser`);
  t.true(answered > 150 * FUZZ_BATCHES, 'most requests reached the service');
  t.is(image.procs.router!.proc.exitCode, null, 'router still running');
  t.true(fs.existsSync(image.socket('coordination')));
});
