// Closing relay connections of nodes that may no longer use the relay, as soon as the coordination service says so
// on the change channel (K.changes): a deleted node loses its connection, a re-keyed node loses the one of its old
// key. Redis pub/sub drops messages while disconnected, so after a reconnect every connected key is checked again.
import type { Redis } from 'ioredis';
import { decodeChange } from '../../../shared/changes.ts';
import type { Logger } from '../../../shared/log.ts';
import { redact } from '../../../shared/log.ts';
import { K } from '../../../shared/redis-keys.ts';
import type { DerpServer } from './derp-server.ts';

export function watchRevocations(sub: Redis, derp: DerpServer, log: Logger): void {
  sub.on('message', (channel: string, message: string) => {
    if (channel !== K.changes) return;
    const e = decodeChange(message);
    if (!e) return;
    if (e.kind === 'node.delete' && typeof e.nodeKey === 'string') {
      if (derp.closeKey(e.nodeKey, 'node deleted')) log.info('closed relay connection of a deleted node', { node: e.nodeId, key: redact(e.nodeKey, 20) });
    } else if (e.kind === 'node.keyrotate' && typeof e.oldNodeKey === 'string') {
      if (derp.closeKey(e.oldNodeKey, 'node key rotated'))
        log.info('closed relay connection of a rotated node key', { node: e.nodeId, key: redact(e.oldNodeKey, 20) });
    }
  });
  // The first 'ready' is the initial connection; only later ones follow an outage.
  let connectedBefore = sub.status === 'ready';
  sub.on('ready', () => {
    if (!connectedBefore) {
      connectedBefore = true;
      return;
    }
    derp
      .reverify()
      .then((n) => n > 0 && log.info('closed relay connections no longer admitted after a store outage', { closed: n }))
      .catch((e: Error) => log.warn('could not re-check relay clients after a store outage', { error: e.message }));
  });
  // Subscribing waits for Redis; while it is down at start the relay serves already, and subscribing is retried.
  const subscribe = (): void => {
    sub.subscribe(K.changes).then(
      () => log.debug('watching node deletions and key rotations'),
      (e: Error) => {
        log.warn('cannot watch node changes yet, retrying', { error: e.message });
        setTimeout(subscribe, 2_000).unref();
      },
    );
  };
  subscribe();
}
