#!/bin/sh
# The image's entrypoint: checks the settings once (deploy/check-config.ts: refused configuration -> one line, exit 2;
# the proxy overlay passes --require-proxy-mode), then hands over to the supervisor, pm2-runtime, which runs the
# embedded Redis (unless HSE_REDIS_URL is set), the router and the services from ecosystem.config.js in the
# foreground and stops them all on SIGTERM.
set -eu
# Everything the image writes (pm2's logs, data, sockets) is the image user's alone.
umask 077
app=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
node="$app/node_modules/.bin/node"
"$node" "$app/deploy/check-config.ts" "$@"
cd "$app"
# The pinned Node first on PATH, so pm2 and anything it starts use the same runtime.
PATH="$app/node_modules/.bin:$PATH"
export PATH
exec "$node" "$app/node_modules/pm2/bin/pm2-runtime" start "$app/ecosystem.config.js"
