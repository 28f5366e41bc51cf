// The tailnet's DNS settings.
//   GET  /console/dns     the settings in force (everyone), the form to change them (administrators)
//   POST /console/dns     the form (dns-form.ts)  -> 303 to the page | 400 page with the reason; the old settings stay
// The coordination service checks the settings, logs the change with the console account and sends it to every
// connected device.
import type Router from '@koa/router';
import type { Context } from 'koa';
import type { ConsoleState } from '../auth/require-session.ts';
import { requireAdmin } from '../auth/role.ts';
import { takeFlash } from '../request/flash.ts';
import { formOf } from '../request/form.ts';
import { dnsPage, type DnsView } from '../views/dns-page.ts';
import { act } from './act.ts';
import { actorOf } from './actor.ts';
import type { NetworkDeps } from './deps.ts';
import { formToSettings, readDnsForm } from './dns-form.ts';

export function dnsRoutes(router: Router, d: NetworkDeps): void {
  const show = async (ctx: Context, extra: Partial<DnsView> = {}): Promise<string> => {
    const settings = await d.admin.getDns(actorOf(ctx));
    return dnsPage({
      viewer: (ctx.state as ConsoleState).viewer!,
      settings,
      baseDomain: d.cfg.baseDomain,
      flash: extra.error ? null : takeFlash(ctx),
      ...extra,
    });
  };

  router.get('/console/dns', d.gate, async (ctx) => {
    ctx.type = 'html';
    ctx.body = await show(ctx);
  });

  router.post('/console/dns', d.gate, requireAdmin, async (ctx) => {
    const draft = readDnsForm(await formOf(ctx));
    await act(
      ctx,
      d.cfg,
      async () => {
        await d.admin.setDns(actorOf(ctx), formToSettings(draft));
        return { text: 'DNS settings saved. Connected devices have them within a second.', to: '/console/dns' };
      },
      (message) => show(ctx, { error: message, draft }),
    );
  });
}
