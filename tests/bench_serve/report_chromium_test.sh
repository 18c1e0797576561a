#!/bin/sh
# Renders the HTML report of `tokenmill bench serve --scenario all --short` (run against the stub
# server) in headless Chromium and checks that the inline script drew every chart without error.
# usage: report_chromium_test.sh TOKENMILL STUB_SERVER OUTDIR     (exit 77 = skipped: no chromium)
# OUTDIR keeps report.html, report.json, dom.html, report.png and the logs for inspection.
set -u
TOKENMILL=$1
STUB=$2
OUT=$3
CHROME=""
for c in chromium chromium-browser google-chrome; do
  if command -v "$c" >/dev/null 2>&1; then CHROME=$c; break; fi
done
if [ -z "$CHROME" ]; then echo "chromium not installed: skipping"; exit 77; fi

fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$OUT" && mkdir -p "$OUT" || fail "cannot create $OUT"
"$STUB" --port-file "$OUT/port" --ttft-ms 60 --itl-ms 6 --max-parallel 4 --lifetime 300 > "$OUT/stub.log" 2>&1 &
STUB_PID=$!
trap 'kill "$STUB_PID" 2>/dev/null' EXIT INT TERM
i=0
while [ ! -s "$OUT/port" ]; do
  i=$((i + 1)); [ $i -gt 100 ] && fail "stub server did not start"; sleep 0.1
done
PORT=$(cat "$OUT/port")

"$TOKENMILL" bench serve --base-url "http://127.0.0.1:$PORT" --scenario all --short --no-progress \
  --metrics-interval 0.25 --json "$OUT/report.json" --report "$OUT/report.html" \
  > "$OUT/stdout.txt" 2> "$OUT/stderr.txt" || fail "bench serve failed: $(tail -5 "$OUT/stderr.txt")"
[ -s "$OUT/report.html" ] || fail "no report written"

FLAGS="--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
--disable-component-update --disable-sync --disable-dev-shm-usage"
# shellcheck disable=SC2086
timeout 120 "$CHROME" $FLAGS --user-data-dir="$OUT/profile-dom" --enable-logging=stderr --v=0 \
  --dump-dom "file://$OUT/report.html" > "$OUT/dom.html" 2> "$OUT/chromium-dom.log" \
  || fail "chromium --dump-dom failed: $(tail -5 "$OUT/chromium-dom.log")"
# shellcheck disable=SC2086
timeout 120 "$CHROME" $FLAGS --user-data-dir="$OUT/profile-shot" --hide-scrollbars --window-size=1400,5200 \
  --screenshot="$OUT/report.png" "file://$OUT/report.html" > "$OUT/chromium-shot.log" 2>&1 \
  || echo "note: screenshot failed (not required)"

grep -q 'data-render="ok"' "$OUT/dom.html" || fail "script did not finish: $(grep -o 'data-render-error="[^"]*"' "$OUT/dom.html")"
grep -q 'data-render-error="' "$OUT/dom.html" && fail "script error: $(grep -o 'data-render-error="[^"]*"' "$OUT/dom.html")"
grep -q 'Uncaught' "$OUT/chromium-dom.log" && fail "console error: $(grep Uncaught "$OUT/chromium-dom.log" | head -3)"
CHARTS=$(grep -o 'data-charts="[0-9]*"' "$OUT/dom.html" | head -1 | tr -dc 0-9)
SVGS=$(grep -o '<svg class="chart"' "$OUT/dom.html" | wc -l)
[ "${CHARTS:-0}" -ge 20 ] || fail "only ${CHARTS:-0} charts drawn"
[ "$SVGS" -eq "$CHARTS" ] || fail "$SVGS chart SVGs in the DOM, script counted $CHARTS"
for id in timeline-tokens timeline-errors single-user-ttft-cdf sweep-throughput sweep-ttft long-prompt-ttft \
          long-output-drift oom-steps recovery-ttft metrics-kv metrics-queue metrics-preemptions; do
  grep -q "data-chart=\"$id\"" "$OUT/dom.html" || fail "chart $id missing"
done
# (The inline script is part of the dump: patterns above match attributes and elements, not its source.)
# Charts have content: plotted lines and markers, not just axes.
PATHS=$(grep -o '<path d="M' "$OUT/dom.html" | wc -l)
DOTS=$(grep -o '<circle' "$OUT/dom.html" | wc -l)
[ "$PATHS" -ge 20 ] || fail "only $PATHS plotted lines"
[ "$DOTS" -ge 50 ] || fail "only $DOTS markers"
grep -q '>no data</text>' "$OUT/dom.html" && echo "note: some chart has no data"
# The timelines give every run its own line (hover title "scenario: run"), and the only rotated text
# is each chart's y-axis title (scenario labels are horizontal, above the plot).
for run in 'concurrency: concurrency=1' 'concurrency: concurrency=4' 'oom-boundary: step 2'; do
  [ "$(grep -o "<title>$run[^<]*</title>" "$OUT/dom.html" | wc -l)" -eq 2 ] || fail "no timeline line of its own for run '$run'"
done
ROT=$(grep -o 'transform="rotate(' "$OUT/dom.html" | wc -l)
[ "$ROT" -le "$CHARTS" ] || fail "$ROT rotated labels for $CHARTS charts (a label rotated over a plot?)"
echo "OK: $CHARTS charts, $PATHS lines, $DOTS markers; screenshot: $OUT/report.png"
exit 0
