#!/usr/bin/env bash
# The image's build steps, kept out of the Dockerfile so they can be read, run and tested without a Docker engine.
# The Dockerfile runs each phase in its own layer; test/proxy/image.test.ts runs `verify` and `cache` against the
# checkout, and `deps`, `verify` and `cache` on a copy of the build context, then starts the image from that copy.
#
#   image-setup.sh system   Debian packages (redis-server, tini), the non-root user, /data. Root only; build time.
#   image-setup.sh deps     npm ci of the runtime dependencies only (includes the pinned Node 24 and pm2).
#   image-setup.sh cache    Fills Node's compile cache for every supervised process (deploy/warm-compile-cache.cjs),
#                           so none of them loads the TypeScript stripper at run time. After the sources are copied.
#                           In the image (root, with the hse user present) it runs as hse: see phase_cache.
#   image-setup.sh verify   Checks that the tree can run: the pinned Node, redis-server, the supervisor file, every
#                           process's main, the CLI. Prints one line per problem and exits 1 if there is any.
set -euo pipefail

APP="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"
HSE_UID=10001
HSE_USER=hse

phase_system() {
  [[ "$(id -u)" == 0 ]] || { echo "image-setup system: must run as root (it installs packages and adds the $HSE_USER user)" >&2; exit 1; }
  local need=()
  command -v redis-server >/dev/null || need+=(redis-server)
  command -v tini >/dev/null || need+=(tini)
  if ((${#need[@]})); then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates "${need[@]}"
    rm -rf /var/lib/apt/lists/*
  fi
  # Debian's package starts its own redis on TCP 6379 under systemd; in the image nothing runs it but our supervisor,
  # which starts redis-server with its own config (Unix socket, no TCP port, data under /data).
  # The group gets the same fixed id as the user, so what the image creates on the volume is 10001:10001, the
  # ownership deploy/check-config.ts tells operators to give a volume made by something else.
  getent group "$HSE_USER" >/dev/null || groupadd --system --gid "$HSE_UID" "$HSE_USER"
  if ! id "$HSE_USER" >/dev/null 2>&1; then
    useradd --system --uid "$HSE_UID" --gid "$HSE_USER" --home-dir "/home/$HSE_USER" --create-home --shell /usr/sbin/nologin "$HSE_USER"
  fi
  # /data is the volume; 700 because it holds the server keys and the Redis data.
  install -d -m 700 -o "$HSE_USER" -g "$HSE_USER" /data
  install -d -m 700 -o "$HSE_USER" -g "$HSE_USER" "/home/$HSE_USER/.pm2"
  ln -sf "$APP/bin/hse" /usr/local/bin/hse
}

phase_deps() {
  cd "$APP"
  # Runtime dependencies only; the `node` package's install script fetches the pinned Node 24 binary.
  npm ci --omit=dev --no-audit --no-fund
  npm cache clean --force >/dev/null 2>&1 || true
}

phase_verify() {
  cd "$APP"
  local bad=0
  problem() { echo "image-setup verify: $*" >&2; bad=1; }
  local node="$APP/node_modules/.bin/node"
  local want
  want="$(sed -n 's/^[[:space:]]*"node": "\([0-9.]*\)",\{0,1\}$/\1/p' package.json | head -1)"
  if [[ ! -x "$node" ]]; then
    problem "the pinned Node ($node) is missing; run \`npm ci\` (image: image-setup.sh deps)"
  elif [[ "$("$node" --version)" != "v$want" ]]; then
    problem "node_modules/.bin/node is $("$node" --version), package.json pins $want; run \`npm ci\`"
  fi
  command -v redis-server >/dev/null || problem "redis-server is not installed (Debian: apt-get install redis-server), needed unless HSE_REDIS_URL points at an external Redis"
  [[ -f node_modules/pm2/bin/pm2-runtime ]] || problem "pm2 is missing from node_modules; run \`npm ci\`"
  local f
  for f in ecosystem.config.js router/src/main.ts services/coordination/src/main.ts services/console/src/main.ts \
    services/relay/src/main.ts services/redis/run.sh bin/hse deploy/entrypoint.sh deploy/healthcheck.sh; do
    [[ -f "$f" ]] || problem "$f is missing from the image tree"
  done
  if [[ -x "$node" && -f bin/hse.ts ]] && ! "$node" bin/hse.ts --help >/dev/null 2>&1; then
    problem "the hse CLI does not run (\`bin/hse --help\` failed)"
  fi
  ((bad == 0)) && echo "image-setup verify: ok (node $want, $(redis-server --version | awk '{print $3}'))"
  return "$bad"
}

phase_cache() {
  cd "$APP"
  local warm=("$APP/node_modules/.bin/node" deploy/warm-compile-cache.cjs --strict)
  if [[ "$(id -u)" == 0 ]] && id "$HSE_USER" >/dev/null 2>&1; then
    # Node keeps the cache in a directory named for the Node version, the V8 flags and the uid that runs it, with
    # owner-only files: a cache filled by root is neither found nor readable by the uid the image runs as, and that
    # uid cannot add its own beside it. So fill it as that user, in a directory it owns, where the processes will
    # look for it (ecosystem.config.js's NODE_COMPILE_CACHE).
    local dir="${NODE_COMPILE_CACHE:-$APP/node_modules/.cache/hse-compile}"
    install -d "$(dirname "$dir")"
    install -d -o "$HSE_USER" -g "$HSE_USER" "$dir"
    setpriv --reuid="$HSE_USER" --regid="$HSE_USER" --init-groups env HOME="/home/$HSE_USER" "${warm[@]}"
  else
    "${warm[@]}"
  fi
}

case "${1:-}" in
  system) phase_system ;;
  deps) phase_deps ;;
  cache) phase_cache ;;
  verify) phase_verify ;;
  *) echo "usage: $0 system|deps|cache|verify" >&2; exit 64 ;;
esac
