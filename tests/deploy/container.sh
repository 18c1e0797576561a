#!/usr/bin/env bash
# The container image end to end, offline (docs/deploy.md, "Container image"): builds the
# Containerfile with Podman on a Debian bookworm root made by debootstrap and imported as the base
# (no registry is reachable), runs it, checks /health and a completion, then SIGTERM and a clean
# exit (status 0, the drain logged). Needs root, podman, runc, debootstrap and a reachable Debian
# mirror (apt inside the build). Not a ctest: it compiles tokenmill from scratch (minutes; give
# CCACHE_HOST=/work/.ccache to reuse a ccache directory).
#
#   sudo tests/deploy/container.sh            # [--keep] keeps the image
#
# Podman here: `apt-get install podman runc`, and /etc/containers/containers.conf with
# [containers] default_ulimits = [] (the script writes it when absent); runs use --runtime runc
# and --network host.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
keep=${1:-}
base_root=${BASE_ROOT:-/var/tmp/tokenmill-bookworm-root}
image=localhost/tokenmill:test
base=localhost/tokenmill-base:bookworm
port=${PORT:-18000}
pod="podman --runtime runc"
log() { echo "container.sh: $*"; }

if [ ! -f /etc/containers/containers.conf ]; then
  mkdir -p /etc/containers
  printf '[containers]\ndefault_ulimits = []\n' > /etc/containers/containers.conf
fi
if ! podman image exists "$base"; then
  if [ ! -x "$base_root/bin/sh" ]; then
    log "debootstrap bookworm (minbase) into $base_root"
    debootstrap --variant=minbase bookworm "$base_root" http://deb.debian.org/debian >/dev/null
  fi
  log "importing $base_root as $base"
  tar -C "$base_root" -c . | podman import - "$base" >/dev/null
fi

ccache_args=()
if [ -n "${CCACHE_HOST:-}" ]; then ccache_args=(-v "$CCACHE_HOST:/ccache:rw" --build-arg CCACHE_DIR=/ccache); fi
start=$(date +%s)
log "building $image (base $base)"
$pod build --format docker --network host --build-arg BASE="$base" "${ccache_args[@]}" \
  -t "$image" -f "$src/Containerfile" "$src"
log "built in $(( $(date +%s) - start )) s; image size $(podman image inspect "$image" --format '{{.Size}}') bytes"

# The image's declarations: non-root user, health check, volume.
user=$(podman image inspect "$image" --format '{{.Config.User}}')
[ "$user" = "10001:10001" ] || { log "FAIL: image user is '$user'"; exit 1; }
podman image inspect "$image" --format '{{json .Config.Healthcheck}}' | grep -q '/health' || { log "FAIL: no HEALTHCHECK"; exit 1; }
podman image inspect "$image" --format '{{json .Config.Volumes}}' | grep -q '/models' || { log "FAIL: no /models volume"; exit 1; }

name=tokenmill-test-$$
cleanup() { $pod rm -f "$name" >/dev/null 2>&1 || true; if [ "$keep" != "--keep" ]; then podman rmi -f "$image" >/dev/null 2>&1 || true; fi; }
trap cleanup EXIT
# Flags by environment: the port, the served name, the thread count, and a 20 ms pause per engine
# step (a testing aid) so the stream below is still running when SIGTERM comes.
$pod run -d --name "$name" --network host \
  -e TOKENMILL_PORT="$port" -e TOKENMILL_SERVED_MODEL_NAME=demo -e TOKENMILL_THREADS=2 \
  -e TOKENMILL_DEBUG_STEP_DELAY_MS=20 \
  "$image" >/dev/null
ok=""
for _ in $(seq 1 120); do
  if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then ok=1; break; fi
  sleep 0.5
done
[ -n "$ok" ] || { podman logs "$name"; log "FAIL: /health never answered 200"; exit 1; }
log "/health 200"
podman healthcheck run "$name" && log "HEALTHCHECK passes" || { log "FAIL: HEALTHCHECK"; exit 1; }
[ "$(podman exec "$name" id -u)" = 10001 ] || { log "FAIL: not running as uid 10001"; exit 1; }
body=$(curl -fsS "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "demo", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0}')
echo "$body" | grep -q '"text_completion"' || { log "FAIL: completion: $body"; exit 1; }
log "completion: $(echo "$body" | sed -n 's/.*"text":"\([^"]*\)".*/\1/p')"
# A stream in flight when SIGTERM arrives still ends with [DONE] (drain), then exit 0.
curl -sN "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "demo", "prompt": "Once", "max_tokens": 200, "stream": true, "ignore_eos": true}' > /tmp/tm-stream.$$ &
curl_pid=$!
sleep 0.3
podman kill --signal TERM "$name" >/dev/null
status=$(podman wait "$name")
wait "$curl_pid" || true
logs=$(podman logs "$name" 2>&1)
echo "$logs" | tail -5
[ "$status" = 0 ] || { log "FAIL: exit status $status after SIGTERM"; exit 1; }
echo "$logs" | grep -q 'draining' || { log "FAIL: no drain logged"; exit 1; }
grep -q 'data: \[DONE\]' /tmp/tm-stream.$$ || { log "FAIL: the stream in flight did not finish"; rm -f /tmp/tm-stream.$$; exit 1; }
rm -f /tmp/tm-stream.$$
log "SIGTERM: drained, exit 0"
log "PASS"
