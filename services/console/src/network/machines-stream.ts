// Live machine views: GET /console/machines/stream (the list, with the list's filters in the query),
// /console/machines/stream?id=<n> (one machine: its details, routes, who may reach it) or /console/routes/stream (the
// Routes view), as Server-Sent Events. The console listens to the
// coordination service's change channel (change-feed.ts); after a change it reads the view again through the admin
// API and sends it, rendered by the same functions as the page, when it differs from what was sent last:
//   event: html\ndata: {"html":"<the view>"}                     replace the view with this
//   event: unavailable\ndata: {"message":"..."}                 the admin API is not answering; retrying
// plus the heartbeat and the end at sign-out of every console event stream (request/event-stream.ts).
// A change is read twice: once shortly after it (a burst of changes is read once), and once more a little later,
// because the coordination service applies a change it published to its own view a moment after announcing it.
import { type ConsoleContext, type ConsoleRouter, viewerOf } from '../request/context.ts';
import { AdminError } from '../../../../shared/admin-client.ts';
import type { ChangeEvent } from '../../../../shared/changes.ts';
import { PageError } from '../errors.ts';
import { openEventStream } from '../request/event-stream.ts';
import { claimStreamSlot } from '../request/open-streams.ts';
import { machineLive } from '../views/machine-page.ts';
import { machinesLive } from '../views/machines-page.ts';
import { routesLive } from '../views/routes-page.ts';
import { actorOf } from './actor.ts';
import type { NetworkDeps } from './deps.ts';
import { readMachineFilter } from './machine-filter.ts';
import { loadMachine, loadMachines } from './machines-data.ts';
import { signInProvider } from './machines-routes.ts';

/** Relative times ("5 min ago") go stale; the view is read again every this many heartbeats even without a change. */
const REFRESH_EVERY_BEATS = 4;
const QUICK_MS = 150;
const SETTLE_MS = 1_500;

type Render = () => Promise<string>;

function renderer(ctx: ConsoleContext, d: NetworkDeps, view: 'machines' | 'routes'): { render: Render; relevant: (e: ChangeEvent | null) => boolean } {
  const who = actorOf(ctx);
  const viewer = viewerOf(ctx);
  if (view === 'routes') {
    return {
      render: async () => routesLive({ viewer, routes: await d.admin.listRoutes(who) }).value,
      relevant: (e) => e === null || e.kind.startsWith('node.'),
    };
  }
  const idText = typeof ctx.query.id === 'string' ? ctx.query.id : '';
  if (idText !== '') {
    if (!/^\d{1,12}$/.test(idText)) throw new PageError(400, 'Bad machine id', '"id" must be a machine id.');
    const id = Number(idText);
    // A subnet router's primary state moves when another router of the same subnet comes or goes.
    let servesSubnets = false;
    return {
      render: async () => {
        const m = await loadMachine(d.admin, who, id);
        servesSubnets = m.routes.some((r) => r.approved && r.prefix !== 'exit');
        return machineLive({ viewer, ...m }).value;
      },
      relevant: (e) => e === null || e.kind === 'user.change' || e.kind === 'policy.change' || ('nodeId' in e && (e.nodeId === id || servesSubnets)),
    };
  }
  const filter = readMachineFilter(ctx.query);
  return {
    render: async () =>
      machinesLive({ ...(await loadMachines(d.admin, who, filter)), viewer, filter, publicOrigin: d.cfg.publicOrigin, signInProvider: signInProvider(d.cfg) })
        .value,
    relevant: () => true,
  };
}

export function machinesStreamRoute(router: ConsoleRouter, d: NetworkDeps): void {
  for (const view of ['machines', 'routes'] as const) router.get(`/console/${view}/stream`, d.gate, (ctx) => liveView(ctx, d, view));
}

async function liveView(ctx: ConsoleContext, d: NetworkDeps, view: 'machines' | 'routes'): Promise<void> {
  const { render, relevant } = renderer(ctx, d, view);
  const release = claimStreamSlot(ctx, 'live views');

  let last = '';
  let unavailable = false;
  let busy = false;
  let again = false;
  const refresh = async (): Promise<void> => {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    try {
      const view = await render();
      unavailable = false;
      if (view !== last) {
        last = view;
        send(`event: html\ndata: ${JSON.stringify({ html: view })}\n\n`);
      }
    } catch (e) {
      if (!unavailable) d.log.warn('live machine view cannot read the tailnet', { error: (e as Error).message });
      unavailable = true;
      send(`event: unavailable\ndata: ${JSON.stringify({ message: e instanceof AdminError ? e.message : 'the console could not read the tailnet' })}\n\n`);
    } finally {
      busy = false;
    }
    if (again) {
      again = false;
      await refresh();
    }
  };

  let quick: NodeJS.Timeout | null = null;
  let settle: NodeJS.Timeout | null = null;
  const schedule = () => {
    if (!quick) {
      quick = setTimeout(() => {
        quick = null;
        void refresh();
      }, QUICK_MS);
    }
    if (settle) clearTimeout(settle);
    settle = setTimeout(() => {
      settle = null;
      void refresh();
    }, SETTLE_MS);
  };
  let beats = 0;
  let unsubscribe = () => {};
  const send = openEventStream(ctx, d, {
    onBeat: () => {
      beats++;
      if (unavailable || beats % REFRESH_EVERY_BEATS === 0) void refresh();
    },
    onClose: () => {
      if (quick) clearTimeout(quick);
      if (settle) clearTimeout(settle);
      unsubscribe();
      release();
    },
  });
  unsubscribe = d.feed.subscribe((e) => {
    if (relevant(e)) schedule();
  });
  // The page may have changed between its rendering and this stream opening (and this may be a reconnect).
  void refresh();
}
