#!/usr/bin/env bash
# Installs every dependency of the lab from Debian packages.
# Idempotent: when everything is already installed it touches nothing and
# returns in well under a second (no apt-get update), so run.sh and test.sh
# can call it every time. Installing needs root (or sudo).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# Compiler and build tools, Dear ImGui (its Debian static library carries the
# GLFW and OpenGL3 backends), GLFW, stb (PNG writer for screenshots), OpenGL,
# a TTF font, and Xvfb + Mesa for headless viewer runs. python3 runs the small
# README results generator. clang builds the sanitize preset (ASan + UBSan).
PACKAGES=(
  build-essential clang cmake ninja-build pkg-config git
  libimgui-dev libglfw3-dev libstb-dev libgl-dev libgl1-mesa-dri
  xvfb xauth fonts-dejavu-core python3
)
# Catch2 v3 (SKIP support for GPU tests on machines without a GPU). Debian
# bookworm ships v2 in main and v3 in bookworm-backports.
CATCH2_MIN=3

installed() {  # installed PKG -> true when dpkg has it fully installed
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]
}
catch2_ok() {
  installed libcatch2-dev || return 1
  local v
  v="$(dpkg-query -W -f='${Version}' libcatch2-dev)"
  dpkg --compare-versions "$v" ge "$CATCH2_MIN"
}

command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
  || pa_die "this script installs Debian packages (apt-get, dpkg) and this system has none.
  Install by hand: a C++20 compiler, CMake >= 3.25, Ninja, Dear ImGui with its GLFW and
  OpenGL3 backends, GLFW 3, stb, Catch2 v3, a TTF font, and Xvfb + Mesa for headless runs."

missing=()
for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
need_catch2=0
catch2_ok || need_catch2=1

if [[ ${#missing[@]} -eq 0 && $need_catch2 -eq 0 ]]; then
  pa_say "setup: all dependencies already installed"
else
  want="${missing[*]}"
  [[ $need_catch2 -eq 1 ]] && want="$want catch2(v3)"
  if [[ $(id -u) -ne 0 ]]; then
    # Re-run as root through sudo when it can work (no password needed, or a
    # terminal to ask one on); otherwise say exactly what to do.
    if command -v sudo >/dev/null 2>&1 && { sudo -n true 2>/dev/null || [[ -t 0 ]]; }; then
      pa_say "setup: installing needs root (missing:$want); re-running with sudo"
      exec sudo --preserve-env=PA_CUDA_ARCHS,PA_CMAKE_ARGS,PA_JOBS,CI bash "${BASH_SOURCE[0]}" "$@"
    fi
    pa_die "missing packages:$want
  Installing them needs root. Run as root or with sudo:
      sudo bash scripts/setup.sh
  then run this command again."
  fi

  export DEBIAN_FRONTEND=noninteractive
  . /etc/os-release 2>/dev/null || true
  codename="${VERSION_CODENAME:-}"

  if [[ $need_catch2 -eq 1 && "$codename" == bookworm ]]; then
    # Add the backports suite once; an existing entry (any file) is reused
    # so apt never sees the suite twice.
    if ! grep -rqsE '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      pa_say "setup: adding bookworm-backports (for Catch2 v3)"
      cat > /etc/apt/sources.list.d/bookworm-backports.sources <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    fi
  fi

  pa_say "setup: apt-get update"
  apt-get update
  if [[ ${#missing[@]} -gt 0 ]]; then
    pa_say "setup: apt-get install ${missing[*]}"
    apt-get install -y --no-install-recommends "${missing[@]}"
  fi
  if [[ $need_catch2 -eq 1 ]]; then
    if [[ "$codename" == bookworm ]]; then
      # A separate command so that -t only pulls Catch2 from backports.
      pa_say "setup: apt-get install -t bookworm-backports catch2"
      apt-get install -y --no-install-recommends -t bookworm-backports catch2 libcatch2-dev
    else
      pa_say "setup: apt-get install catch2"
      apt-get install -y --no-install-recommends catch2 libcatch2-dev
    fi
    catch2_ok || pa_die "Catch2 v3 is needed, but libcatch2-dev $(dpkg-query -W -f='${Version}' libcatch2-dev 2>/dev/null || echo '(none)') got installed.
  On Debian bookworm it comes from bookworm-backports; on other releases install Catch2 >= 3 by hand."
  fi
  pa_say "setup: done"
fi

# CUDA is optional: say what that means when it is missing.
if [[ -z "$(pa_find_nvcc)" ]]; then
  pa_warn "no CUDA compiler (nvcc not on PATH, no /usr/local/cuda/bin/nvcc).
  The CUDA kernels will NOT be built. The CPU reference, the trace model, the viewer
  and the tests still build and run; GPU tests report SKIPPED.
  To build the kernels, install the CUDA toolkit (nvcc >= 12) and run again."
else
  pa_say "setup: nvcc: $(pa_find_nvcc)"
fi
