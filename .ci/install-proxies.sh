#!/usr/bin/env bash
# Installs the pinned Go-built peers the proxy-mode tests (test/proxy/) need and Debian does not ship:
#   - Traefik v3, the reverse proxy, as `traefik`;
#   - the Compose v2 CLI, as `docker-compose`, used only to render the merged base + overlay configuration
#     (`docker-compose config`; no Docker engine is needed for that).
# Both land in the same GOBIN as the Tailscale client (HSE_TEST_GOBIN, else $(go env GOPATH)/bin), where
# test/harness/proxies.ts looks for them. Already-installed pinned versions are kept, so re-runs are quick.
# Also the two Debian tools the documented proxy-mode checks use (advanced/proxy.md, run verbatim by
# test/proxy/doc-checks.test.ts): curl and jq, when missing and this runs as root.
# Called by .ci/run after the Go toolchain is available; safe to run by hand.
set -euo pipefail

# v3.6.12: the newest Traefik v3 that builds from the Go module proxy alone. The v3.7 line replaces
# github.com/traefik/traefik/dynamic/ext with a nested directory that module zips leave out, and needs lego/v5
# versions the proxy does not serve here.
TRAEFIK_VERSION=v3.6.12
COMPOSE_VERSION=v2.40.3

command -v go >/dev/null || { echo "install-proxies: the Go toolchain (go) is needed to build Traefik and Compose" >&2; exit 1; }
GOBIN="${HSE_TEST_GOBIN:-$(go env GOPATH)/bin}"
mkdir -p "$GOBIN"
# Two shared cores: build one package at a time so other work on the machine keeps moving.
export GOFLAGS="${GOFLAGS:-} -p=1"

# Both modules' go.mod files carry replace or exclude directives (Traefik's forks of go-http-auth and mux, Compose's
# excluded versions), which `go install pkg@version` refuses. So: fetch the pinned module through the Go module proxy
# (checksummed by go.sum/GOSUMDB like any `go install`), build its main package from a writable copy of that source,
# and stamp the version the way each project's own Makefile does.
# build_pinned <module> <version> <main package dir> <output> <ldflags>
build_pinned() {
  local module="$1" version="$2" pkg="$3" out="$4" ldflags="$5" src work
  src="$(go mod download -json "${module}@${version}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$src" ]] || { echo "install-proxies: could not download ${module}@${version}" >&2; exit 1; }
  work="$(mktemp -d)"
  cp -r "$src/." "$work/"
  chmod -R u+w "$work"
  (cd "$work" && CGO_ENABLED=0 go build -o "$out" -ldflags "-s -w ${ldflags}" "$pkg")
  rm -rf "$work"
}

install_traefik() {
  local want="${TRAEFIK_VERSION#v}"
  if [[ -x "$GOBIN/traefik" ]] && "$GOBIN/traefik" version 2>/dev/null | grep -Eq "Version:[[:space:]]+${want}\$"; then
    echo "install-proxies: traefik ${TRAEFIK_VERSION} already installed"
    return
  fi
  echo "install-proxies: building traefik ${TRAEFIK_VERSION} (several minutes)"
  build_pinned github.com/traefik/traefik/v3 "$TRAEFIK_VERSION" ./cmd/traefik "$GOBIN/traefik" \
    "-X github.com/traefik/traefik/v3/pkg/version.Version=${want}"
  "$GOBIN/traefik" version
}

install_compose() {
  if [[ -x "$GOBIN/docker-compose" ]] && "$GOBIN/docker-compose" version 2>/dev/null | grep -q "${COMPOSE_VERSION}\$"; then
    echo "install-proxies: docker-compose ${COMPOSE_VERSION} already installed"
    return
  fi
  echo "install-proxies: building docker-compose ${COMPOSE_VERSION} (a few minutes)"
  build_pinned github.com/docker/compose/v2 "$COMPOSE_VERSION" ./cmd "$GOBIN/docker-compose" \
    "-X github.com/docker/compose/v2/internal.Version=${COMPOSE_VERSION}"
  "$GOBIN/docker-compose" version
}

install_check_tools() {
  local need=()
  command -v curl >/dev/null || need+=(curl)
  command -v jq >/dev/null || need+=(jq)
  ((${#need[@]})) || return 0
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
    echo "install-proxies: please install ${need[*]} (the documented checks use them)" >&2
    return 0
  fi
  echo "install-proxies: apt-get install ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

install_check_tools
install_compose
install_traefik
