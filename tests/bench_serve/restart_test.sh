#!/usr/bin/env bash
# A real `tokenmill serve` with --api-key-file, then:
#  1. SIGHUP reloads the key file (a new key is logged by name), a broken file keeps the old keys
#     (logged), the server lives on, and no key appears in the log;
#  2. `bench serve --scenario recovery --short --restart-command CMD`: CMD kills the server (SIGKILL)
#     and starts a new one on the same port in the middle of the load; the report must say the
#     server served again, the command succeeded, and at most the requests in flight were lost.
# Usage: restart_test.sh TOKENMILL MODEL OUTDIR. About 8 s.
set -u
TM=$1
MODEL=$2
OUT=$3
rm -rf "$OUT"
mkdir -p "$OUT"
KEYS="$OUT/keys.yaml"
PIDFILE="$OUT/server.pid"
fail() {
  echo "FAIL: $*" >&2
  for f in "$OUT"/server*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done
  exit 1
}
printf 'keys:\n  - {name: bench, key: sk-bench-000001}\n' > "$KEYS"

# Starts a server on port $1 (0: any), log $2; waits until it listens (retrying while the port is
# still held by the server just killed). Prints the port.
start_server() {
  local port=$1 log=$2 tries=0
  while :; do
    "$TM" serve --model "$MODEL" --port "$port" --threads 1 --api-key-file "$KEYS" > "$log" 2>&1 &
    local pid=$!
    echo "$pid" > "$PIDFILE"
    local deadline=$((SECONDS + 15))
    while [ $SECONDS -lt $deadline ]; do
      local p
      p=$(grep -o 'listening on http://[^ :]*:[0-9]*' "$log" 2>/dev/null | head -1 | sed 's/.*://')
      if [ -n "$p" ]; then echo "$p"; return 0; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.02
    done
    tries=$((tries + 1))
    [ $tries -lt 50 ] || return 1
    sleep 0.05
  done
}
wait_log() {  # file, pattern, seconds
  local deadline=$((SECONDS + $3))
  until grep -q "$2" "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.02
  done
}

PORT=$(start_server 0 "$OUT/server1.log") || fail "the server did not start"
# Never outlives the test: a watchdog kills whichever server is current after 60 s.
# (Its output goes nowhere: a sleep holding the test's stdout would keep ctest waiting.)
(exec > /dev/null 2>&1; for _ in $(seq 600); do sleep 0.1; done; kill -9 "$(cat "$PIDFILE")") &
WATCHDOG=$!
trap 'kill -9 "$(cat "$PIDFILE" 2>/dev/null)" 2>/dev/null; kill "$WATCHDOG" 2>/dev/null' EXIT
wait_log "$OUT/server1.log" "ready: serving" 15 || fail "the server did not get ready"
PID=$(cat "$PIDFILE")

# 1. SIGHUP
printf 'keys:\n  - {name: bench, key: sk-bench-000001}\n  - {name: extra, key: sk-extra-000002, role: admin}\n' > "$KEYS"
kill -HUP "$PID"
wait_log "$OUT/server1.log" "API keys: reloaded .*: 2 key(s) (bench, extra)" 5 || fail "SIGHUP did not reload the keys"
printf 'keys:\n  - {name: bench key: sk-bench-000001\n' > "$KEYS"
kill -HUP "$PID"
wait_log "$OUT/server1.log" "reloading .* failed, keeping the 2 key(s) loaded before" 5 || fail "a broken file was not reported"
kill -0 "$PID" 2>/dev/null || fail "SIGHUP stopped the server"
if grep -q "sk-" "$OUT/server1.log"; then fail "a key is in the log"; fi
printf 'keys:\n  - {name: bench, key: sk-bench-000001}\n' > "$KEYS"

# 2. The restart command: SIGKILL, then a new server on the same port.
cat > "$OUT/restart.sh" <<EOF
kill -9 \$(cat "$PIDFILE")
$(declare -f start_server)
TM="$TM" MODEL="$MODEL" KEYS="$KEYS" PIDFILE="$PIDFILE" SECONDS=0
start_server $PORT "$OUT/server2.log" > /dev/null
EOF
"$TM" bench serve --base-url "http://127.0.0.1:$PORT" --api-key sk-bench-000001 --scenario recovery --short \
  --restart-command "bash $OUT/restart.sh" --metrics-interval 0 --no-progress --quiet --timeout 10 \
  --json "$OUT/report.json" > "$OUT/bench.log" 2>&1 || fail "bench serve failed: $(tail -5 "$OUT/bench.log")"
R="$OUT/report.json"
grep -q '"mode": "restart"' "$R" || fail "no restart mode in the report"
grep -q '"command_exit_code": 0' "$R" || fail "the restart command failed"
grep -q '"outage_seen": true' "$R" || fail "no outage seen: did the command kill the server?"
grep -q '"served_again": true' "$R" || fail "the server did not serve again: $(grep -o '"verdict": "[^"]*"' "$R")"
LOST=$(grep -o '"lost": [0-9]*' "$R" | head -1 | sed 's/.*: //')
[ -n "$LOST" ] && [ "$LOST" -le 4 ] || fail "lost $LOST requests (at most the 2 in flight, and a connect racing the kill)"
grep -q "ready: serving" "$OUT/server2.log" || fail "the new server did not get ready"
grep -o '"verdict": "[^"]*"' "$R"
echo "PASS"
