export default {
  // test/image/ and test/netns/ change the host's network interfaces: they run after this suite, on their own
  // (ava.host-network.config.js, test/run-suites.sh).
  files: ['test/**/*.test.ts', '!test/image/**', '!test/netns/**'],
  extensions: { ts: 'module' },
  timeout: '300s',
  workerThreads: false,
  concurrency: 2,
  verbose: true,
};
