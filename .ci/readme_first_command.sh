#!/usr/bin/env bash
# Runs README.md's first command exactly as printed (set up, build, serve the default model) on this
# clone, waits until the server answers, asks it for a completion, and stops it. CI runs this before
# README's second command (./scripts/test.sh), so the newcomer path is checked in the order printed.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=$(awk '/^```sh$/{f=1; next} /^```$/{if (f) exit} f' README.md)
[ -n "$cmd" ] || { echo "readme: no first command found in README.md" >&2; exit 1; }
echo "readme: running the first command: $cmd"
start=$(date +%s)
log=$(mktemp)
setsid bash -c "$cmd" >"$log" 2>&1 &
pid=$!
cleanup() { kill -TERM -- "-$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 1 3600); do
  if curl -sf http://127.0.0.1:8000/health >/dev/null 2>&1; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "readme: the first command exited before serving:" >&2
    tail -50 "$log" >&2
    exit 1
  fi
  sleep 1
done
curl -sf http://127.0.0.1:8000/health >/dev/null || { echo "readme: no server after an hour" >&2; tail -50 "$log" >&2; exit 1; }
echo "readme: serving after $(( $(date +%s) - start )) s"
out=$(curl -sf http://127.0.0.1:8000/v1/completions -H 'Content-Type: application/json' \
  -d '{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0}')
echo "readme: completion: $out"
echo "$out" | grep -q '"text"' || { echo "readme: no completion text" >&2; exit 1; }
