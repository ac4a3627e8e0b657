# Shared helpers for the lab's scripts. Sourced, not run.
#
# Environment knobs honoured by run.sh, test.sh and .ci/run:
#   PA_CUDA_ARCHS   CUDA architectures, e.g. "90" or "80;90" (default: CMake's
#                   choice: the GPU present, else 80;86;89;90 - slow on 2 cores)
#   PA_CMAKE_ARGS   extra arguments for the configure step (space separated)
#   PA_JOBS         parallel build jobs (default: ninja's own choice)

PA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

pa_say()  { printf '\033[1m[pa]\033[0m %s\n' "$*"; }
pa_warn() { printf '\033[1;33m[pa] note:\033[0m %s\n' "$*" >&2; }
pa_die()  { printf '\033[1;31m[pa] error:\033[0m %s\n' "$*" >&2; exit 1; }

# Prints the path of nvcc, or nothing. sudo and login shells often drop
# /usr/local/cuda/bin from PATH, so look there too.
pa_find_nvcc() {
  if [[ -n "${CUDACXX:-}" && -x "${CUDACXX}" ]]; then echo "$CUDACXX"; return; fi
  if command -v nvcc >/dev/null 2>&1; then command -v nvcc; return; fi
  if [[ -x /usr/local/cuda/bin/nvcc ]]; then echo /usr/local/cuda/bin/nvcc; fi
}

# Fills the array PA_CONFIGURE_ARGS with the extra -D flags for `cmake --preset`.
pa_configure_args() {
  PA_CONFIGURE_ARGS=()
  local nvcc
  nvcc="$(pa_find_nvcc)"
  if [[ -n "$nvcc" ]] && ! command -v nvcc >/dev/null 2>&1; then
    PA_CONFIGURE_ARGS+=("-DCMAKE_CUDA_COMPILER=$nvcc")
  fi
  if [[ -n "${PA_CUDA_ARCHS:-}" ]]; then
    PA_CONFIGURE_ARGS+=("-DCMAKE_CUDA_ARCHITECTURES=${PA_CUDA_ARCHS}")
  fi
  if [[ -n "${PA_CMAKE_ARGS:-}" ]]; then
    # Word splitting is the point here: a list of flags.
    # shellcheck disable=SC2206
    PA_CONFIGURE_ARGS+=(${PA_CMAKE_ARGS})
  fi
}

# pa_configure_build PRESET [TARGET...]: configure with a preset, then build
# the targets (all when none given).
pa_configure_build() {
  local preset="$1"; shift
  pa_configure_args
  pa_say "configure: cmake --preset $preset ${PA_CONFIGURE_ARGS[*]}"
  (cd "$PA_ROOT" && cmake --preset "$preset" "${PA_CONFIGURE_ARGS[@]}") \
    || pa_die "configure failed (preset $preset); see the CMake messages above"
  local build_args=(--build --preset "$preset")
  if [[ -n "${PA_JOBS:-}" ]]; then build_args+=(-j "$PA_JOBS"); fi
  local t
  for t in "$@"; do build_args+=(--target "$t"); done
  pa_say "build: cmake ${build_args[*]}"
  (cd "$PA_ROOT" && cmake "${build_args[@]}") \
    || pa_die "build failed (preset $preset); the first compiler error above names the file"
}

# True when a window can be opened (X11 or Wayland).
pa_have_display() {
  [[ -n "${DISPLAY:-}" || -n "${WAYLAND_DISPLAY:-}" ]]
}

# The virtual screen used for headless runs: large enough for the viewer's layout.
PA_XVFB_ARGS=(-a -s "-screen 0 1600x1000x24")
