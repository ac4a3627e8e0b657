// Screenshot mode (--screenshot): the viewer drives itself instead of a
// person. Frame by frame it plays the input a test asks for (--keys,
// --mouse/--click, --exercise-resize), lets the layout settle for a fixed
// number of frames, then reads the frame back into a PNG and writes the state
// the tests check (--dump-layout). Everything it does follows from the
// command line, so one command line always gives the same picture.
#pragma once
#include "app/state.hpp"
#include "app/window.hpp"
#include "core/args.hpp"

namespace pa::viewer {

class ScreenshotDriver {
 public:
  explicit ScreenshotDriver(const Args& args);

  // --exercise-resize: tiny window sizes on the first frames, then back to
  // --size (resizing must never crash the layout). Before the frame starts.
  void resize(Window& window) const;
  // This frame's scripted pointer and keys, into ImGui's input: after the
  // backends' frame (which reads the real, absent ones) and before
  // ImGui::NewFrame (which consumes them).
  void inject_input() const;
  // Whether the viewer's key handling runs: only when keys are scripted, so
  // that otherwise the picture follows from the command line alone.
  bool keys_scripted() const { return !args_.keys.empty(); }
  // Counts a rendered frame; true once the picture is to be taken.
  bool frame_drawn();
  // Writes the PNG of the frame just rendered (before it is presented), the
  // layout dump if asked, and the load and lesson messages on stderr. The
  // exit code: 1 if the PNG could not be written (load errors never change
  // it: the tests read them from the dump).
  int finish(const AppState& s, FramebufferSize fb) const;

 private:
  Args args_;
  int frames_to_draw_;
  int frames_drawn_ = 0;
};

}  // namespace pa::viewer
