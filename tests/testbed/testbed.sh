#!/usr/bin/env bash
# Railyard netns cluster testbed: H hosts as network namespaces, cabled as a
# ring, chain, mesh or edge list, R rails (veth pairs) per cable, a management
# bridge, optional shaping, and cut/heal/down/shape of single rail links.
# See tests/testbed/README.md. Needs root; exits 77 (skip) without it.
#
#   testbed.sh up    [OPTIONS] [--out FILE.json]     build, keep, print the prefix
#   testbed.sh run   [OPTIONS] [--out FILE.json] -- CMD ARGS...
#   testbed.sh cut   [--prefix P] CABLE [RAIL]       nft drop, both ways, link stays up
#   testbed.sh down  [--prefix P] CABLE [RAIL]       ip link set down (both ends)
#   testbed.sh heal  [--prefix P] CABLE [RAIL]       undo cut and down
#   testbed.sh shape [--prefix P] CABLE [RAIL] RATE|none
#   testbed.sh teardown PREFIX | --stale
#   testbed.sh lanes                                 list the standard lanes
#   testbed.sh json  [--prefix P]                    print a built testbed's JSON
#
# OPTIONS: --lane NAME | --topo ring|chain|mesh --hosts H | --edges 0-1,1-2[,A:P-B:Q]
#          --rails R  --ports N  --wiring default|p0p0  --shuffle-ports
#          --rate RATE (tc tbf on every rail veth)  --prefix P  --keep
#          --data-net A.B (default 10.201)  --mgmt-net A.B.C (default 10.200.0)
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF="$HERE/testbed.sh"
STATE_DIR=${TESTBED_STATE_DIR:-/run/railyard-testbed}
FAIL=125

say() { echo "testbed: $*" >&2; }

usage() { sed -n '2,/^set -uo/p' "$SELF" | sed '$d;s/^# \{0,1\}//' >&2; }

# Standard lanes: name -> options. Extra options given after --lane override.
lane_opts() {
  case "$1" in
    ring4x2)        echo "--topo ring --hosts 4 --rails 2" ;;
    chain4)         echo "--topo chain --hosts 4 --rails 1" ;;
    mesh3)          echo "--topo mesh --hosts 3 --rails 1" ;;
    ring3-p0p0)     echo "--topo ring --hosts 3 --rails 1 --wiring p0p0" ;;
    ring4-shuffled) echo "--topo ring --hosts 4 --rails 2 --shuffle-ports" ;;
    *) return 1 ;;
  esac
}
LANES="ring4x2 chain4 mesh3 ring3-p0p0 ring4-shuffled"

require_env() {
  if [ "$(id -u)" != 0 ]; then say "needs root (skipping)"; exit 77; fi
  local t
  for t in ip python3; do
    command -v "$t" >/dev/null 2>&1 || { say "$t not found (skipping)"; exit 77; }
  done
  ip netns list >/dev/null 2>&1 || { say "ip netns unavailable (skipping)"; exit 77; }
}

valid_prefix() { [[ "$1" =~ ^[A-Za-z][A-Za-z0-9_]{0,23}$ ]]; }

# Namespaces that belong to testbed PREFIX: PREFIX-sw and PREFIX-h<N>.
prefix_namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$1-(sw|h[0-9]+)\$" || true
}

teardown_prefix() {
  local p=$1 n pids i
  valid_prefix "$p" || { say "refusing to tear down bad prefix '$p'"; return 1; }
  local nss; nss=$(prefix_namespaces "$p")
  for n in $nss; do
    # processes left inside would keep the namespace (and its veths) alive
    pids=$(ip netns pids "$n" 2>/dev/null)
    [ -n "$pids" ] && kill -TERM $pids 2>/dev/null
  done
  for n in $nss; do
    for i in $(seq 50); do  # bounded poll (5 s) for the processes to exit
      pids=$(ip netns pids "$n" 2>/dev/null)
      [ -z "$pids" ] && break
      [ "$i" = 30 ] && kill -KILL $pids 2>/dev/null
      sleep 0.1
    done
  done
  # host namespaces first: deleting them destroys their veths (and the peers)
  for n in $nss; do [ "${n##*-}" = sw ] || ip netns del "$n" 2>/dev/null; done
  for n in $nss; do [ "${n##*-}" = sw ] && ip netns del "$n" 2>/dev/null; done
  rm -f "$STATE_DIR/$p.json" "$STATE_DIR/$p.owner" "$STATE_DIR/$p.sh"
  local left; left=$(prefix_namespaces "$p")
  if [ -n "$left" ]; then say "could not remove: $left"; return 1; fi
  return 0
}

