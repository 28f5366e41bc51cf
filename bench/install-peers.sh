#!/bin/sh
# Installs the peers the benchmarks compare against, pinned, into $GOBIN (default ~/go/bin); each is skipped when the
# right version is already there. Needs Go and network access to the Go module proxy; wrk comes from Debian (apt).
#
#   headscale v0.29.1   `go install github.com/juanfont/headscale/cmd/headscale@v0.29.1` fails: the proxy answers
#                       403 for the module's version list. Requiring the exact version from a throwaway module and
#                       building the command from there resolves the same source without that list.
#   derper v1.102.3     plain `go install` works.
#   wrk                 Debian's package (HTTP load generator for bench/router.ts).
set -eu

HEADSCALE_VERSION=v0.29.1
TAILSCALE_VERSION=v1.102.3
GOBIN="${GOBIN:-$(go env GOPATH)/bin}"
export GOBIN
mkdir -p "$GOBIN"

have_version() { # binary, version string its version output must contain
  [ -x "$GOBIN/$1" ] && "$GOBIN/$1" "$3" 2>/dev/null | grep -q -- "$2"
}

if have_version headscale "$HEADSCALE_VERSION" version; then
  echo "headscale $HEADSCALE_VERSION already in $GOBIN"
else
  echo "building headscale $HEADSCALE_VERSION into $GOBIN"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cat >"$tmp/go.mod" <<EOF
module hsebench/peers

go 1.26

require github.com/juanfont/headscale $HEADSCALE_VERSION
EOF
  # A build-tagged import keeps headscale's requirements in go.sum without a main package of our own.
  cat >"$tmp/tools.go" <<'EOF'
//go:build tools

package tools

import _ "github.com/juanfont/headscale/cmd/headscale"
EOF
  (cd "$tmp" && go mod tidy && go build -o "$GOBIN/headscale" github.com/juanfont/headscale/cmd/headscale)
  rm -rf "$tmp"
  trap - EXIT
fi

if have_version derper "$(echo "$TAILSCALE_VERSION" | sed 's/^v//')" --version; then
  echo "derper $TAILSCALE_VERSION already in $GOBIN"
else
  echo "installing derper $TAILSCALE_VERSION into $GOBIN"
  go install "tailscale.com/cmd/derper@$TAILSCALE_VERSION"
fi

if command -v wrk >/dev/null 2>&1; then
  echo "wrk already installed"
else
  echo "installing wrk (Debian package)"
  apt-get install -y wrk
fi
