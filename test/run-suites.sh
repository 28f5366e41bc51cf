#!/usr/bin/env bash
# The ava suite in two runs: everything that leaves the host's network interfaces alone (two test files at a time),
# then the tests that add and remove interfaces (container engine, network namespaces), one file at a time
# (ava.host-network.config.js says why). Both always run; the exit status is non-zero if either failed.
set -u
cd "$(dirname "$0")/.."
ava "$@"
first=$?
ava --config ava.host-network.config.js "$@"
second=$?
exit $((first != 0 ? first : second))
