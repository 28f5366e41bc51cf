// The per-client send queue: bounded, FIFO, and when full it is the oldest packet that goes.
import test from 'ava';
import fc from 'fast-check';
import { DropOldestQueue } from '../../services/relay/src/send-queue.ts';

test('a full queue drops its oldest entry and keeps the newest', (t) => {
  const q = new DropOldestQueue<number>(3);
  for (const n of [1, 2, 3]) t.is(q.push(n), undefined);
  t.is(q.push(4), 1);
  t.is(q.push(5), 2);
  t.is(q.dropped, 2);
  t.deepEqual([q.shift(), q.shift(), q.shift(), q.shift()], [3, 4, 5, undefined]);
});

test('behaves like a model: the last `capacity` items in order', (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 8 }), fc.array(fc.oneof(fc.integer(), fc.constant(null)), { maxLength: 60 }), (cap, ops) => {
      const q = new DropOldestQueue<number>(cap);
      const model: number[] = [];
      for (const op of ops) {
        if (op === null) t.is(q.shift(), model.shift());
        else {
          model.push(op);
          if (model.length > cap) model.shift();
          q.push(op);
        }
        t.is(q.length, model.length);
      }
    }),
  );
});
