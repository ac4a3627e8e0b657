#!/usr/bin/env bash
# Quick start, command 1: install the dependencies, build (Release, Ninja,
# build/), and open the viewer on lesson 1. Without a display it says so and
# renders lesson 1 headless (Xvfb) to out/lesson1.png instead.
# New to the lab? Start with lesson 0, the paged KV cache:
#   bash scripts/run.sh --lesson 0        (headless: out/lesson0.png)
# Extra arguments go to the viewer, e.g.: bash scripts/run.sh --lesson 2 --step 3
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# The lesson to open: 1 unless the arguments name one (--lesson N). The other
# arguments go to the viewer unchanged.
lesson=1
lesson_given=0
viewer_args=()
while (($#)); do
  case "$1" in
    --lesson)
      (($# >= 2)) || pa_die "--lesson needs a number (0-9), e.g. bash scripts/run.sh --lesson 0"
      lesson="$2"
      lesson_given=1
      shift 2
      ;;
    --lesson=*)
      lesson="${1#--lesson=}"
      lesson_given=1
      shift
      ;;
    *)
      viewer_args+=("$1")
      shift
      ;;
  esac
done
[[ "$lesson" =~ ^[0-9]$ ]] || pa_die "--lesson '$lesson': the lessons are numbered 0-9 (lessons/README.md)"

bash "$PA_ROOT/scripts/setup.sh"

# Only the viewer and what it needs: the kernels and tests are test.sh's job.
pa_configure_build default pa-viewer

viewer="$PA_ROOT/build/viewer/pa-viewer"
[[ -x "$viewer" ]] || pa_die "the build finished but $viewer is missing (is the viewer module complete? PA_BUILD_VIEWER=ON?)"

if pa_have_display; then
  pa_say "opening the viewer on lesson $lesson: build/viewer/pa-viewer --lesson $lesson ${viewer_args[*]}"
  ((lesson_given)) || pa_say "new to the lab? lesson 0 (the paged KV cache) comes first: bash scripts/run.sh --lesson 0"
  cd "$PA_ROOT"
  exec "$viewer" --lesson "$lesson" "${viewer_args[@]}"
fi

shot="$PA_ROOT/out/lesson$lesson.png"
pa_say "no display (\$DISPLAY and \$WAYLAND_DISPLAY are empty), so no window can open."
pa_say "rendering lesson $lesson headless under Xvfb (screenshot mode) instead..."
mkdir -p "$PA_ROOT/out"
rm -f "$shot"
cd "$PA_ROOT"
xvfb-run "${PA_XVFB_ARGS[@]}" "$viewer" --lesson "$lesson" "${viewer_args[@]}" --screenshot "$shot" \
  || pa_die "the viewer failed in screenshot mode (see its messages above)"
[[ -s "$shot" ]] || pa_die "the viewer exited without writing $shot"
pa_say "screenshot of lesson $lesson: $shot"
((lesson_given)) || pa_say "new to the lab? lesson 0 (the paged KV cache) comes first: bash scripts/run.sh --lesson 0"
pa_say "on a machine with a display the same command opens the interactive viewer."