# Remove testbeds whose creating process is gone and that were not kept on purpose.
teardown_stale() {
  local f p owner
  for f in "$STATE_DIR"/*.owner; do
    [ -e "$f" ] || continue
    p=$(basename "$f" .owner)
    read -r owner keep <"$f" || continue
    [ "$keep" = keep ] && continue
    if ! kill -0 "$owner" 2>/dev/null; then say "removing stale testbed $p (owner $owner gone)"; teardown_prefix "$p"; fi
  done
  # leftovers without a state file, named like our default prefix ry<pid>, owner dead
  for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^ry[0-9]+-(sw|h[0-9]+)$'); do
    p=${n%-*}
    [ -e "$STATE_DIR/$p.owner" ] && continue
    kill -0 "${p#ry}" 2>/dev/null && continue
    say "removing stale testbed $p"; teardown_prefix "$p"
  done
}

# ------------------------------------------------------------------ build

PREFIX="" KEEP=0 OUT="" LANE=""
PLAN_ARGS=()
DATA_NET=10.201 MGMT_NET=10.200.0

parse_build_opts() {
  # fills PREFIX KEEP OUT LANE PLAN_ARGS DATA_NET MGMT_NET; sets REST to args after --
  local args=("$@") i=0 lane_args=()
  REST=()
  # a lane's options go first so explicit options override them
  for ((i = 0; i < ${#args[@]}; i++)); do
    [ "${args[i]}" = -- ] && break
    if [ "${args[i]}" = --lane ]; then
      LANE=${args[i + 1]:-}
      local lo; lo=$(lane_opts "$LANE") || { say "unknown lane '$LANE' (lanes: $LANES)"; return 1; }
      read -ra lane_args <<<"$lo"
    fi
  done
  set -- "${lane_args[@]}" "$@"
  while [ $# -gt 0 ]; do
    case "$1" in
      --) shift; REST=("$@"); return 0 ;;
      --lane) shift 2 ;;
      --topo|--hosts|--rails|--ports|--wiring|--rate|--edges)
        [ $# -ge 2 ] || { say "$1 needs a value"; return 1; }
        if [ "$1" = --edges ]; then PLAN_ARGS+=(--topo edges); fi
        PLAN_ARGS+=("$1" "$2"); shift 2 ;;
      --shuffle-ports) PLAN_ARGS+=("$1"); shift ;;
      --data-net) DATA_NET=${2:-}; shift 2 ;;
      --mgmt-net) MGMT_NET=${2:-}; shift 2 ;;
      --prefix) PREFIX=${2:-}; shift 2 ;;
      --out) OUT=${2:-}; shift 2 ;;
      --keep) KEEP=1; shift ;;
      -h|--help) usage; exit 0 ;;
      *) say "unknown option '$1'"; return 1 ;;
    esac
  done
  return 0
}

# build: plan, check ranges, run the build script. Sets TESTBED_JSON.
build() {
  [ -n "$PREFIX" ] || PREFIX="ry$$"
  valid_prefix "$PREFIX" || { say "bad --prefix '$PREFIX'"; return 1; }
  if [ -n "$(prefix_namespaces "$PREFIX")" ]; then
    say "namespaces with prefix $PREFIX already exist (teardown $PREFIX?)"; PREFIX_TAKEN=1; return 1
  fi
  mkdir -p "$STATE_DIR" || return 1
  TESTBED_JSON="$STATE_DIR/$PREFIX.json"
  local script="$STATE_DIR/$PREFIX.sh"
  python3 "$HERE/testbed.py" check-overlap --data-net "$DATA_NET" --mgmt-net "$MGMT_NET" || {
    say "refusing to start: pick other ranges with --data-net / --mgmt-net"; return 1; }
  # the owner file is written first, so teardown_stale can find a half-built testbed
  echo "$$ $([ "$KEEP" = 1 ] && echo keep || echo auto)" >"$STATE_DIR/$PREFIX.owner"
  python3 "$HERE/testbed.py" plan "${PLAN_ARGS[@]}" --prefix "$PREFIX" --lane "$LANE" \
    --data-net "$DATA_NET" --mgmt-net "$MGMT_NET" \
    --json-out "$TESTBED_JSON" --script-out "$script" || return 1
  local tool
  for tool in tc nft; do command -v $tool >/dev/null || say "warning: $tool not found; some subcommands will fail"; done
  local err
  if ! err=$(bash "$script" 2>&1); then say "build failed: $err"; return 1; fi
  rm -f "$script"
  if [ -n "$OUT" ]; then cp "$TESTBED_JSON" "$OUT" || return 1; fi
  return 0
}

BUILT=0 PREFIX_TAKEN=0
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ "$KEEP" != 1 ] && [ -n "$PREFIX" ] && [ "$PREFIX_TAKEN" != 1 ]; then
    teardown_prefix "$PREFIX" || rc=$FAIL
  fi
  exit "$rc"
}

cmd_up() {
  parse_build_opts "$@" || exit $FAIL
  [ ${#REST[@]} -eq 0 ] || { say "up takes no command (use run)"; exit $FAIL; }
  KEEP=1
  trap 'teardown_prefix "$PREFIX"; exit 130' INT TERM
  if ! build; then
    KEEP=0; [ "$PREFIX_TAKEN" = 1 ] || teardown_prefix "$PREFIX"; exit $FAIL
  fi
  trap - INT TERM
  echo "$$ keep" >"$STATE_DIR/$PREFIX.owner"
  echo "$PREFIX"
  exit 0
}

CHILD=""
on_signal() {
  local sig=$1
  [ -n "$CHILD" ] && kill -"$sig" "$CHILD" 2>/dev/null && wait "$CHILD" 2>/dev/null
  say "interrupted (SIG$sig), tearing down"
  case "$sig" in INT) exit 130 ;; *) exit 143 ;; esac
}

cmd_run() {
  parse_build_opts "$@" || exit $FAIL
  [ ${#REST[@]} -gt 0 ] || { say "run needs: -- CMD ARGS..."; exit $FAIL; }
  trap cleanup EXIT
  trap 'on_signal INT' INT
  trap 'on_signal TERM' TERM
  build || exit $FAIL
  export TESTBED_JSON TESTBED_PREFIX=$PREFIX TESTBED_SH=$SELF TESTBED_LANE=$LANE
  TESTBED_HOSTS=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hosts_count"])' "$TESTBED_JSON")
  export TESTBED_HOSTS
  # CMD runs in the root namespace; background + wait so TERM reaches the trap at once
  "${REST[@]}" 0<&0 &
  CHILD=$!
  local rc
  wait "$CHILD"; rc=$?
  CHILD=""
  exit "$rc"   # the EXIT trap tears down (unless --keep); a teardown failure gives 125
}

# ------------------------------------------------------------------ link ops

find_json() {
  # sets J from --prefix P, else TESTBED_JSON, else TESTBED_PREFIX
  local p="${1:-}"
  if [ -n "$p" ]; then J="$STATE_DIR/$p.json"
  elif [ -n "${TESTBED_JSON:-}" ]; then J=$TESTBED_JSON
  elif [ -n "${TESTBED_PREFIX:-}" ]; then J="$STATE_DIR/$TESTBED_PREFIX.json"
  else say "which testbed? give --prefix P or set TESTBED_PREFIX"; return 1; fi
  [ -r "$J" ] || { say "no testbed description at $J"; return 1; }
}

cmd_link() {
  local op=$1; shift
  local p=""
  if [ "${1:-}" = --prefix ]; then p=${2:-}; shift 2; fi
  [ $# -ge 1 ] || { say "$op needs: CABLE [RAIL]${op/shape/ RATE|none}"; exit 2; }
  find_json "$p" || exit 1
  python3 "$HERE/testbed.py" link --json "$J" "$op" "$@"
}

main() {
  local sub=${1:-}
  [ $# -gt 0 ] && shift
  case "$sub" in
    up) require_env; cmd_up "$@" ;;
    run) require_env; cmd_run "$@" ;;
    cut|heal|down|shape) require_env; cmd_link "$sub" "$@" ;;
    teardown)
      require_env
      [ $# -eq 1 ] || { say "teardown needs PREFIX or --stale"; exit 2; }
      if [ "$1" = --stale ]; then teardown_stale; else teardown_prefix "$1"; fi ;;
    lanes) for l in $LANES; do printf '%-16s %s\n' "$l" "$(lane_opts "$l")"; done ;;
    json)
      local p=""
      if [ "${1:-}" = --prefix ]; then p=${2:-}; fi
      find_json "$p" && cat "$J" ;;
    -h|--help|help) usage ;;
    *) usage; exit 2 ;;
  esac
}

main "$@"
