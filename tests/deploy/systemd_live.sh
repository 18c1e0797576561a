#!/usr/bin/env bash
# The packaged systemd unit under a real systemd (PID 1 of a Podman container booted with
# --systemd=always from a Debian bookworm root): apt installs the .deb, `systemctl start tokenmill`
# must return only once the model serves (Type=notify, READY=1 from tokenmill), with every
# hardening directive of the unit in force (DynamicUser: a non-root uid); a completion; then
# `systemctl stop` drains (STOPPING=1) and the service ends with Result=success, status 0.
# Needs root, podman, runc and a Debian mirror. Not a ctest.
#   sudo tests/deploy/systemd_live.sh build-deb/tokenmill_0.1.0_amd64.deb
set -euo pipefail
deb=$(readlink -f "$1")
port=${PORT:-18002}
base=localhost/tokenmill-base:bookworm
image=localhost/tokenmill-systemd-base:bookworm
base_root=${BASE_ROOT:-/var/tmp/tokenmill-bookworm-root}
pod="podman --runtime runc"
log() { echo "systemd_live.sh: $*"; }
fail() { log "FAIL: $*"; $pod exec "$name" journalctl -u tokenmill --no-pager 2>/dev/null | tail -30 || true; exit 1; }

if [ ! -f /etc/containers/containers.conf ]; then
  mkdir -p /etc/containers
  printf '[containers]\ndefault_ulimits = []\n' > /etc/containers/containers.conf
fi
if ! podman image exists "$image"; then
  if ! podman image exists "$base"; then
    [ -x "$base_root/bin/sh" ] || debootstrap --variant=minbase bookworm "$base_root" http://deb.debian.org/debian >/dev/null
    tar -C "$base_root" -c . | podman import - "$base" >/dev/null
  fi
  printf 'FROM %s\nRUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd systemd-sysv curl ca-certificates >/dev/null && rm -rf /var/lib/apt/lists/*\nCMD ["/sbin/init"]\n' "$base" \
    | $pod build --network host -t "$image" -f - . >/dev/null
fi
name=tokenmill-systemd-$$
trap '$pod rm -f "$name" >/dev/null 2>&1 || true' EXIT
# --privileged: the unit's sandbox (ProtectSystem, PrivateTmp, ...) needs mount namespaces, which
# systemd gets on a real host but not in an unprivileged container (status 226/NAMESPACE).
$pod run -d --privileged --systemd=always --network host --name "$name" "$image" >/dev/null
for _ in $(seq 1 60); do
  state=$($pod exec "$name" systemctl is-system-running 2>/dev/null || true)
  case "$state" in running|degraded) break;; esac
  sleep 0.5
done
log "systemd in the container: $state"
$pod cp "$deb" "$name:/tmp/tokenmill.deb"
$pod exec "$name" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/tokenmill.deb >/dev/null'
$pod exec "$name" sh -c "echo TOKENMILL_PORT=$port >> /etc/default/tokenmill && echo TOKENMILL_THREADS=2 >> /etc/default/tokenmill"
$pod exec "$name" systemctl daemon-reload
t0=$(date +%s.%N)
$pod exec "$name" systemctl start tokenmill || fail "systemctl start"
t1=$(date +%s.%N)
log "systemctl start returned after $(echo "$t1 - $t0" | bc) s"
# Type=notify: start returned after READY=1, so the server answers at once, without retries.
code=$($pod exec "$name" curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")
[ "$code" = 200 ] || fail "/health answered $code right after systemctl start"
show=$($pod exec "$name" systemctl show tokenmill -p ActiveState -p SubState -p StatusText -p MainPID -p Type)
echo "$show"
grep -q '^ActiveState=active' <<<"$show" || fail "not active"
grep -q '^StatusText=serving on 127.0.0.1:' <<<"$show" || fail "no STATUS= from tokenmill's READY notification"
pid=$(sed -n 's/^MainPID=//p' <<<"$show")
uid=$($pod exec "$name" awk '/^Uid:/ {print $2}' "/proc/$pid/status")
[ "$uid" != 0 ] || fail "running as root"
log "MainPID $pid runs as uid $uid (DynamicUser)"
body=$($pod exec "$name" curl -fsS "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}')
grep -q '"text_completion"' <<<"$body" || fail "completion: $body"
log "completion ok"
$pod exec "$name" systemctl stop tokenmill
show=$($pod exec "$name" systemctl show tokenmill -p ActiveState -p Result -p ExecMainStatus)
echo "$show"
grep -q '^Result=success' <<<"$show" || fail "stop: not Result=success"
grep -q '^ExecMainStatus=0' <<<"$show" || fail "stop: exit status not 0"
$pod exec "$name" journalctl -u tokenmill --no-pager | grep -q 'draining' || fail "no drain in the journal"
log "PASS"
