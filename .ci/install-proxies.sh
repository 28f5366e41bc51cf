#!/usr/bin/env bash
# Installs the pinned Go-built peers the proxy-mode tests (test/proxy/) need and Debian does not ship:
#   - Traefik v3, the reverse proxy, as `traefik`;
#   - the Compose v2 CLI, as `docker-compose`: renders the merged base + overlay configuration (`docker-compose config`,
#     no engine needed) and, as the docker CLI's plugin, runs the image on podman (test/image/);
#   - the Docker CLI, as `docker`: the image test runs advanced/proxy.md's `docker network inspect` / `docker inspect`
#     commands as written, against podman's Docker-compatible API (there is no Docker engine on these machines).
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
# v28: the last line whose client negotiates down to API 1.41, the version podman 4.3 (Debian 12) serves.
DOCKER_CLI_VERSION=v28.5.2

command -v go >/dev/null || { echo "install-proxies: the Go toolchain (go) is needed to build Traefik and Compose" >&2; exit 1; }
GOBIN="${HSE_TEST_GOBIN:-$(go env GOPATH)/bin}"
mkdir -p "$GOBIN"
# On a developer's machine shared with other work, build one package at a time so that work keeps moving; in CI
# nothing else runs while the peers build, so every core builds (about twice as fast on two cores).
if [[ "${CI:-}" != "true" ]]; then export GOFLAGS="${GOFLAGS:-} -p=1"; fi

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
  if [[ -x "$GOBIN/traefik" ]] && "$GOBIN/traefik" version 2>/dev/null | grep -E "Version:[[:space:]]+${want}\$" >/dev/null; then
    echo "install-proxies: traefik ${TRAEFIK_VERSION} already installed"
    return
  fi
  echo "install-proxies: building traefik ${TRAEFIK_VERSION} (several minutes)"
  build_pinned github.com/traefik/traefik/v3 "$TRAEFIK_VERSION" ./cmd/traefik "$GOBIN/traefik" \
    "-X github.com/traefik/traefik/v3/pkg/version.Version=${want}"
  "$GOBIN/traefik" version
}

install_compose() {
  if [[ -x "$GOBIN/docker-compose" ]] && "$GOBIN/docker-compose" version 2>/dev/null | grep "${COMPOSE_VERSION}\$" >/dev/null; then
    echo "install-proxies: docker-compose ${COMPOSE_VERSION} already installed"
    return
  fi
  echo "install-proxies: building docker-compose ${COMPOSE_VERSION} (a few minutes)"
  build_pinned github.com/docker/compose/v2 "$COMPOSE_VERSION" ./cmd "$GOBIN/docker-compose" \
    "-X github.com/docker/compose/v2/internal.Version=${COMPOSE_VERSION}"
  "$GOBIN/docker-compose" version
}

# The Docker CLI has no go.mod: its module is vendor.mod (the project versions by calendar, not SemVer), which its own
# scripts/with-go-mod.sh copies to go.mod before building. Same here, on a writable copy of the pinned module source.
install_docker_cli() {
  local want="${DOCKER_CLI_VERSION#v}" src work
  if [[ -x "$GOBIN/docker" ]] && "$GOBIN/docker" --version 2>/dev/null | grep "^Docker version ${want}," >/dev/null; then
    echo "install-proxies: docker CLI ${DOCKER_CLI_VERSION} already installed"
    return
  fi
  echo "install-proxies: building the docker CLI ${DOCKER_CLI_VERSION} (a few minutes)"
  src="$(go mod download -json "github.com/docker/cli@${DOCKER_CLI_VERSION}+incompatible" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$src" ]] || { echo "install-proxies: could not download github.com/docker/cli@${DOCKER_CLI_VERSION}" >&2; exit 1; }
  work="$(mktemp -d)"
  cp -r "$src/." "$work/"
  chmod -R u+w "$work"
  (cd "$work" && rm -rf vendor && cp vendor.mod go.mod && cp vendor.sum go.sum &&
    CGO_ENABLED=0 go build -mod=mod -o "$GOBIN/docker" -ldflags "-s -w -X github.com/docker/cli/cli/version.Version=${want}" ./cmd/docker)
  rm -rf "$work"
  "$GOBIN/docker" --version
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
install_docker_cli
install_traefik
