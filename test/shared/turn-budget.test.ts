// Fair reading (shared/turn-budget.ts), as the relay's connections and the router's tunnels use it: a stream with a
// backlog delivers at most its budget per event-loop turn, so a quiet stream's data is not held behind the backlog;
// nothing is lost or reordered; and a stream held for backpressure stays paused until released.
import { PassThrough } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import test from 'ava';
import { TurnBudget } from '../../shared/turn-budget.ts';

const CHUNK = 16 * 1024;
const BUDGET = 64 * 1024;

function backlog(chunks: number): PassThrough {
  const s = new PassThrough({ highWaterMark: 1 << 30 });
  for (let i = 0; i < chunks; i++) s.write(Buffer.alloc(CHUNK, i % 256));
  s.end();
  return s;
}

test("a quiet stream's data is delivered after one budget of a busy stream's backlog, not after all of it", async (t) => {
  const busy = backlog(32);
  const quiet = new PassThrough();
  quiet.end(Buffer.from('ping'));
  const order: string[] = [];
  for (const [name, s] of [
    ['busy', busy],
    ['quiet', quiet],
  ] as const) {
    const turn = new TurnBudget(s, BUDGET);
    s.on('data', (c: Buffer) => {
      order.push(name);
      turn.spend(c.length);
    });
  }
  await Promise.all([new Promise((r) => busy.once('end', r)), new Promise((r) => quiet.once('end', r))]);
  t.is(order.indexOf('quiet'), BUDGET / CHUNK, order.join(' '));
  t.is(order.filter((n) => n === 'busy').length, 32);
});

test('a stream with a backlog delivers at most its budget per turn, all of it in order', async (t) => {
  const s = backlog(20);
  const turn = new TurnBudget(s, BUDGET);
  const perTurn = [0];
  let expected = 0;
  let inOrder = true;
  s.on('data', (c: Buffer) => {
    if (c[0] !== expected++ % 256) inOrder = false;
    perTurn[perTurn.length - 1] += c.length;
    turn.spend(c.length);
  });
  const ended = new Promise((r) => s.once('end', r));
  let done = false;
  void ended.then(() => (done = true));
  while (!done) {
    await nextTurn();
    perTurn.push(0);
  }
  t.true(inOrder);
  t.is(
    perTurn.reduce((a, b) => a + b, 0),
    20 * CHUNK,
  );
  t.true(
    perTurn.every((n) => n <= BUDGET),
    perTurn.join(' '),
  );
});

test('a stream held for backpressure stays paused at the end of the turn until released', async (t) => {
  const s = backlog(8);
  const turn = new TurnBudget(s, BUDGET);
  let got = 0;
  s.on('data', (c: Buffer) => {
    got += c.length;
    if (got === CHUNK) turn.hold();
    turn.spend(c.length);
  });
  for (let i = 0; i < 5; i++) await nextTurn();
  t.is(got, CHUNK);
  turn.release();
  await new Promise((r) => s.once('end', r));
  t.is(got, 8 * CHUNK);
});
