// Byte-exactness against Tailscale's own implementation. These vectors were recorded from
// tailscale.com/control/controlbase v1.102.3 (Go): ClientDeferred + Server over an in-memory pipe, with crypto/rand
// replaced by a fixed stream so both ephemerals are known, capability version 142. The client wrote
// "hello from client" and a 5000-byte message (split into 2 frames); the server wrote "hello from server", 4077 bytes
// (exactly one full frame) and 100 bytes. Message bytes: i*7 mod 256. If any of these fail, a real client cannot
// talk to us — the hash, HKDF, nonce layout or frame split differs from the reference.
import test from 'ava';
import crypto from 'node:crypto';
import { sealFrames } from '../../services/coordination/src/noise/conn.ts';
import { FrameReader } from '../../services/coordination/src/noise/frame-reader.ts';
import { respondToInitiation } from '../../services/coordination/src/noise/handshake.ts';
import { pairFromPrivate, privateKeyFromRaw } from '../../services/coordination/src/noise/x25519.ts';
import { initiate } from '../harness/noise-client.ts';

const VECTORS = {
  controlPrivate: 'privkey:e0bbfabdb0334fccffcfdb4e9e30d370089aeb5cc75172e12fec019e186c614c',
  machinePrivate: 'privkey:68d240503484617a0ad1d8fdd10766d921869e86bfca0298f0043958f3d2f56d',
  /** crypto/rand reads in order: machine key, control key, client ephemeral, server ephemeral (unclamped). */
  clientEphemeral: 'bc2d32816cdcbf75e0c2c99c63447418de789783eedf13235b03a77bc853fd19',
  serverEphemeral: '18e90f15a70d949a06974d4e86f84a4e26d6913ba5054c2d9a20139599fe1067',
  initiation:
    '008e010060857eddb18cb153ccf6df6683e4dbed2c472d3d0b474c6c18b9bc2e3b22e1771f901638a3f816a803d9803e631108569d7ecb267a054f44d39425c99c5dd65bb35e00b2c8301ea0a81a67a75a0c8c6dcd2d8bf1048d739e6f6db13b87466e5843',
  response: '0200309f26cce3017f2d22ea9b316c57477aedbc1df0eb15ebd67e7cbc5cabe78fe01a783cfd5f349a7993b613f0c159a852ae',
  handshakeHash: '5c72df79371e36c66bc5b27a6c605e0a82baac1285ae4efa72b1c430ce9dd52f',
  /** Server's first record frame ("hello from server"). */
  serverFirstFrame: '0400213a45e801ac19a3d7bfec510ffad35e05b7bc2324e535a478ff82cde805b1c1eaa8',
  /** SHA-256 of everything the server wrote (response and all frames). */
  serverWroteSha256: '5c5c3199b176200e290c301bd79f8d1868f985cbc44f3781c81a1f296e3cf588',
  /** Everything the client wrote after the initiation, base64. */
  clientFrames:
    'BAAhZDycjQcDmbmSjGMvJ9dbjySpPWnKwgKpttqoVEI6+/uMBA/91/4FtExXcL0UznS6DtO6/u5SYsGXfEBL3Z+C6Dl4755Fvaoa5mVakHL+cp' +
    'YPSEktVXig3PncyuwjQXOYDvSrI5WoXZRzpN7BiJXHWWzYVqM4j5pYLMkLqFezTHVjZTmeA4Vbv4zNdk9kyjJp0OnL6fbHI48nLu8nwqgbcI0i' +
    'ynfTzlCYmB5cZuLChjzAqTTkLdOEHDy5gj1wxe47nNAs6xHzaZIzQyw/2tNTbCwyqW6LyLPP/iZABot+OllYRGgbMJuxV7zK1Xrszhn2SJ61Cq' +
    'iNgux7gcqgCLyf8QJ1RemP0UEaMFv0yuMkjyxpCqT7vqr0CTWgRsXfXujwpAE+GNXFqVX4fazHKfLp3MI6yoj+r6sQUJVzwJhJjMmN9A2uCiUJ' +
    'CXSc2MYYF22DfQCu5LCVgbupeWBDs/EkrbnsnfhzP0MEd5sbzKW01fBScB6HALj35DZ4ViMbKHQSZ/VtLSjMlAjx1HlLevGN901ZK62RPfZqei' +
    'wlddLXf+TmHeJiQ0juXJhHngPdiMxZQB0Otw5scrmYbvZQuOYnYqC5ADrh0dQ90rY6uuiFXA0w5u0EKlZv3GRQ6FstibsGVFS1GFREKe3y133o' +
    'csS9z0mqpAbM4moTj4AgB2lzce92r1pcUtGN8iYXy5qwqc67a0EaDmWVD9V/Wqg0vjiRcJOcIzWhMTRz0QJ++j3+pJ1ENCY7TMojSQZmFb3THV' +
    'r5OA0yJ9kurhjzPH1OiAHXgZegEAeNlRIQSv6lymeBseHTejpfzo9cz9uq+z/OEc/FUZqmM8I1WAcO87ZTuQuXxBYDqgDdESHbKBdixPbaGShT' +
    'x0bDePvRZY8PpvZRwFFF/+WyQmxnxurtbBZ3kYGm/AuzWcJKvNm5Q9bAPWm1cttpaOOV7juhY9b9dVExnq0ao0iND0mhHMrpAzzU6ghblbXcdz' +
    'KfX+fjFqG4LS9caCzI6Wtvq1TtCEtcPjO51seLnR5JeGcKY6PTabyZ9W6LDQzNv2ZOfDHRQWjBmaJtVvstczf/NNvZWcbv80Z6oW/KnnTuXt7H' +
    'mvVfV224fgvNOOlj0G3jKuYcGGNYz6vn92YhrqhQPmyVifziYvOqUpMin9WRNBaXsZl0xNItnFTitp8YVNW6lLwBDFRu0kf0t8DuPx5dwLRPjX' +
    'ZKH/8J1XjoDFULVwDJxlpNqVPzkueohDVAjc+B3nJTGqhwgIu29eiZoUJMGEUeGvR7uUK5y47+vALgyMvuznWX/UZL7GKJbAXpbc4SDtD8Acb3' +
    'VCmO37nWTuUzw1cUFchvvzqiy6TiN8+b9uno3dlCegPYiyCBUiv5Am3M3wFpwSUBR55Q3+zxTvflByt4VDSmLrC5onWayxs+8xZeMnbErEvvPh' +
    '7zOUBxgBzKGSFxZbQ75XxIF7dCGfeZ8jXpvW7eq50pax7aYhgWDPKvUO0Fsy8kAX8HF/mTxXD5GlmISNR4aMaSdMMHybn56rDTfiSXp4/yCnNJ' +
    'jfhnsCB2Tn7E7VtaHDs6AnooPYrWETLr+4Ht2UUCf2jKouX1oaZnJ9hN7xnont+Eg6a1taO5Qgf6afc1UakttmnPJAFw1NECraXlW6xFXsIm32' +
    'MQhw90FQBHzl7tthHDDXyQM8uD6Jp2PbAoueK8Kla43MN6FGRk1l25OjQxcAk3XFsTokFmYIRNu/2clSgPwon2/LVgo9XN33KDuZ/SVg9bmxTT' +
    'CJwkHrl+hX60ljuUBcbEGc/VjnWzvmt5wIsibMNHi/BuPop3ciaMXwDNyVML5uZkmuj5G26o4z52uIUKuikgCFTjcp0goLeuIaE1WiRPxWVCWG' +
    '50nunfQjPZ+olc4T/z4+caNK8tZvIMizepmnTf1XkPWC7Ox4DfARhJBxtSXfEAxVlSq/jSYC98RTLxGWOWRt6mEPMqE9/6hwWf/T5oj2jtwjaa' +
    'Nv880YkJHDNBdgHv38SCkVU2IwOPu+i1T+4ChZnwN/QlwL5x5hHlRj9k2Ussia1+uVoRZ5/jtJ0GYsLtPq2S7wA089y5/l1ATU59TFyIfVHWgg' +
    '94u/2TuB1OWFFtC/dfX336Ag9KJaYHi5eR1SXdVPAVyZpkMDny53SVZDsbh9FR6alZb0WZpi5lDdrP1QljhFOC5w+Vu6Lg74w7sjRf0fG9Yx6F' +
    '4y+brnSHcuRJSEswifIGHOgTrDFra+DpNBYB5N5avbMLVBY7YdYtRSEyM5Gkamo/4xachZEN2V/IApezgAK2VfMwxjvTr4MmjO2OWynxYyfqG+' +
    'jAqwBrnoDcDESk8KkTa/GjQU5PzCar8QOJKvldKFxFOm+bcHw1hZ+h96gcurZg7Bom5Hv4iT81AR5CT15NkQJjf/UGnaB1BoC8FkJa+cTxSZMb' +
    'LSH2Jzg0WJE9xbv43/jBnpNrnGCir91MczbIZE1kqlMQiWVpsxHDQOuDAfFPoieUOd2tAsYmrPv2HIfmR9RI+i5Gx4SF5+bNWnbtw7wb8oaHj9' +
    'bMBizhj/7A/Fw13+dyRrdZHC9QMGuH+PQiFilgcwEp1cVvUfUp3EZVCwZB9fxU3xaEh7t1Jr1CPaeDX11+c+LJaZhk/sRHg1R/FhYwpLYF8qLe' +
    'h+T+f3zSviZDjIkNzCn5RVo49jTtY+O1vDUirzOOc26SZyRKt+8tZVKtXEAUu9m6hN6i3zexXcjHy/54FqY3iH5pywoUcqjp3FGjD1pRQD+UKU' +
    'S1WOpxi+/99wQcTy6GPMkxOYPBqbOAY9rZZo5z1ASsumJ/GL1cqBK3PfZsttNkzCipKZhqK9VhuPDtwqzFRidU+U8UnwFijVCnF/qF8+GHaNLa' +
    'Lo6VA4lfBZNPfc+rLxT2JD4LH/hYNADuQeAFa4ehnDyBwGIJtZhnoZTvmUkMzfQiTf866OslPeeza+0dGkForh8emGU87M7xEDtnyZ1G6HVYNu' +
    'e7U6A3Bx3XdiA+43/XThq9DelBRXVOqwqQzIQvdVRibpxj47A/eRXW9OJ9Vaz1jhUeOPR5aLVNdA7SgD5RvbrmWQ+euqy8/EZaqJLxuPUduCfp' +
    'Wbw64OuyZgMG6QQFY5aniQCXMjiPMLPrd1jHpFu3m6J+oKmHu2K3ohNxnJWxPyefuSJeasweihwLwlyIluMaBibWB3bya5iyc48EFeT7O6/kKD' +
    'MCeWdGcvWX850k20ophJz984yf7i+gSGWMF3e//r+CYxcXJckIsKknq1nCqpO6JsCvtB+qNv2DE6/bzgBtRCSyhDN8OA+UtVmbLx0Tpy8jpOEy' +
    'Yye6cD/IVYWSF7wqP7u2yxCNPpcaKMoFyG+GZP7KizepaAU3REkUN5DJNyU+ya+aX5/8bGi0ofHR9Y2vbCBNqlFdDTNrzz41XvN1acBtJE5d6Z' +
    'FDAl8DdxVmzvAwhbNsTSEYbfxNIwcURErvR0YOZ7Ziwv8Bmr77HzZJFXbLydFDjQe6mYJexuME1fwJrbXz6X09XUHaPi4Z1H8qP/506WfmTIKg' +
    'D+BeO+MQdWiXjf9VFadZOrLnAuE2/UhvvApqm0c2CSGr7gMCw5AJo46ZlIwPZ7s9yKf7iFWhfsde0E6Lvtzc1ezjT21Sw3sD3zK4gaenwWIAoU' +
    '/qufcD7JumM7J9Ff31kUulLzEffyPkd6f66KFK2hw3chW4F55zk0VQRQXyKAxUq7nrZ+B1aksRrbAoGIsms3+kmkzTxveoASY8OJNuOWyqUgX0' +
    '04fvx2RNBkYpVdm4cJ3RS7gTP/lquRkEJfrjGY/5BI736WISwaW4GClueT/5gv8VXx2xKmgnSaguHyed01Q0ZXY0UC+qnKV3jig7QMIrBbFKWT' +
    'ohdr24W4uuzJhgXXuKs6xKXd84lzE6fjOS4jTtPB0cPjOPVuHFP7NA2/djCUOFV3UddWKKyl88WXTyxLfusvueIYCYpbIFcsqh+O86uWEjoCMw' +
    'P4nh7ifkJw26JJ00TChrn3EqRtWcxaMKAWBhKMe7+z6WialS5WrGlhz4gBrJBYxS8oQVRNuoQ4PGzJ59GQUwgEBW1eaQ6BRrv+fuQ4S13xw3AA' +
    'QiBzoPNH2CfKltXHkJ6sXWd+vGYssKWEtPUZmkJorzzZ4EBfRrrI39kRkmnfbQRbrzLocTcelVWZbHjt2fK4GZPQ7mPfzDmgEhJ7mlcNxARtEZ' +
    'Y72Ml+biMA5MIvmHxu3PiO1IV99AGCcMJMYOmnkUT9/T4NujTeg38pylPDfIWPWRY9t9ACee8jvA5ZGEy8QiRdRSAL9fpc/sTixbBTOSOuIXVl' +
    'IgUyFQcGqub6I45Sa+IMmIBIrSxWj7CVjHX4AAhwDjXRBTcHwrZTfR9Zrw7fWFEQySfOAn/HPQMlOCThaLhJMWWDhe3sCH+KTHjYA3HHR43HX1' +
    'NLLxoXh+hOrYj34TAf7zII0t/EuOIuFFTUM8vXCZL5IZ0qkIScPLGHQoOGSeNCJ5GSkZoRTj7dyKpoZo1I1zLecy9m97cFqOmLStMTnvlsxMDo' +
    'xaOpKlbVgo2MkWm0cbOWYLseDwTSELrsuQprrFIBZjm2xXgo1rJ9PRRlQLLGuVaK+S9161JOKjydjRNBvVoiwyd+GcxydXxXKQFTKyfvhMNvma' +
    'YUsmz7LFHzPr4kDK6wKJ+54PJeHiSnOw6UuwyPPID5ULx3OEfGIPN6eO5gJ+z0aGtknzsjIk7gpa5562Pm4fsMAEa3DQqKqRcFwqDmTSkwrYpy' +
    '8mRWyxY5dhwPuClCCor1itc+Dv4n8bG3FrC7x2MtuWKGm7VMuePTi2W4MG0Hh9Gc/PuasA+hVHzcDj+TVtbxqlIGpDRm+BleyXtZ8TDPOBZgZb' +
    '6bUJqomi9sQVYisAXfC8WGPDVGgdA7TauJe2ak6Vw5itXD0Hpl7rWahZ0RhtAARrDWj45+ACo0+XQbiFQKlAgqIwZDhvaQ2++f5HWgQIY49bV0' +
    'IzfaHemhcUvPShf+d7z8rJxJcVF2+LeZKS8ET1+F+TdXDmfU86a0ncqraYAHRUjrmcP7eYRDNWGdjDKHUpmreECoLxh7FkCyohS5kI5AuT4tVp' +
    'v/r9I3kL+ORHSsFdetjbbrjH3Oktn2JxvBFdN+gZ0YGKwnDUEjCcbdrINMS/cYLlxIloWsytwhI26DGQHScS1uwvlCemzhre8fFXWlmBUBvrW9' +
    'nWsNl8fy+qpJiz+s9oDP/DP7sLtjGVwjF//jr2/B02uauigq7ly/NI9M3OWzk7/TFblhUGHUWc3MfWhUbyNKQzEeod9PKBPonqFy+5zhsq6EeL' +
    'hARF9LC4UW5PZlcSttjj9LqCJzvRPXCtYA3HnVzUy6DwzFz2nCXs5eawiRfPFuEBzqvvI8TVFQl+P7fNWC49VTHNKVDbNMbbQPPcTsRVxxE2k8' +
    'sjTD5nZx58WHXoLesslif9s0uQT0HEZK9hcq84lvej/EL9xyrmShZwJoFWvbr1cRMU+9TX6wyCSaKOXzU+xdRQ9jMN/0ilfjG2xrFLknORgasD' +
    'yxvYa8g3gAQDq2hvsSfzjFycH5fzADKZlUvM6044cUN27lBlmbSmppRBpfvbi4vGH5J7BmuODqiYf2V4VcHRLQr3i+ExEfIKOsqedB6lidU5nt' +
    'ZDnW9vdaZIQyGnaka+jsQkFKZJVYbkg6tkt4u/aFWkF/GqhhNUEv3j/urtuJrJIm3jVzo7fPTkpkxShjv8wJUpkbYDhRhLALVwRD5aoF6Jp+rI' +
    'SJydt/0yNGoyIApOgFGXFtrMKfgpbVFgJJE76N4fcxG/v9CWwrH/GQk+gjGUjj2ZXcJd9DTJN4CKVaSNlaK6LQSafx9vcRKFQqZApIaLt+6sOm' +
    'a9hR5MAkv294UB4owYygL09NHx0lXP1pS3m2z3/Tg51mCssygYnYzUkdjEzla0SoG0Pg4xXoH3k/SgX5YPeuIg1qRutgfr4NbsQ+S5f0kbcBLL' +
    'zqcjzcQP3JCQ4T/pNdL7ZEoJz4uNwTwxa3d0rx25ty2/wHrCVib7V50PEoIGtP7JX/abYL2pT9IOy7HFB+skyeETrObMqL2HepWW9fzS0MwpIC' +
    'riEpRE8Rk3XaMKFsjwOqcMwUGjL8vA3+4AWahbnbtRXcr7dPXK5SYJCS7BviMdwCGW/FUlm53zqHqKKIuZzz6Yln/jyuGRYKj/+E3hE9UCP3qx' +
    'GPMYmFzLOdyLorOzUpONyDSHbXfNMYei7f+V+1WAvpy5Qln3nSIhXV6mcgxKAJbx+Cf2Fp68aBg+JwKYFkJnVuhto66eo7mAPuEVL9+5fLN71i' +
    'aZHGKr7ilsiXuXff5aCtE/zaqfAf3NrSvY6bBio66V1S5HRkt6yVUtJQGuOrpiKM7a9vxvL3tcPgRol7dziJQyMDR92l/x670s5POwqjBbDLe5' +
    '12AyvFakh9XwDey6s8RM+31BfLmzR/Ne12skLWR/BJokuhDyXypu6ROLNJzFG0AZwuX0d8qu4BQGcFl5LY82S9zWJ/331+ALiyn8HGBBzq9toa' +
    '2nGkasGUTiTKV7jp46L73f2hbYu2wbZd4ystMtGV04bLLVn882M5ylMjFizzOpcZfb1IaMakQs14a4sI97o101vwhUl9oaIZKJtVIM/j+35stX' +
    'oLmvzlDwLLTasxo0hC40lYGvP8qwsoxRK0wggT5sh6SK6Js9G0tdyEpVbNYjIKmIrf7B6pSeV9+Dr9FVBAj3YLh+t3D+ymyrnEK818jRxTy4GA' +
    'wAan5oiuod9+dh9hR0KETiDV/ewMbASO1jloSAIvllyiG2QpfIOt7QsA==',
};

