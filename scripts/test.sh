#!/usr/bin/env bash
# Quick start, command 2: install the dependencies, build everything
# (Release, Ninja, build/), and run every test with ctest. Without a display
# the whole ctest runs under a virtual X server (xvfb-run) so that the viewer
# tests can open their window. GPU tests report SKIPPED where no GPU is present.
# Extra arguments go to ctest, e.g.: bash scripts/test.sh -R reference
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bash "$PA_ROOT/scripts/setup.sh"
pa_configure_build default

ctest_args=(--test-dir "$PA_ROOT/build" --output-on-failure --no-tests=error -j "$(nproc)" "$@")
if pa_have_display; then
  pa_say "test: ctest ${ctest_args[*]}"
  ctest "${ctest_args[@]}"
else
  pa_say "test: no display: running ctest under xvfb-run"
  pa_say "test: ctest ${ctest_args[*]}"
  xvfb-run "${PA_XVFB_ARGS[@]}" ctest "${ctest_args[@]}"
fi
