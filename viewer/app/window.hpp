// The window backend: a GLFW window with an OpenGL 3.3 core context, Dear
// ImGui's context and its GLFW and OpenGL 3 backends, set up and torn down in
// one place. The UI scale is decided here (a fixed one, else the monitor's
// content scale) because the window size, the fonts and the style all follow
// it; when the window moves to a monitor with another scale, the fonts and
// the style are rebuilt between frames. The panels only draw with ImGui; GLFW
// and GL calls stay here, in the screenshot driver (which reads the frame
// back) and in the bench (which waits for the GPU to time a frame).
#pragma once
#include <optional>
#include <string>

#include "app/style.hpp"

struct GLFWwindow;

namespace pa::viewer {

struct WindowOptions {
  int width = 0, height = 0;   // the size asked for, before the scale
  bool size_given = false;     // --size: exactly that size, whatever the scale
  std::optional<float> scale;  // a fixed UI scale; nullopt: the monitor's content scale, followed
  bool offscreen = false;      // screenshots: hidden, and not fitted to a monitor
  bool vsync = true;           // the bench turns it off: it times frames, not the display
  std::string imgui_ini;       // where ImGui keeps its own state; "" for nowhere
};

// The pixels of the frame just rendered (twice the window's size on a HiDPI
// display where the framebuffer is scaled).
struct FramebufferSize {
  int width = 0, height = 0;
};

class Window {
 public:
  Window() = default;
  ~Window();  // shuts ImGui and GLFW down, as far as open() got
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  // Opens the window and ImGui with its backends, and loads the fonts and the
  // style at the UI scale. False, after saying why on stderr, if there is no
  // display or no OpenGL 3.3 core context.
  bool open(const WindowOptions& options, Fonts& fonts);

  bool close_requested() const;
  void poll_events();
  // Sleeps until input arrives or timeout_s passes: the idle loop.
  void wait_events(double timeout_s);
  void set_size(int width, int height);
  // After a move to a monitor with another content scale: fonts and style at
  // the new scale (between frames: ImGui's font atlas cannot change in one).
  void follow_content_scale(Fonts& fonts);

  // The backends' part of a new frame (input, display size); ImGui::NewFrame
  // follows, after any scripted input.
  void begin_frame();
  // Clears the back buffer and draws ImGui's draw data (after ImGui::Render).
  FramebufferSize render();
  // Shows the frame rendered (swaps the buffers).
  void present();

 private:
  GLFWwindow* window_ = nullptr;
  bool glfw_ready_ = false, imgui_ready_ = false;
  std::string imgui_ini_;     // ImGui keeps a pointer to it until its context is destroyed
  float pending_scale_ = 0;   // set by the content-scale callback; 0: none
};

}  // namespace pa::viewer
