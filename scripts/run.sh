#!/usr/bin/env bash
# Quick start, command 1: install the dependencies, build (Release, Ninja,
# build/), and open the viewer on lesson 1. Without a display it says so and
# renders lesson 1 headless (Xvfb) to out/lesson1.png instead.
# Extra arguments go to the viewer, e.g.: bash scripts/run.sh --step 3
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bash "$PA_ROOT/scripts/setup.sh"

# Only the viewer and what it needs: the kernels and tests are test.sh's job.
pa_configure_build default pa-viewer

viewer="$PA_ROOT/build/viewer/pa-viewer"
[[ -x "$viewer" ]] || pa_die "the build finished but $viewer is missing (is the viewer module complete? PA_BUILD_VIEWER=ON?)"

if pa_have_display; then
  pa_say "opening the viewer on lesson 1: build/viewer/pa-viewer --lesson 1 $*"
  cd "$PA_ROOT"
  exec "$viewer" --lesson 1 "$@"
fi

shot="$PA_ROOT/out/lesson1.png"
pa_say "no display (\$DISPLAY and \$WAYLAND_DISPLAY are empty), so no window can open."
pa_say "rendering lesson 1 headless under Xvfb (screenshot mode) instead..."
mkdir -p "$PA_ROOT/out"
rm -f "$shot"
cd "$PA_ROOT"
xvfb-run "${PA_XVFB_ARGS[@]}" "$viewer" --lesson 1 "$@" --screenshot "$shot" \
  || pa_die "the viewer failed in screenshot mode (see its messages above)"
[[ -s "$shot" ]] || pa_die "the viewer exited without writing $shot"
pa_say "screenshot of lesson 1: $shot"
pa_say "on a machine with a display the same command opens the interactive viewer."
