#!/bin/sh
# The image's entrypoint: checks the settings once (deploy/check-config.ts: refused configuration -> one line, status 2;
# container unfit to run -> one line, status 1; the proxy overlay passes --require-proxy-mode), then hands over to the
# supervisor, pm2-runtime, which runs the embedded Redis (unless HSE_REDIS_URL is set), the router and the services
# from ecosystem.config.js in the foreground and stops them all on SIGTERM.
#
# A refusal does not end the container. The compose file's `restart: unless-stopped` restarts a container whatever
# its exit status (Docker with a growing delay, podman at once), so exiting would print the same line again and again
# and never start anything. Instead the entrypoint says so once and waits, doing nothing, until it is stopped; the
# container shows as unhealthy; `docker compose up -d` after a fix in deploy/.env replaces it, `docker compose restart`
# after a fix elsewhere (the volume's owner) starts it again.
set -eu
# Everything the image writes (pm2's logs, data, sockets) is the image user's alone.
umask 077
app=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
node="$app/node_modules/.bin/node"
status=0
"$node" "$app/deploy/check-config.ts" "$@" || status=$?
if [ "$status" -ne 0 ]; then
  echo "hse image: not started (status $status): fix what the line above names, then docker compose up -d (after editing .env) or docker compose restart; waiting here instead of exiting, so the container is not restarted over and over" >&2
  # tini (PID 1) forwards the engine's SIGTERM to this process, so `docker compose stop/down` ends it at once.
  exec sleep infinity
fi
cd "$app"
# The pinned Node first on PATH, so pm2 and anything it starts use the same runtime.
PATH="$app/node_modules/.bin:$PATH"
export PATH
exec /bin/sh "$app/deploy/supervisor.sh"
