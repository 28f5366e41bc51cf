#!/usr/bin/env bash
# Builds the real image from deploy/Dockerfile with podman, as `docker build -f deploy/Dockerfile -t hse:local .` (or
# `docker compose build`) does for a user, and tags it hse:local, the name deploy/compose.yaml runs.
#
#   npm run image:build                 (= bash test/image/build.sh)
#   npm run image:build -- --no-cache   (extra arguments go to podman build)
#
# What differs from a user's machine, and why:
#   - FROM node:24-bookworm-slim is supplied locally by test/image/base.sh (no image registry is reachable here);
#   - podman runs with `--runtime runc`: Debian's default crun refuses hybrid cgroup layouts like CI's;
#   - when the host's npm trusts an extra CA (npm's `cafile`, else NODE_EXTRA_CA_CERTS: an intercepting egress proxy),
#     the build's `npm ci` is given the same bundle through a read-only bind mount and a global npmrc mounted for the
#     build only; neither is a layer of the image. A machine with plain internet access mounts nothing.
# Layers are cached by podman between runs (the dependency layer is rebuilt only when package*.json change).
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)"
TAG="${HSE_IMAGE_TAG:-hse:local}"
start=$SECONDS

command -v podman >/dev/null || { echo "image build: podman is not installed (Debian: apt-get install podman runc iptables)" >&2; exit 1; }
bash "$ROOT/test/image/base.sh"

# --format docker: the OCI format has no HEALTHCHECK (buildah drops it with a warning); Docker builds this format.
args=(--runtime runc build --format docker --file deploy/Dockerfile --tag "$TAG" --pull=never --layers)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cafile=""
if command -v npm >/dev/null; then
  cafile="$(npm config get cafile 2>/dev/null || true)"
  [[ "$cafile" == null || "$cafile" == undefined ]] && cafile=""
fi
[[ -z "$cafile" && -n "${NODE_EXTRA_CA_CERTS:-}" ]] && cafile="$NODE_EXTRA_CA_CERTS"
if [[ -n "$cafile" ]]; then
  [[ -r "$cafile" ]] || { echo "image build: npm's cafile $cafile is not readable" >&2; exit 1; }
  # Mounted over /usr/local/etc, which the base already has (empty): npm in /usr/local reads its global npmrc there,
  # and mounting onto an existing directory leaves no mount-point file behind in the image's layers.
  mkdir "$work/etc"
  cp "$(readlink -f "$cafile")" "$work/etc/hse-build-ca.crt"
  printf 'cafile=/usr/local/etc/hse-build-ca.crt\n' >"$work/etc/npmrc"
  args+=(--volume "$work/etc:/usr/local/etc:ro")
  echo "image build: the build's npm trusts the host's CA bundle $cafile (bind mount for the build only)" >&2
fi

cd "$ROOT"
podman "${args[@]}" "$@" .
# Earlier builds' layers (untagged, no longer under any tag) go, so repeated builds on one machine do not fill its
# disk; the layers under the new tag stay as the next build's cache. Only images made from the local stand-in base
# (its label is inherited) are pruned, nothing else in the machine's storage.
podman image prune --force --filter label=hse.test-base >/dev/null
echo "image build: $TAG built in $((SECONDS - start)) s ($(podman image inspect --format '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}'))" >&2
