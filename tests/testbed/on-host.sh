#!/usr/bin/env bash
# on-host.sh I CMD ARGS...: run CMD inside testbed host I's network namespace
# (the testbed is $TESTBED_PREFIX, as exported by `testbed.sh run`).
set -u
if [ $# -lt 2 ]; then echo "usage: on-host.sh HOST CMD [ARGS...]" >&2; exit 2; fi
if [ -z "${TESTBED_PREFIX:-}" ]; then echo "on-host.sh: TESTBED_PREFIX is not set" >&2; exit 2; fi
h=$1; shift
case "$h" in ''|*[!0-9]*) echo "on-host.sh: bad host '$h'" >&2; exit 2 ;; esac
exec ip netns exec "$TESTBED_PREFIX-h$h" "$@"
