#!/usr/bin/env bash
# Prepares .deps/catch2 (git-ignored): Catch2 v3 unpacked from the Debian
# bookworm-backports package, for the GPU machine, which has nvcc, CMake and
# Ninja but no Debian packages. Run it here (a Debian machine); the device
# tool carries .deps along and the `device` preset points CMake at
# .deps/catch2/usr (CMAKE_PREFIX_PATH). Idempotent; --force re-downloads.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

dest="$PA_ROOT/.deps/catch2"
if [[ "${1:-}" != --force && -f "$dest/usr/lib/cmake/Catch2/Catch2Config.cmake" ]]; then
  pa_say "device-deps: $dest already holds Catch2 (--force to refresh)"
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || pa_die "needs apt-get (a Debian machine) to download libcatch2-dev"
# The package index must know bookworm-backports: scripts/setup.sh adds it.
apt-cache policy libcatch2-dev 2>/dev/null | grep -q bookworm-backports \
  || pa_die "apt does not know libcatch2-dev from bookworm-backports; run: sudo bash scripts/setup.sh"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"  # apt downloads as user _apt
( cd "$tmp" && apt-get download libcatch2-dev/bookworm-backports ) \
  || pa_die "apt-get download libcatch2-dev/bookworm-backports failed"
deb=("$tmp"/libcatch2-dev_*.deb)
[[ -f "${deb[0]}" ]] || pa_die "no libcatch2-dev .deb was downloaded"
rm -rf "$dest"
mkdir -p "$dest"
dpkg -x "${deb[0]}" "$dest"
[[ -f "$dest/usr/lib/cmake/Catch2/Catch2Config.cmake" ]] \
  || pa_die "unpacked $(basename "${deb[0]}") but $dest/usr/lib/cmake/Catch2/Catch2Config.cmake is missing"
pa_say "device-deps: Catch2 $(dpkg-deb -f "${deb[0]}" Version) unpacked into $dest"
