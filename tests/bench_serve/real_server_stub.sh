#!/usr/bin/env bash
# Stands in for tm_stub_openai_server with the REAL server: takes the stub's command line
# (--port-file F [--lifetime S], other stub options ignored), starts `$TM_BINARY serve` on a free
# loopback port with the settings of real_scenarios_test.cpp, waits for GET /health 200, writes the
# port to F, and stops the server (SIGTERM: drain, exit) when it gets SIGTERM/SIGINT itself.
# The server also runs under `timeout S` (default 300), so it can never outlive a killed test.
# Server log: real-serve.log next to the port file.
set -u
PORT_FILE=""
LIFETIME=300
while [ $# -gt 0 ]; do
  case "$1" in
    --port-file) PORT_FILE=$2; shift 2 ;;
    --lifetime) LIFETIME=$2; shift 2 ;;
    --ttft-ms|--itl-ms|--max-parallel|--reject-above|--max-model-len) shift 2 ;;
    *) echo "real_server_stub.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$PORT_FILE" ] || { echo "real_server_stub.sh: --port-file is required" >&2; exit 2; }
BIN=${TM_BINARY:?TM_BINARY must name the tokenmill binary}
LOG="$(dirname "$PORT_FILE")/real-serve.log"

# Settings: see real_scenarios_test.cpp (32 KV blocks = one 512-token sequence; 429 beyond 4 waiting).
timeout -k 5 "$LIFETIME" "$BIN" serve --port 0 --threads 2 --kv-cache-memory 640KiB --max-queued-requests 4 \
  > "$LOG" 2>&1 &
SERVER=$!
stop() {
  trap - EXIT TERM INT
  kill -TERM "$SERVER" 2>/dev/null  # timeout passes it on; the server drains and exits
  wait "$SERVER" 2>/dev/null
}
trap 'stop; exit 0' TERM INT
trap 'stop' EXIT

# Port from the log line "listening on http://127.0.0.1:PORT", then /health 200 (polled, 60 s at most).
PORT=""
deadline=$((SECONDS + 60))
while [ -z "$PORT" ]; do
  PORT=$(grep -o 'listening on http://[^ :]*:[0-9]*' "$LOG" 2>/dev/null | head -1 | sed 's/.*://')
  [ -n "$PORT" ] && break
  kill -0 "$SERVER" 2>/dev/null || { echo "server exited: $(tail -5 "$LOG")" >&2; exit 1; }
  [ $SECONDS -lt $deadline ] || { echo "server did not start" >&2; exit 1; }
  sleep 0.05
done
health() {
  exec 3<>"/dev/tcp/127.0.0.1/$PORT" || return 1
  printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  local status
  read -r status <&3
  exec 3>&-
  case "$status" in "HTTP/1."?" 200"*) return 0 ;; *) return 1 ;; esac
}
until health 2>/dev/null; do
  kill -0 "$SERVER" 2>/dev/null || { echo "server exited: $(tail -5 "$LOG")" >&2; exit 1; }
  [ $SECONDS -lt $deadline ] || { echo "server not healthy in time" >&2; exit 1; }
  sleep 0.05
done
echo "$PORT" > "$PORT_FILE.tmp" && mv "$PORT_FILE.tmp" "$PORT_FILE"
echo "listening on http://127.0.0.1:$PORT (real tokenmill serve, log $LOG)"
wait "$SERVER"
