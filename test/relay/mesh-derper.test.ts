// An hse relay meshed with Tailscale's own `derper` (pinned v1.102.3): the hse image in TLS mode (router on HTTPS with
// a certificate from the throwaway test CA, relay admitting only registered node keys) and derper on its own TLS port,
// each dialling the other with the same mesh key — derper with its --mesh-with, hse with HSE_DERP_MESH_WITH written
// the derper way (host:port/dial-host). Our DERP client is a node on each side. Packets cross both ways, and PeerGone crosses both ways when
// a node leaves. derper's mesh connection is admitted by the key although its key is no registered node.
import crypto from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { DerpClient } from '../../services/relay/src/derp-client.ts';
import { PeerGoneReason } from '../../services/relay/src/frames.ts';
import { createTestCA, type TestCA } from '../harness/ca.ts';
import { type Derper, haveDerper, startDerper } from '../harness/derper.ts';
import { startImage, type Image } from '../harness/image.ts';
import { freePort } from '../harness/process.ts';
import { newNode, register } from './harness.ts';

if (!haveDerper()) {
  test('derper is installed', (t) => t.fail('derper not found; run .ci/run or go install tailscale.com/cmd/derper@v1.102.3 (see README)'));
} else {
  let ca: TestCA;
  let image: Image;
  let derper: Derper;
  let hseUrl: URL;
  const clients: DerpClient[] = [];

  test.before(async () => {
    ca = await createTestCA();
    const [httpsPort, httpPort, derperPort] = [await freePort(), await freePort(), await freePort()];
    const meshKey = crypto.randomBytes(32).toString('hex');
    image = await startImage({
      services: ['relay'],
      publicUrl: `https://127.0.0.1:${httpsPort}`,
      env: {
        HSE_HTTPS_PORT: String(httpsPort),
        HSE_TLS_HTTP_PORT: String(httpPort),
        HSE_TLS_CERT_FILE: ca.certFile,
        HSE_TLS_KEY_FILE: ca.keyFile,
        HSE_DERP_MESH_KEY: meshKey,
        // derper's host/dial-host form: TLS checked for "localhost", the connection made to 127.0.0.1.
        HSE_DERP_MESH_WITH: `localhost:${derperPort}/127.0.0.1`,
        // The relay dials derper over TLS; it trusts the test CA as an operator's host would trust its own.
        NODE_EXTRA_CA_CERTS: ca.caFile,
      },
    });
    await image.procs.router!.waitFor(/listening on https:/);
    hseUrl = new URL(`https://127.0.0.1:${httpsPort}/derp`);
    derper = await startDerper({
      certFile: ca.certFile,
      keyFile: ca.keyFile,
      caFile: ca.caFile,
      meshKey,
      meshWith: [`127.0.0.1:${httpsPort}`],
      port: derperPort,
    });
    await image.procs.relay!.waitFor(/mesh link up peer=localhost:\d+/, 30_000);
    await image.procs.relay!.waitFor(/mesh peer connected/, 30_000);
    await derper.waitFor(/connected; \d+ peers/, 30_000);
  });

  test.after.always(async () => {
    for (const c of clients) c.close();
    await derper?.stop();
    await image?.stop();
    ca?.remove();
  });

  async function onHse(): Promise<DerpClient> {
    const n = newNode();
    await register(image.redis!.client(), n, clients.length + 1);
    const c = await DerpClient.connect({ url: hseUrl, ca: ca.caPem, privateKey: n.privateKey });
    clients.push(c);
    await c.waitFor('serverInfo');
    return c;
  }

  async function onDerper(): Promise<DerpClient> {
    const c = await DerpClient.connect({ url: new URL(derper.url), ca: ca.caPem });
    clients.push(c);
    await c.waitFor('serverInfo');
    return c;
  }

  /** Sends until the packet arrives: each relay learns of the other's new client a moment after it connects. */
  async function deliver(from: DerpClient, to: DerpClient, text: string): Promise<void> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      from.send(to.publicKey, Buffer.from(text));
      try {
        const m = await to.waitFor('packet', (p) => p.data.toString() === text, 300);
        if (!m.src.equals(from.publicKey)) throw new Error('packet arrived with the wrong source key');
        return;
      } catch (e) {
        if (Date.now() > deadline) throw new Error(`"${text}" never arrived: ${(e as Error).message}\n--- derper ---\n${derper.output()}\n${image.logs()}`);
      }
    }
  }

  test.serial('a node on the hse relay and a node on derper exchange packets both ways', async (t) => {
    const x = await onHse();
    const y = await onDerper();
    await deliver(x, y, 'hse to derper');
    await deliver(y, x, 'derper to hse');
    t.pass();
  });

  test.serial('PeerGone crosses the mesh both ways when a node leaves', async (t) => {
    const x = await onHse();
    const y = await onDerper();
    await deliver(x, y, 'hello y');
    await deliver(y, x, 'hello x');
    // y leaves derper: x, which heard from y, is told by the hse relay once derper announces it.
    y.close();
    const gone = await x.waitFor('peerGone', (m) => m.peer.equals(y.publicKey), 15_000);
    t.is(gone.reason, PeerGoneReason.Disconnected);

    const y2 = await onDerper();
    await deliver(x, y2, 'hello y2');
    // x leaves hse: y2, which heard from x, is told by derper.
    x.close();
    const gone2 = await y2.waitFor('peerGone', (m) => m.peer.equals(x.publicKey), 15_000);
    t.is(gone2.reason, PeerGoneReason.Disconnected);
  });

  test.serial('derper restarting: the hse relay drops its nodes, then finds them again once it is back', async (t) => {
    const x = await onHse();
    let y = await onDerper();
    await deliver(x, y, 'before');
    const port = derper.port;
    await derper.stop();
    await image.procs.relay!.waitFor(/mesh link down peer=localhost/, 15_000);
    await sleep(200);
    derper = await startDerper({
      certFile: ca.certFile,
      keyFile: ca.keyFile,
      caFile: ca.caFile,
      meshKey: derperMeshKey(),
      meshWith: [`127.0.0.1:${hseUrl.port}`],
      port,
    });
    y = await onDerper();
    await deliver(x, y, 'after');
    await deliver(y, x, 'and back');
    t.pass();
  });

  /** The mesh key the image was started with. */
  function derperMeshKey(): string {
    return image.env.HSE_DERP_MESH_KEY;
  }
}
