#!/bin/sh
# The supervisor in the foreground: pm2-runtime on the pinned Node, running ecosystem.config.js. deploy/entrypoint.sh
# (the image), `npm start` and bench/memory.ts start it this way, with these V8 flags for pm2's own process (the apps'
# flags are in deploy/process-settings.js):
#   --max-semi-space-size=1 --optimize-for-size --v8-pool-size=1   a small young generation, a compact heap and one
#                                                                  background V8 thread, as for the apps;
#   --lite-mode     the interpreter only, no optimizing compilers: pm2 passes log lines on and restarts processes,
#                   nothing that needs compiled code (pm2 runs no TypeScript, which lite mode could not strip: it has
#                   no WebAssembly). bench/README.md, "Memory at rest", has what each bought.
app=$(cd "$(dirname "$0")/.." && pwd)
exec "$app/node_modules/.bin/node" --max-semi-space-size=1 --optimize-for-size --v8-pool-size=1 --lite-mode \
  "$app/node_modules/pm2/bin/pm2-runtime" start "$app/ecosystem.config.js"
