#!/bin/sh
# The image's HEALTHCHECK command: runs deploy/healthcheck.ts with the pinned Node (the same settings as the processes,
# so it asks the port the router really listens on). Exit 0 healthy, 1 not.
app=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
exec "$app/node_modules/.bin/node" "$app/deploy/healthcheck.ts"
