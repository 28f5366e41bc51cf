#!/bin/sh
# The embedded Redis as the supervisor runs it (ecosystem.config.js, only when HSE_REDIS_URL is unset): a short Node
# step (src/prepare.ts) checks the settings and writes redis.conf, then this shell replaces itself with redis-server.
# The supervisor's process *is* redis-server from then on: its stop signal (SIGTERM or SIGINT, both a clean shutdown
# in Redis 7) reaches Redis directly, Redis's exit status is the app's, and no Node process stays resident for it.
#
# Exit status: 2 = nothing to retry (refused configuration, or redis-server not installed), which the supervisor
# leaves stopped; otherwise redis-server's own.
root=$(cd "${0%/*}/../.." && pwd)

if ! command -v redis-server >/dev/null 2>&1; then
  echo 'hse redis: redis-server is not installed; install it with: apt-get install redis-server (or set HSE_REDIS_URL to an external Redis)' >&2
  exit 2
fi

# prepare.ts logs on stdout/stderr as usual and writes the config path on fd 3, which alone is captured here.
conf=$("$root/node_modules/.bin/node" "$root/services/redis/src/prepare.ts" 3>&1 >&4 4>&-) 4>&1 || exit $?
[ -n "$conf" ] || exit 0

exec redis-server "$conf"
