export default {
  files: ['test/**/*.test.ts'],
  extensions: { ts: 'module' },
  timeout: '120s',
  workerThreads: false,
  concurrency: 2,
  verbose: true,
};
