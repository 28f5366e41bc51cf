export default {
  files: ['test/**/*.test.ts'],
  extensions: { ts: 'module' },
  timeout: '300s',
  workerThreads: false,
  concurrency: 2,
  verbose: true,
};
