#!/bin/sh
# railyard-plot's -o: an extension other than .png/.svg/.pdf (or an empty -o) is a usage
# error, exit 2, naming -o, before any input is read; it was a matplotlib ValueError
# traceback (exit 1), and -o '' wrote a hidden file named ".png".
# Usage: plot_cli_test.sh RAILYARD_PLOT_PY
set -u
PLOT=$1
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
for out in run.jpeg2 run ""; do
  python3 "$PLOT" missing.json -o "$out" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -ne 2 ] || ! grep -q -- "-o '$out': the extension must be one of .png, .svg, .pdf" "$tmp/err"; then
    echo "FAIL: railyard-plot -o '$out': exit $got, stderr: $(cat "$tmp/err")"
    failed=1
  else
    echo "ok: railyard-plot -o '$out': exit 2, names -o"
  fi
done
if [ -e "$tmp/.png" ]; then echo "FAIL: railyard-plot -o '' wrote ./.png"; failed=1; fi
# A good extension still reaches the input check (exit 2 naming the missing file).
python3 "$PLOT" missing.json -o run.PNG >"$tmp/out" 2>"$tmp/err"
got=$?
if [ "$got" -ne 2 ] || ! grep -q "missing.json: No such file or directory" "$tmp/err"; then
  echo "FAIL: railyard-plot -o run.PNG missing.json: exit $got, stderr: $(cat "$tmp/err")"
  failed=1
else
  echo "ok: railyard-plot -o run.PNG reads its input"
fi
# A malformed input names the format the file claims (railyard-perf) or both accepted formats,
# not only railyard-tcp-pump's.
printf '{"tool": "railyard-perf", "rows": [{"size": 8,\n' >"$tmp/perf.json"
printf '{"size": 8, "algbw_gbps": 1.0}\n{"size": "x"}\n' >"$tmp/pump.json"
for c in "perf.json|perf.json: railyard-perf --json output that is not valid JSON (line 2 column 1: Expecting" \
         "pump.json|pump.json:2: neither railyard-perf --json output (one JSON object with \"rows\") nor a railyard-tcp-pump JSON line (an object with size and algbw_gbps)"; do
  file=${c%%|*} want=${c#*|}
  python3 "$PLOT" "$tmp/$file" -o run.png >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -eq 0 ] || ! grep -qF -- "$want" "$tmp/err"; then
    echo "FAIL: railyard-plot $file: exit $got, stderr: $(cat "$tmp/err")"
    failed=1
  else
    echo "ok: railyard-plot $file: exit $got, names the format"
  fi
done
exit $failed
