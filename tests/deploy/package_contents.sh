#!/usr/bin/env bash
# `cpack -G DEB` from a build folder, and what the package holds (ctest deploy_package): the binary,
# the default model where the binary finds it, docs, the man page made from --help (every serve
# flag in it), the systemd unit, /etc/tokenmill/config.yaml and /etc/default/tokenmill as conffiles,
# Depends computed from the binary; then the extracted binary runs the packaged model.
# Usage: package_contents.sh BUILD_DIR. Exit 77 (skipped) without cpack, dpkg-deb or dpkg-shlibdeps.
set -euo pipefail
build=$(cd "$1" && pwd)
for t in cpack dpkg-deb dpkg-shlibdeps; do
  command -v "$t" >/dev/null || { echo "$t not found: skipped"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
(cd "$build" && cpack -G DEB --config CPackConfig.cmake -B "$tmp/out" >"$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; fail "cpack"; }
deb=$(ls "$tmp"/out/tokenmill_*.deb) || fail "no .deb"
dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's|^\./|/|' > "$tmp/files"
for f in /usr/bin/tokenmill /usr/share/tokenmill/models/stories260K/stories260K.gguf \
         /usr/share/doc/tokenmill/README.md /usr/share/doc/tokenmill/server.md /usr/share/doc/tokenmill/deploy.md \
         /usr/share/man/man1/tokenmill.1.gz /usr/lib/systemd/system/tokenmill.service \
         /etc/tokenmill/config.yaml /etc/default/tokenmill; do
  grep -qx "$f" "$tmp/files" || { cat "$tmp/files"; fail "$f is not in the package"; }
done
dpkg-deb -e "$deb" "$tmp/control"
grep -qx /etc/tokenmill/config.yaml "$tmp/control/conffiles" || fail "config.yaml is not a conffile"
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libc6 libstdc++6 libssl3 libyaml-cpp; do
  [[ "$depends" == *"$lib"* ]] || fail "Depends lacks $lib: $depends"
done
dpkg-deb -x "$deb" "$tmp/root"
zcat "$tmp/root/usr/share/man/man1/tokenmill.1.gz" > "$tmp/man"
for s in '.TH TOKENMILL 1' '.SS "tokenmill serve"' '--max-model-len' 'TOKENMILL_MAX_MODEL_LEN' '.SS "tokenmill bench engine"'; do
  grep -qF -- "$s" "$tmp/man" || fail "man page lacks '$s'"
done
if command -v man >/dev/null; then man -l "$tmp/root/usr/share/man/man1/tokenmill.1.gz" >/dev/null 2>&1 || fail "man cannot render the page"; fi
# The packaged binary serves the packaged model (found relative to the binary: ../share/tokenmill/).
"$tmp/root/usr/bin/tokenmill" --version
out=$(cd / && env -u TOKENMILL_DEFAULT_MODEL "$tmp/root/usr/bin/tokenmill" generate --prompt 'Once upon a time' \
      --max-tokens 8 --temperature 0 --json 2>"$tmp/gen.err") || { cat "$tmp/gen.err"; fail "generate"; }
grep -q "$tmp/root/usr/share/tokenmill/models/stories260K/stories260K.gguf" "$tmp/gen.err" \
  || { cat "$tmp/gen.err"; fail "the packaged model is not the one loaded"; }
echo "$out" | grep -q '"tokens"' || fail "generate printed $out"
echo "package: $(basename "$deb"), $(wc -l < "$tmp/files") entries, Depends: $depends"
