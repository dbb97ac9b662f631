#!/usr/bin/env bash
# Installs the Debian packages brisk builds and tests with, when any is missing.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config libgtest-dev libgmock-dev libbenchmark-dev
      nlohmann-json3-dev libcli11-dev libfmt-dev libpcre2-dev libxxhash-dev libcpp-httplib-dev
      clang libclang-rt-14-dev gnuplot-nox jq)  # gnuplot, jq: bench/kv-frontier.sh
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
# Node.js (the server's end-to-end tests use the openai npm client): any install will do,
# e.g. a NodeSource nodejs that bundles npm and conflicts with Debian's npm package.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
