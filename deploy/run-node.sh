#!/bin/sh
# How pm2 starts each Node app (ecosystem.config.js): `/bin/sh run-node.sh <pinned node> <V8 flags> <main.ts>`. The
# shell replaces itself with Node, so the pid pm2 watches, signals and restarts is the app's own, and pm2 loads no
# wrapper (its ProcessContainerFork.js) into the app.
exec "$@"
