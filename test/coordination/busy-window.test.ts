// The map stream's busy window (map-session.ts): short while few streams are open, so a small network sees itself
// online within milliseconds of its last full map; the full window once a burst of hundreds of streams needs coalescing.
import test from 'ava';
import { BUSY_WINDOW_MS, busyWindowMs } from '../../services/coordination/src/control/map-session.ts';

test('the busy window grows with the open streams, between 10 ms and the full window', (t) => {
  t.is(busyWindowMs(0), 10);
  t.is(busyWindowMs(1), 10);
  t.is(busyWindowMs(100), 20);
  t.is(busyWindowMs(250), 50);
  t.is(busyWindowMs(500), BUSY_WINDOW_MS);
  t.is(busyWindowMs(10_000), BUSY_WINDOW_MS);
});
