#!/usr/bin/env bash
# Debian's own PCRE2, xxHash and cpp-httplib (with what cpp-httplib's headers and library
# need: OpenSSL, zlib, Brotli) and pkgconf, unpacked into .gpu-deps/ (ignored, never
# committed) for the full `brisk` build on the GPU machine, whose image lacks them:
#   bench/gpu/fetch_deps.sh           (here, on a Debian 12 machine with apt; ~25 MB)
# then pass `.gpu-deps` in the device call's carry list; bench/gpu/cli.sh builds with it.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .gpu-deps && mkdir -p .gpu-deps/debs
(cd .gpu-deps/debs && apt-get download libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 \
  libxxhash-dev libxxhash0 libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libssl3 libbrotli-dev libbrotli1 \
  zlib1g-dev zlib1g pkgconf pkgconf-bin libpkgconf3)
for f in .gpu-deps/debs/*.deb; do dpkg-deb -x "$f" .gpu-deps; done
rm -rf .gpu-deps/debs .gpu-deps/usr/share/doc .gpu-deps/usr/share/man
find .gpu-deps -name '*.a' -delete  # shared libraries only
# zlib1g's libz.so.1 sits in /lib: one folder for all, and no link pointing out of the tree
mv .gpu-deps/lib/x86_64-linux-gnu/* .gpu-deps/usr/lib/x86_64-linux-gnu/ && rm -rf .gpu-deps/lib
ln -sf libz.so.1 .gpu-deps/usr/lib/x86_64-linux-gnu/libz.so
du -sh .gpu-deps
