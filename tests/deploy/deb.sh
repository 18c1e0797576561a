#!/usr/bin/env bash
# The Debian package end to end (docs/deploy.md, "Debian package"): configures a Release build
# folder, builds tokenmill, runs `cpack -G DEB` there, checks the unit with systemd-analyze, then
# installs the .deb with apt into a fresh Debian bookworm root made by debootstrap, starts
# `tokenmill serve` in it (chroot, as an unprivileged user, with the packaged config file and the
# packaged default model) and gets a completion; SIGTERM and exit 0. Needs root, debootstrap and a
# reachable Debian mirror. Not a ctest (minutes); the cheap parts are the ctests deploy_package
# and deploy_systemd_unit.
#
#   sudo tests/deploy/deb.sh [BUILD_DIR]     # default build-deb/; ccache used when installed
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build-deb}
root_cache=${BASE_ROOT:-/var/tmp/tokenmill-bookworm-root}
port=${PORT:-18001}
log() { echo "deb.sh: $*"; }

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build "$build" --target tokenmill -j "${JOBS:-2}"
rm -f "$build"/tokenmill_*.deb
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(ls "$build"/tokenmill_*.deb)
log "package $deb ($(stat -c %s "$deb") bytes)"
dpkg-deb -f "$deb" Package Version Architecture Depends
"$src/tests/deploy/verify_unit.sh" "$deb"

# A fresh bookworm root: debootstrap once into a cache, copied for each run.
if [ ! -x "$root_cache/bin/sh" ]; then
  log "debootstrap bookworm (minbase) into $root_cache"
  debootstrap --variant=minbase bookworm "$root_cache" http://deb.debian.org/debian >/dev/null
fi
root=$(mktemp -d /var/tmp/tokenmill-deb-root.XXXXXX)
cleanup() {
  for m in dev/pts dev proc sys; do umount -l "$root/$m" 2>/dev/null || true; done
  rm -rf "$root"
}
trap cleanup EXIT
cp -a "$root_cache/." "$root/"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t sysfs sys "$root/sys"
cp "$deb" "$root/tmp/tokenmill.deb"
log "apt-get install ./tokenmill.deb in the fresh root"
chroot "$root" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/tokenmill.deb >/dev/null'
chroot "$root" dpkg -L tokenmill | grep -E 'bin/tokenmill$|stories260K.gguf$|tokenmill.service$|man1/tokenmill.1.gz$|/etc/tokenmill/config.yaml$'
chroot "$root" tokenmill --version

# The packaged config (127.0.0.1:8000) with the port moved by the environment, as an unprivileged
# user; the model is the packaged default, found next to the installed binary.
chroot --userspec=nobody:nogroup "$root" env TOKENMILL_PORT="$port" TOKENMILL_THREADS=2 \
  tokenmill serve --config /etc/tokenmill/config.yaml > "$root/tmp/serve.log" 2>&1 &
pid=$!
ok=""
for _ in $(seq 1 120); do
  if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then ok=1; break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.5
done
[ -n "$ok" ] || { cat "$root/tmp/serve.log"; log "FAIL: /health never answered 200"; exit 1; }
grep -q '/usr/share/tokenmill/models/stories260K/stories260K.gguf' "$root/tmp/serve.log" \
  || { cat "$root/tmp/serve.log"; log "FAIL: the packaged default model was not the one served"; exit 1; }
body=$(curl -fsS "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0}')
echo "$body" | grep -q '"text_completion"' || { log "FAIL: completion: $body"; exit 1; }
log "completion: $(echo "$body" | sed -n 's/.*"text":"\([^"]*\)".*/\1/p')"
kill -TERM "$pid"
wait "$pid" && status=0 || status=$?
tail -3 "$root/tmp/serve.log"
[ "$status" = 0 ] || { log "FAIL: exit status $status after SIGTERM"; exit 1; }
log "PASS"
