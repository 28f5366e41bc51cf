// The console process's life, with the real router in front: SIGTERM ends open live tails (browsers reconnect to the
// next process) and exits 0; a socket file left behind by a killed process does not stop the next start.
import test from 'ava';
import type { Image } from '../harness/image.ts';
import { Client, PASSWORD, startConsole } from '../harness/console-client.ts';

let image: Image;
test.before(async () => {
  image = await startConsole();
});
test.after.always(async () => {
  await image?.stop();
});

test.serial('SIGTERM ends live tails and exits 0; after kill -9 the next start replaces the stale socket', async (t) => {
  const c = new Client(image.url);
  await c.signIn('admin', PASSWORD);
  const s = await c.stream();
  t.is(s.res.statusCode, 200);
  const ended = new Promise<void>((resolve) => {
    s.res.once('end', resolve);
    s.res.once('close', resolve);
  });
  t.is(await image.procs.console!.stop('SIGTERM'), 0);
  await ended;
  t.regex(image.procs.console!.output(), /shutting down signal=SIGTERM liveStreams=1/);

  await image.restart();
  t.is((await c.request('/console/logs')).status, 200, 'sessions survive a restart (kept in Redis, same cookie key)');
  image.procs.console!.proc.kill('SIGKILL');
  await image.procs.console!.exited();
  await image.restart();
  t.is((await c.request('/console/logs')).status, 200);
});
