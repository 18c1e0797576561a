#!/bin/sh
# The HTML report of a run against the REAL server renders in headless Chromium: runs the stub
# report test (report_chromium_test.sh: `bench serve --scenario all --short`, Chromium --dump-dom,
# every chart drawn, no script error) with real_server_stub.sh in place of the stub server, then
# checks that the report is the real server's and that the /metrics series charts are drawn with data.
# usage: real_report_chromium_test.sh TOKENMILL OUTDIR     (exit 77 = skipped: no chromium)
set -u
TOKENMILL=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*"; exit 1; }

TM_BINARY=$TOKENMILL sh "$HERE/report_chromium_test.sh" "$TOKENMILL" "$HERE/real_server_stub.sh" "$OUT"
rc=$?
[ $rc -eq 0 ] || exit $rc   # 77 (no chromium) passes through as a skip

grep -q '"model": "stories260K"' "$OUT/report.json" || fail "report.json is not from the real server"
grep -q '"available": true' "$OUT/report.json" || fail "/metrics was not scraped"
# Each /metrics chart: its <svg ...>...</svg> element has a plotted line and no "no data" label.
for id in metrics-kv metrics-queue metrics-preemptions; do
  CHART=$(awk -v id="data-chart=\"$id\"" 'BEGIN { RS = "</svg>" } index($0, id) { print; exit }' "$OUT/dom.html")
  [ -n "$CHART" ] || fail "chart $id missing"
  echo "$CHART" | grep -q '<path d="M' || fail "chart $id has no plotted line"
  echo "$CHART" | grep -q '>no data</text>' && fail "chart $id has no data"
done
grep -q "serving stories260K" "$OUT/real-serve.log" || fail "the real server did not serve: $(tail -3 "$OUT/real-serve.log")"
# report_chromium_test.sh has sent SIGTERM to real_server_stub.sh on exit: the server drains and logs
# its stop; wait for that (polled, 60 s at most) so the test ends with no server left running.
i=0
until grep -q "server stopped" "$OUT/real-serve.log"; do
  i=$((i + 1)); [ $i -gt 1200 ] && fail "the server did not stop after SIGTERM: $(tail -3 "$OUT/real-serve.log")"
  sleep 0.05
done
echo "OK: real-server report renders with the /metrics charts"
exit 0
