// The relay accepts every request head the router admits (32 KiB), like the other services: /derp/probe with a
// 20 KiB head answers 200 through the router, as /key does — not a 400 with an empty body from Node's default limit.
import test from 'ava';
import { startImage, type Image } from '../harness/image.ts';

let image: Image;
test.before(async () => {
  image = await startImage({ services: ['relay', 'coordination'], env: { HSE_DERP_VERIFY_CLIENTS: 'off' } });
});
test.after.always(async () => {
  await image?.stop();
});

test('a 20 KiB request head reaches /derp/probe as it reaches /key', async (t) => {
  const headers = { 'x-large': 'a'.repeat(20 * 1024) };
  const key = await fetch(`${image.url}/key?v=130`, { headers });
  t.is(key.status, 200);
  const probe = await fetch(`${image.url}/derp/probe`, { headers });
  t.is(probe.status, 200);
  // Past the router's own limit, every path gets the router's 431.
  const huge = await fetch(`${image.url}/derp/probe`, { headers: { 'x-large': 'a'.repeat(40 * 1024) } });
  t.is(huge.status, 431);
});
