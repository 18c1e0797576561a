#!/usr/bin/env bash
# Checks tokenmill.service (ctest deploy_systemd_unit, and tests/deploy/deb.sh on the packaged
# copy): `systemd-analyze verify` must print nothing (an unknown or misspelt directive is only a
# warning there, so any output fails), and the unit must keep the contract of docs/deploy.md:
# Type=notify, the hardening set, a memory limit and an open-file limit for 10,000+ connections.
# Usage: verify_unit.sh (UNIT_FILE | PACKAGE.deb) [TOKENMILL_BINARY]
# Exit 77 (skipped) without systemd-analyze.
set -euo pipefail
in=$1
bin=${2:-}
command -v systemd-analyze >/dev/null || { echo "systemd-analyze not found: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ "$in" == *.deb ]]; then
  dpkg-deb -x "$in" "$tmp/pkg"
  unit=$(find "$tmp/pkg" -name tokenmill.service | head -1)
  bin="$tmp/pkg/usr/bin/tokenmill"
else
  unit=$in
fi
[ -f "$unit" ] || { echo "FAIL: no tokenmill.service"; exit 1; }
fail() { echo "FAIL: $*"; exit 1; }
val() { sed -n "s/^$1=//p" "$unit" | tail -1; }
[ "$(val Type)" = notify ] || fail "Type=$(val Type), want notify (READY=1 after the model loads)"
for kv in DynamicUser=yes ProtectSystem=strict NoNewPrivileges=yes PrivateTmp=yes ProtectHome=read-only \
          RestrictSUIDSGID=yes CapabilityBoundingSet=; do
  grep -qx "$kv" "$unit" || fail "missing $kv"
done
[ -n "$(val MemoryMax)" ] || fail "no MemoryMax"
nofile=$(val LimitNOFILE)
[ "$nofile" -ge 10256 ] 2>/dev/null || fail "LimitNOFILE=$nofile: 10,000 connections need 10,256 or more"
exec_start=$(val ExecStart)
case "$exec_start" in */tokenmill\ serve*) ;; *) fail "ExecStart=$exec_start";; esac
# verify resolves ExecStart's binary: point it at a real tokenmill (the packaged or the built one).
cp "$unit" "$tmp/tokenmill.service"
if [ -n "$bin" ]; then
  sed -i "s|^ExecStart=[^ ]*/tokenmill |ExecStart=$(readlink -f "$bin") |" "$tmp/tokenmill.service"
fi
out=$(cd "$tmp" && systemd-analyze verify --man=no ./tokenmill.service 2>&1) || true
if [ -n "$out" ]; then
  echo "$out"
  fail "systemd-analyze verify reported the above"
fi
echo "tokenmill.service: systemd-analyze verify clean; Type=notify, hardening, MemoryMax=$(val MemoryMax), LimitNOFILE=$nofile"
