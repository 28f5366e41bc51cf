// A refusal raised by the state layer while a registration creates its node (an address or name claim that loses, an
// owner deleted meanwhile) reaches the client with the status and message meant for it, through the router and the
// HTTP/2 layer — not as a 500 "internal error".
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';
import { Redis } from 'ioredis';
import { K } from '../../shared/redis-keys.ts';
import { candidateV4 } from '../../services/coordination/src/state/ip-alloc.ts';
import { startImage, type Image } from '../harness/image.ts';
import { NODE, ROOT } from '../harness/process.ts';
import { ControlClient, serverKey } from '../harness/control-client.ts';

const exec = promisify(execFile);
let image: Image;

test.before(async () => {
  image = await startImage({ services: ['coordination'] });
});
test.after.always(async () => {
  await image?.stop();
});

test('a registration whose address claim loses gets 503 and the reason, not an internal error', async (t) => {
  const { stdout } = await exec(NODE, [path.join(ROOT, 'bin/hse.ts'), 'users', 'create', 'ops', '--json'], { env: { ...image.env, PATH: process.env.PATH } });
  t.truthy(JSON.parse(stdout));
  const { stdout: k } = await exec(NODE, [path.join(ROOT, 'bin/hse.ts'), 'keys', 'create', '--user', 'ops', '--json'], {
    env: { ...image.env, PATH: process.env.PATH },
  });
  const key = (JSON.parse(k) as { key: string }).key;
  // Every address the allocator will try next is already claimed (as by other instances racing for them).
  const redis = new Redis(image.redis!.url.replace('unix://', ''));
  t.teardown(() => redis.disconnect());
  const seq = Number((await redis.get(K.ipSeq)) ?? 0);
  const claims: string[] = [];
  for (let i = 1; i <= 5000; i++) {
    const v4 = candidateV4(seq + i);
    if (v4) claims.push(v4, '999999');
  }
  await redis.hset(K.nodeByIPv4, ...claims);

  const c = await ControlClient.connect(image.port, await serverKey(image.url));
  t.teardown(() => c.close());
  const r = await c.post('/machine/register', {
    Version: 130,
    NodeKey: c.nodeKey,
    Hostinfo: { Hostname: 'unlucky', OS: 'linux' },
    Auth: { AuthKey: key },
  });
  t.is(r.status, 503);
  t.regex(r.body.toString(), /no free address found in 100\.64\.0\.0\/10/);
  t.notRegex(r.body.toString(), /internal error/);
});
