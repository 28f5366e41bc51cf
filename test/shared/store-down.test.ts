// isStoreDown (shared/errors.ts) is what turns a Redis failure into 503 "retrying shortly is safe" instead of an
// internal error. The errors a Sentinel failover puts in front of hse, produced for real with Debian's redis-server
// and ioredis: nothing listening (the dead primary), a demoted primary (READONLY), a primary that lost its replicas
// under min-replicas-to-write (NOREPLICAS), retries exhausted; and what must stay a bug (a wrong command).
import test from 'ava';
import { Redis } from 'ioredis';
import { HseError, isStoreDown } from '../../shared/errors.ts';
import { freePort } from '../harness/process.ts';
import { startRedis, type TestRedis } from '../harness/redis.ts';

let a: TestRedis;
let b: TestRedis;
const clients: Redis[] = [];
const client = (r: TestRedis) => {
  const c = new Redis({ path: r.socket, maxRetriesPerRequest: 1 });
  clients.push(c);
  return c;
};
const failure = (p: Promise<unknown>) =>
  p.then(
    () => new Error('no error'),
    (e: Error) => e,
  );

test.before(async () => {
  [a, b] = await Promise.all([startRedis(), startRedis()]);
});
test.after.always(async () => {
  for (const c of clients) c.disconnect();
  await a?.stop();
  await b?.stop();
});

test('a primary that is gone: connection refused, then retries exhausted, are "store down"', async (t) => {
  const port = await freePort();
  const c = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1, retryStrategy: (n) => (n > 3 ? null : 50) });
  const seen: Error[] = [];
  c.on('error', (e: Error) => seen.push(e));
  clients.push(c);
  const e = await failure(c.set('k', 'v'));
  t.true(isStoreDown(e), `${e.name}: ${e.message}`);
  t.true(seen.length > 0 && seen.every(isStoreDown), seen.map((x) => x.message).join('; '));
});

test('a demoted primary (READONLY) and a primary without its replicas (NOREPLICAS) are "store down"', async (t) => {
  const replica = client(b);
  await replica.call('REPLICAOF', '127.0.0.1', String(await freePort()));
  const ro = await failure(replica.set('k', 'v'));
  t.regex(ro.message, /^READONLY/);
  t.true(isStoreDown(ro));
  await replica.call('REPLICAOF', 'NO', 'ONE');

  const primary = client(a);
  await primary.config('SET', 'min-replicas-to-write', '1');
  const nr = await failure(primary.set('k', 'v'));
  t.regex(nr.message, /^NOREPLICAS/);
  t.true(isStoreDown(nr));
  await primary.config('SET', 'min-replicas-to-write', '0');
});

test('a wrong command or an HseError is not "store down"', async (t) => {
  const e = await failure(client(a).call('NOSUCHCOMMAND'));
  t.false(isStoreDown(e), e.message);
  t.false(isStoreDown(new HseError(409, 'this machine is already registered')));
});
