#!/bin/sh
# railyard-plot's usage and input errors: each is exit 2 with a sentence naming what was
# wrong, on stderr.
#   - -o with an extension other than .png/.svg/.pdf (or an empty -o) names -o, before any
#     input is read; it was a matplotlib ValueError traceback (exit 1), and -o '' wrote a
#     hidden file named ".png".
#   - a good extension still reaches the input check (naming the missing file).
#   - a malformed input names the format the file claims (railyard-perf) or both accepted
#     formats, not only railyard-tcp-pump's.
# Usage: plot_cli_test.sh RAILYARD_PLOT_PY
set -u
PLOT=$1
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1

# expect_usage_error LABEL WANT ARG...: runs railyard-plot ARG...; passes when it exits 2
# and its stderr holds WANT (a fixed string), else prints FAIL with what it did.
expect_usage_error() {
  label=$1 want=$2
  shift 2
  python3 "$PLOT" "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -ne 2 ] || ! grep -qF -- "$want" "$tmp/err"; then
    echo "FAIL: railyard-plot $label: exit $got (want 2 naming \"$want\"), stderr: $(cat "$tmp/err")"
    failed=1
  else
    echo "ok: railyard-plot $label: exit 2, names \"$want\""
  fi
}

for out in run.jpeg2 run ""; do
  expect_usage_error "-o '$out'" "-o '$out': the extension must be one of .png, .svg, .pdf" missing.json -o "$out"
done
if [ -e "$tmp/.png" ]; then echo "FAIL: railyard-plot -o '' wrote ./.png"; failed=1; fi
expect_usage_error "-o run.PNG missing.json" "missing.json: No such file or directory" missing.json -o run.PNG
printf '{"tool": "railyard-perf", "rows": [{"size": 8,\n' >"$tmp/perf.json"
printf '{"size": 8, "algbw_gbps": 1.0}\n{"size": "x"}\n' >"$tmp/pump.json"
expect_usage_error perf.json \
  "perf.json: railyard-perf --json output that is not valid JSON (line 2 column 1: Expecting" "$tmp/perf.json" -o run.png
expect_usage_error pump.json \
  "pump.json:2: neither railyard-perf --json output (one JSON object with \"rows\") nor a railyard-tcp-pump JSON line (an object with size and algbw_gbps)" \
  "$tmp/pump.json" -o run.png
exit $failed
