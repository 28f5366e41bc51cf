// HSE_ROUTER_PROCESSES=2: two router processes on one public port (SO_REUSEPORT). Both take connections, one scrape
// counts each under its own process label, official Tailscale clients join and reach each other through whichever
// router they land on, and when one router process dies the clients come back through the other. The supervisor's
// part (ecosystem.config.js starts router-2 with HSE_ROUTER_INSTANCE=2) is checked on the process list.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';
import { freePort, NODE, ROOT } from '../harness/process.ts';
import { haveTailscale } from '../harness/tailscale.ts';
import { startTailnet, type Tailnet, tryCli } from '../harness/tailnet.ts';
import { pool } from '../harness/pool.ts';

const run = promisify(execFile);

/** Sum of the samples of `name` whose series contains every one of `has`. */
function total(text: string, name: string, ...has: string[]): number {
  let n = 0;
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    const series = line.slice(0, i);
    if ((series === name || series.startsWith(`${name}{`)) && has.every((h) => series.includes(h))) n += Number(line.slice(i + 1));
  }
  return n;
}

test('the supervisor starts router, router-2 and router-3 for HSE_ROUTER_PROCESSES=3, each told which one it is', async (t) => {
  const { stdout } = await run(NODE, ['-e', "console.log(JSON.stringify(require('./ecosystem.config.js').apps))"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HSE_ROUTER_PROCESSES: '3' },
  });
  const apps = JSON.parse(stdout) as { name: string; script: string; node_args: string[]; env: Record<string, string | undefined> }[];
  const routers = apps.filter((a) => a.name.startsWith('router'));
  t.deepEqual(
    routers.map((a) => a.name),
    ['router', 'router-2', 'router-3'],
  );
  for (const a of routers) {
    t.true(a.script.endsWith('router/src/main.ts'), a.name);
    t.deepEqual(a.node_args, routers[0].node_args, `${a.name} runs with the router's flags`);
  }
  t.is(routers[0].env.HSE_ROUTER_INSTANCE, undefined);
  t.is(routers[1].env.HSE_ROUTER_INSTANCE, '2');
  t.is(routers[2].env.HSE_ROUTER_INSTANCE, '3');
  // An unusable value starts one router, which then refuses the setting itself (exit 2, test/config/refusals.test.ts).
  const one = await run(NODE, ['-e', "console.log(require('./ecosystem.config.js').apps.map((a) => a.name).join(' '))"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HSE_ROUTER_PROCESSES: 'two' },
  });
  t.deepEqual(
    one.stdout
      .trim()
      .split(' ')
      .filter((n) => n.startsWith('router')),
    ['router'],
  );
});

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let net: Tailnet;
  let metricsUrl: string;
  const scrape = async () => (await fetch(metricsUrl)).text();

  test.before(async () => {
    const metricsPort = await freePort();
    metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    // The image harness starts router-2 for HSE_ROUTER_PROCESSES=2, as the supervisor does; the clients join through
    // whichever of the two routers the kernel gives each connection.
    net = await startTailnet({
      users: { alice: ['alpha', 'bravo'] },
      env: { HSE_ROUTER_PROCESSES: '2', HSE_METRICS_LISTEN: `127.0.0.1:${metricsPort}` },
    });
  });
  test.after.always(async () => {
    await net?.stop();
  });

  test.serial('both router processes listen on the port and take connections; one scrape counts each', async (t) => {
    const [second] = net.image.moreRouters;
    t.regex(second.output(), new RegExp(`router-2: listening on http://127\\.0\\.0\\.1:${net.image.port}.*process="?2 of 2`));
    // Fresh connections: the kernel spreads them over the two listeners by their addresses (all 64 on one: 2^-63).
    const statuses = await pool(Array.from({ length: 64 }), 8, async () => {
      const r = await fetch(`${net.image.url}/key?v=130`, { headers: { connection: 'close' } });
      await r.arrayBuffer();
      return r.status;
    });
    t.true(
      statuses.every((s) => s === 200),
      statuses.join(' '),
    );
    const text = await scrape();
    t.is(total(text, 'hse_up', 'process="router-2"'), 1);
    const first = total(text, 'hse_router_requests_total', 'process="router"', 'route="coordination"');
    const other = total(text, 'hse_router_requests_total', 'process="router-2"', 'route="coordination"');
    t.true(first > 0 && other > 0, `requests per router process: ${first} and ${other}`);
    t.true(first + other >= 64);
  });

  test.serial('clients reach each other through either router, and come back when one router process dies', async (t) => {
    const ping = async () => {
      await net.settle();
      const bravo = net
        .node('alpha')
        .peers(await net.node('alpha').status())
        .find((p) => p.HostName === 'bravo')!;
      return (await tryCli(net.node('alpha'), ['ping', '--c=5', '--timeout=10s', bravo.TailscaleIPs[0]])).stdout;
    };
    t.regex(await ping(), /pong from bravo/, net.logs());
    const tunnels = total(await scrape(), 'hse_router_tunnels_open');
    t.true(tunnels >= 4, `tunnels open over both routers: ${tunnels}`);

    // Whatever the second router held (control and DERP connections) dies with it; the kernel sends every new
    // connection to the router that is left, and the clients reconnect through it.
    const [second] = net.image.moreRouters;
    process.kill(second.pid, 'SIGKILL');
    await second.exited();
    const stillAnswering = await fetch(`${net.image.url}/key?v=130`);
    t.is(stillAnswering.status, 200);
    t.regex(await ping(), /pong from bravo/, net.logs());
  });
}
