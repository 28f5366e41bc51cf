// The ACME schedule (router/src/tls/renewal.ts) without waiting for it: renewal at two thirds of the lifetime for
// any certificate length, failures backed off from a minute to an hour but never past the served certificate's
// expiry, and long waits taken in steps setTimeout can hold.
import test from 'ava';
import fc from 'fast-check';
import { dueForRenewal, MAX_TIMER_MS, renewalTime, retryDelayMs, waitUntil } from '../../router/src/tls/renewal.ts';

const DAY = 86_400_000;

test("Let's Encrypt's 90-day certificates renew with 30 days left, 6-day ones with 2 days left", (t) => {
  const from = new Date('2026-01-01T00:00:00Z');
  t.is(renewalTime(from, new Date(from.getTime() + 90 * DAY)).toISOString(), '2026-03-02T00:00:00.000Z');
  t.is(renewalTime(from, new Date(from.getTime() + 6 * DAY)).toISOString(), '2026-01-05T00:00:00.000Z');
});

test('renewal always falls inside the lifetime, two thirds of the way in', (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 2 ** 40 }), fc.integer({ min: 1, max: 400 * DAY }), (start, life) => {
      const at = renewalTime(new Date(start), new Date(start + life)).getTime();
      return at >= start && at < start + life && Math.abs(at - (start + (2 * life) / 3)) <= 1;
    }),
  );
  t.pass();
});

test('due exactly from the renewal time on', (t) => {
  const from = new Date('2026-01-01T00:00:00Z');
  const to = new Date(from.getTime() + 30 * DAY);
  const at = renewalTime(from, to);
  t.false(dueForRenewal(from, to, new Date(at.getTime() - 1)));
  t.true(dueForRenewal(from, to, at));
  t.true(dueForRenewal(from, to, new Date(to.getTime() + DAY)));
});

test('failures back off 1, 2, 4 ... minutes up to an hour', (t) => {
  t.deepEqual(
    [1, 2, 3, 4, 5, 6, 7, 8, 20].map((n) => retryDelayMs(n) / 60_000),
    [1, 2, 4, 8, 16, 32, 60, 60, 60],
  );
});

test('while a certificate is still served, a retry never waits past a quarter of the time it has left', (t) => {
  t.is(retryDelayMs(7, 20 * 60_000), 5 * 60_000);
  t.is(retryDelayMs(1, 10 * DAY), 60_000);
  t.is(retryDelayMs(3, 100), 1000);
});

test('long waits are taken in steps of at most MAX_TIMER_MS (setTimeout cannot hold 30 days)', (t) => {
  const now = new Date('2026-01-01T00:00:00Z');
  t.is(waitUntil(new Date(now.getTime() + 60 * DAY), now), MAX_TIMER_MS);
  t.is(waitUntil(new Date(now.getTime() + 5000), now), 5000);
  t.is(waitUntil(new Date(now.getTime() - 5000), now), 0);
  t.true(MAX_TIMER_MS < 2 ** 31 - 1);
});
