// How each Node process of the image is started: its V8 flags and the memory-allocator settings of its environment.
// ecosystem.config.js starts the apps with these, deploy/warm-compile-cache.cjs fills the compile cache with the same
// flags (Node keeps one cache per set of V8 flags: a process started with other flags finds nothing), and the
// benchmarks (bench/lib/hse.ts) start the processes with them, so that they measure what the image runs. No side
// effects: anything may import this.
//
// What each setting is for (bench/README.md, "Memory at rest", has what each bought, process by process):
//   --max-semi-space-size=1  V8's young generation grows to 16 MiB a semi-space while a process loads its modules and
//                            keeps that size when the process idles (~10 MiB resident each); 1 MiB semi-spaces keep
//                            it at 2.
//                            The router and the coordination service keep 2 MiB: with 1 the router spent ~13 % more
//                            CPU per proxied request, and coordination, which allocates in bursts (a network
//                            coming online), took 2.4× as long for 2,000 full maps (96.9 against 40.3 s).
//   --optimize-for-size      V8 prefers a compact heap over speed: smaller heap growth steps, more compaction, and
//                            the young generation at its smallest. Not for the router, whose heap stays small anyway
//                            and whose CPU is its throughput (27 % fewer requests per CPU-second with it), nor for
//                            coordination, whose CPU is how fast maps reach clients (bench:control at 2,000 nodes:
//                            157 CPU-seconds with the small-heap flags against 57 without, for the same memory).
//   --v8-pool-size=1         one background V8 thread (GC, compilation) instead of four; two cores are shared by
//                            five processes anyway.
//   --bytecode-old-age=1     the bytecode of functions that did not run between two full collections (start-up
//                            code, configuration parsing) is dropped, to be compiled again if ever needed; for the
//                            console, which idles between sign-ins.
//   MALLOC_ARENA_MAX=2       glibc gives every thread that allocates (V8's, libuv's pool) an arena of its own, each
//                            holding on to what it freed; two are enough here.
//   MALLOC_MMAP_THRESHOLD_   the console hashes passwords with argon2id (19 MiB of working memory, on a libuv pool
//                            thread). glibc's mmap threshold rises to the size of the last large block freed, so after
//                            the first hash every later one is carved out of a thread arena and stays there: +19 MiB
//                            for each pool thread that ever hashed. A fixed threshold keeps large blocks mmapped, and
//                            each hash's memory returns to the system when the hash ends.
//                            The coordination service has the same pattern at scale: every full map is a few large
//                            transient blocks (the map's JSON, 1.2 MB at 2,000 peers, zstd's context and output), and
//                            once the threshold had risen they were carved out of the heap between long-lived
//                            allocations, which then kept freed memory from ever going back. At 2,000 open streams
//                            (bench:control --n=2000, six pairs of runs, alternating): the coordination's memory lower
//                            in every pair, by 123 to 847 MiB (PSS medians 1,420 → 990 MiB); its kernel CPU the same
//                            (17.6–18.9 s with and without), its user CPU following the VM's drift (either order won).
//                            jemalloc (LD_PRELOAD) went lower (620 MiB) but lost on CPU in 4 of 5 pairs, so glibc stays.

const SMALL = ['--max-semi-space-size=1', '--optimize-for-size', '--v8-pool-size=1'];
const FAST = ['--max-semi-space-size=2', '--v8-pool-size=1'];
const ALLOCATOR = { MALLOC_ARENA_MAX: '2' };
/** Blocks over 128 KiB mmapped, so each goes back to the system when freed (MALLOC_MMAP_THRESHOLD_ above). */
const LARGE_BLOCKS_RETURNED = { ...ALLOCATOR, MALLOC_MMAP_THRESHOLD_: '131072' };

/** @type {Record<string, import("./process-settings.d.ts").NodeProcessSettings>} */
export const NODE_PROCESSES = {
  router: { v8: FAST, env: ALLOCATOR },
  coordination: { v8: FAST, env: LARGE_BLOCKS_RETURNED },
  console: { v8: [...SMALL, '--bytecode-old-age=1'], env: LARGE_BLOCKS_RETURNED },
  relay: { v8: SMALL, env: ALLOCATOR },
};
