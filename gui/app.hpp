// The window around the Viewer: GLFW + OpenGL 3.3 + Dear ImGui's GLFW backend and simview's own
// renderer (gl_renderer.hpp), the interactive loop, offscreen rendering into a framebuffer object
// (screenshots, the benchmark) and PNG output.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "gui/gl_renderer.hpp"

namespace csim::gui {

// Exit codes of simview (also printed by --help).
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitNoDisplay = 3;  // no X display / OpenGL context could be created

// An OpenGL 3.3 core context with Dear ImGui on top. Offscreen windows are hidden and render into a
// framebuffer object of exactly the requested size (Xvfb's default screen is only 640x480).
class GlWindow {
 public:
  GlWindow() = default;
  GlWindow(const GlWindow&) = delete;
  GlWindow& operator=(const GlWindow&) = delete;
  ~GlWindow();

  // False, with `error` set, when GLFW or the context cannot start (no DISPLAY, no GL 3).
  bool open(int width, int height, const char* title, bool offscreen, std::string* error);
  bool should_close() const;
  void poll(bool wait);  // waits for input when `wait` (idle desktop use)
  void begin_frame();    // backend NewFrame + ImGui::NewFrame
  void end_frame();      // ImGui::Render, draw, swap (or glFinish offscreen)
  const GlRenderStats& render_stats() const { return renderer_->stats(); }  // the last frame's
  // The last frame as RGBA rows, top row first.
  std::vector<std::uint8_t> read_pixels() const;
  float width() const { return static_cast<float>(w_); }
  float height() const { return static_cast<float>(h_); }

 private:
  void* window_ = nullptr;  // GLFWwindow
  bool offscreen_ = false;
  bool imgui_ = false;
  std::unique_ptr<GlRenderer> renderer_;
  unsigned fbo_ = 0, color_rb_ = 0;
  int w_ = 0, h_ = 0;
};

// Loads DejaVu Sans (when installed) at `size_px` with Latin-1, Greek, arrows and math symbols;
// otherwise Dear ImGui's built-in font. Applies simview's dark style.
void setup_fonts_and_style(float size_px);

// Writes RGBA pixels (top row first) as PNG, atomically (a temporary renamed onto PATH);
// throws std::runtime_error naming PATH on failure.
void write_png(const std::string& path, int width, int height,
               const std::vector<std::uint8_t>& rgba);

struct AppOptions {
  std::vector<std::string> traces;      // files to open
  std::string scenario;                 // scenario to simulate and edit ("" for none)
  std::string screenshot;               // PNG to write, then exit ("" for interactive)
  int width = 1600, height = 900;       // window / screenshot size, px
  std::string view = "timeline";        // initial tab: timeline, memory, stats, compare
  long long step = -1;                  // zoom to ProfilerStep#N (-1: the whole trace)
  bool variants = false;                // with a scenario: start with its launch / GIL variants
  std::string memory_scale = "shared";  // memory view y axis: shared, per-gpu
};

// simview's whole command line (tools-style: tests can call it in-process).
int simview_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace csim::gui
