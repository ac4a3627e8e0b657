// The GLFW window and ImGui's backends (window.hpp says what belongs here).
#include "app/window.hpp"

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <algorithm>
#include <cstdio>

namespace pa::viewer {
namespace {

// A monitor's or a window's content scale as the UI scale: the larger axis,
// kept within the scales the layout is drawn for.
float ui_scale(float xs, float ys) { return std::clamp(std::max(xs, ys), 1.0f, 4.0f); }

}  // namespace

bool Window::open(const WindowOptions& o, Fonts& fonts) {
  glfwSetErrorCallback([](int code, const char* msg) { std::fprintf(stderr, "pa-viewer: GLFW error %d: %s\n", code, msg); });
  if (!glfwInit()) {
    std::fprintf(stderr, "pa-viewer: cannot initialise GLFW (no display? run under xvfb-run for --screenshot)\n");
    return false;
  }
  glfw_ready_ = true;
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  if (o.offscreen) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
  // HiDPI: a fixed scale wins; else the monitor's content scale. Without
  // --size the window grows with the scale, within the monitor's work area.
  float scale = o.scale.value_or(1.0f);
  GLFWmonitor* mon = glfwGetPrimaryMonitor();
  if (!o.scale && mon) {
    float xs = 1.0f, ys = 1.0f;
    glfwGetMonitorContentScale(mon, &xs, &ys);
    scale = ui_scale(xs, ys);
  }
  int win_w = o.width, win_h = o.height;
  if (!o.size_given && scale != 1.0f) {
    win_w = static_cast<int>(win_w * scale);
    win_h = static_cast<int>(win_h * scale);
    int mx = 0, my = 0, mw = 0, mh = 0;
    if (mon && !o.offscreen) glfwGetMonitorWorkarea(mon, &mx, &my, &mw, &mh);
    if (mw > 0 && mh > 0) {
      win_w = std::min(win_w, mw);
      win_h = std::min(win_h, mh);
    }
  }
  window_ = glfwCreateWindow(win_w, win_h, "pa-viewer: paged attention, step by step", nullptr, nullptr);
  if (!window_) {
    std::fprintf(stderr, "pa-viewer: cannot create an OpenGL 3.3 core window\n");
    return false;
  }
  glfwMakeContextCurrent(window_);
  glfwSwapInterval(o.vsync ? 1 : 0);
  glfwSetWindowSizeLimits(window_, 200, 150, GLFW_DONT_CARE, GLFW_DONT_CARE);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  imgui_ini_ = o.imgui_ini;
  ImGui::GetIO().IniFilename = imgui_ini_.empty() ? nullptr : imgui_ini_.c_str();
  if (!o.scale) {
    float xs = 1.0f, ys = 1.0f;
    glfwGetWindowContentScale(window_, &xs, &ys);  // the window's monitor, which may not be the primary
    scale = ui_scale(xs, ys);
  }
  fonts = load_fonts(scale);
  apply_style(scale);
  // Moved to a monitor with another scale: new fonts and sizes next frame.
  if (!o.scale) {
    glfwSetWindowUserPointer(window_, this);
    glfwSetWindowContentScaleCallback(window_, [](GLFWwindow* w, float xs, float ys) {
      static_cast<Window*>(glfwGetWindowUserPointer(w))->pending_scale_ = ui_scale(xs, ys);
    });
  }
  ImGui_ImplGlfw_InitForOpenGL(window_, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
  imgui_ready_ = true;
  return true;
}

Window::~Window() {
  if (imgui_ready_) {
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
  }
  if (window_) glfwDestroyWindow(window_);
  if (glfw_ready_) glfwTerminate();
}

bool Window::close_requested() const { return glfwWindowShouldClose(window_); }
void Window::poll_events() { glfwPollEvents(); }
void Window::wait_events(double timeout_s) { glfwWaitEventsTimeout(timeout_s); }
void Window::set_size(int width, int height) { glfwSetWindowSize(window_, width, height); }

void Window::follow_content_scale(Fonts& fonts) {
  if (pending_scale_ > 0 && pending_scale_ != fonts.scale) {
    ImGui::GetIO().Fonts->Clear();
    fonts = load_fonts(pending_scale_);
    apply_style(pending_scale_);
    ImGui_ImplOpenGL3_DestroyFontsTexture();
    ImGui_ImplOpenGL3_CreateFontsTexture();
    pending_scale_ = 0;
  }
}

void Window::begin_frame() {
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
}

FramebufferSize Window::render() {
  FramebufferSize fb;
  glfwGetFramebufferSize(window_, &fb.width, &fb.height);
  glViewport(0, 0, fb.width, fb.height);
  glClearColor(kWindowBackground.x, kWindowBackground.y, kWindowBackground.z, kWindowBackground.w);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  return fb;
}

void Window::present() { glfwSwapBuffers(window_); }

}  // namespace pa::viewer