const hex = (s: string) => Buffer.from(s.replace(/^privkey:/, ''), 'hex');
const pair = (s: string) => pairFromPrivate(privateKeyFromRaw(hex(s)));
const big = Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 7) & 0xff));
const clientPlaintext = Buffer.concat([Buffer.from('hello from client'), big]);
const serverWrites = [Buffer.from('hello from server'), big.subarray(0, 4077), big.subarray(0, 100)];

test('responder reproduces the reference response, handshake hash and transport frames byte for byte', (t) => {
  const server = pair(VECTORS.controlPrivate);
  const hs = respondToInitiation(hex(VECTORS.initiation), server, { ephemeral: pair(VECTORS.serverEphemeral) });
  t.is(hs.capVersion, 142);
  t.deepEqual(hs.machineKey, pair(VECTORS.machinePrivate).publicKey);
  t.is(hs.response.toString('hex'), VECTORS.response);
  t.is(hs.handshakeHash.toString('hex'), VECTORS.handshakeHash);

  // Client -> server frames decrypt with the first split key, big-endian counters 0, 1, 2.
  const reader = new FrameReader();
  const frames = reader.push(Buffer.from(VECTORS.clientFrames, 'base64'));
  t.is(frames.length, 3);
  t.deepEqual(Buffer.concat(frames.map((f) => hs.rx.decrypt(f))), clientPlaintext);

  // Server -> client: one write per message, split at 4077 plaintext bytes as controlbase does.
  const out: Buffer[] = [hs.response];
  for (const w of serverWrites) sealFrames(hs.tx, w, out);
  t.is(out[1].toString('hex') + out[2].toString('hex'), VECTORS.serverFirstFrame);
  t.is(crypto.createHash('sha256').update(Buffer.concat(out)).digest('hex'), VECTORS.serverWroteSha256);
});

test('test initiator reproduces the reference initiation and client frames', (t) => {
  const server = pair(VECTORS.controlPrivate);
  const init = initiate({ serverPublic: server.publicKey, capVersion: 142, machine: pair(VECTORS.machinePrivate), ephemeral: pair(VECTORS.clientEphemeral) });
  t.is(init.initiation.toString('hex'), VECTORS.initiation);
  const keys = init.finish(hex(VECTORS.response));
  t.is(keys.handshakeHash.toString('hex'), VECTORS.handshakeHash);
  const out: Buffer[] = [];
  sealFrames(keys.tx, Buffer.from('hello from client'), out);
  sealFrames(keys.tx, big, out);
  t.is(Buffer.concat(out).toString('base64'), VECTORS.clientFrames);
});
