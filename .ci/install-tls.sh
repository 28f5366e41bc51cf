#!/usr/bin/env bash
# Installs the pinned Go-built peers the TLS-mode tests (test/tls/) need and Debian does not ship:
#   - pebble, Let's Encrypt's ACME test CA, which issues and renews the router's certificates on loopback;
#   - pebble-challtestsrv, the DNS server pebble resolves the test domain with (pointed at 127.0.0.1).
# Both land in the same GOBIN as the Tailscale client (HSE_TEST_GOBIN, else $(go env GOPATH)/bin), where
# test/harness/pebble.ts looks for them. Already-installed pinned versions are kept, so re-runs are quick.
# Called by .ci/run after the Go toolchain is available; safe to run by hand.
set -euo pipefail

# Keep in step with PEBBLE_VERSION in test/harness/pebble.ts.
PEBBLE_VERSION=v2.10.1
MODULE=github.com/letsencrypt/pebble/v2

command -v go >/dev/null || { echo "install-tls: the Go toolchain (go) is needed to build pebble" >&2; exit 1; }
GOBIN="${HSE_TEST_GOBIN:-$(go env GOPATH)/bin}"
export GOBIN
mkdir -p "$GOBIN"

have=1
for bin in pebble pebble-challtestsrv; do
  go version -m "$GOBIN/$bin" 2>/dev/null | grep -P "^\tmod\t\Q$MODULE\E\t\Q$PEBBLE_VERSION\E\t" >/dev/null || have=0
done
if ((have)); then
  echo "install-tls: pebble ${PEBBLE_VERSION} already installed"
  exit 0
fi
echo "install-tls: go install pebble and pebble-challtestsrv ${PEBBLE_VERSION}"
# On a shared developer machine one package at a time, so other work keeps moving; in CI every core.
flags="${GOFLAGS:-}"
if [[ "${CI:-}" != "true" ]]; then flags="$flags -p=1"; fi
CGO_ENABLED=0 GOFLAGS="$flags" go install "$MODULE/cmd/pebble@$PEBBLE_VERSION" "$MODULE/cmd/pebble-challtestsrv@$PEBBLE_VERSION"
