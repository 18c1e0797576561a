#!/usr/bin/env bash
# Installs the Debian (bookworm) packages tokenmill's build, tests and tools need. Safe to run twice.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PKGS=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl
  libfmt-dev nlohmann-json3-dev libcli11-dev libpcre2-dev libxxhash-dev libcpp-httplib-dev libssl-dev
  libyaml-cpp-dev                   # serve --models-file
  libicu-dev                        # Unicode NFC for Hugging Face tokenizer normalizers
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev          # libFuzzer targets and sanitizer runs
  nodejs npm                        # end-to-end tests with the official openai client
  prometheus                        # promtool check metrics, promtool check/test rules (deploy/)
  yamllint python3-yaml file        # deploy/ manifests check; cpack -G DEB (file, dpkg-shlibdeps)
  chromium                          # renders the load-test HTML report in tests
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js may come from elsewhere (e.g. a preinstalled node 20): only install Debian's when absent.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  filtered=()
  for p in "${missing[@]}"; do [[ "$p" == nodejs || "$p" == npm ]] || filtered+=("$p"); done
  missing=("${filtered[@]}")
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
