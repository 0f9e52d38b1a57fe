// simview's window, loop, offscreen rendering and command line (app.hpp).
//
// Index: [SECTION] GL helpers, [SECTION] GlWindow, [SECTION] Fonts and style, [SECTION] PNG,
//        [SECTION] Command line
#include "gui/app.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>

#define GLFW_INCLUDE_GLEXT
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <imgui.h>
#include <stb_image_write.h>
#include <CLI/CLI.hpp>

#include "core/error.hpp"
#include "gui/gl_renderer.hpp"
#include "gui/viewer.hpp"
#include "profiler/atomic_file.hpp"

namespace csim::gui {
namespace {

// [SECTION] GL helpers
// ------------------------------------------------------------------------------

// Framebuffer-object entry points (OpenGL 3.0 core), loaded through GLFW so that no GL loader
// library is needed (GlRenderer loads its own the same way).
struct FboApi {
  PFNGLGENFRAMEBUFFERSPROC gen_framebuffers = nullptr;
  PFNGLBINDFRAMEBUFFERPROC bind_framebuffer = nullptr;
  PFNGLDELETEFRAMEBUFFERSPROC delete_framebuffers = nullptr;
  PFNGLGENRENDERBUFFERSPROC gen_renderbuffers = nullptr;
  PFNGLBINDRENDERBUFFERPROC bind_renderbuffer = nullptr;
  PFNGLDELETERENDERBUFFERSPROC delete_renderbuffers = nullptr;
  PFNGLRENDERBUFFERSTORAGEPROC renderbuffer_storage = nullptr;
  PFNGLFRAMEBUFFERRENDERBUFFERPROC framebuffer_renderbuffer = nullptr;
  PFNGLCHECKFRAMEBUFFERSTATUSPROC check_framebuffer_status = nullptr;

  bool load() {
    auto get = [](const char* name) { return glfwGetProcAddress(name); };
    gen_framebuffers = reinterpret_cast<PFNGLGENFRAMEBUFFERSPROC>(get("glGenFramebuffers"));
    bind_framebuffer = reinterpret_cast<PFNGLBINDFRAMEBUFFERPROC>(get("glBindFramebuffer"));
    delete_framebuffers =
        reinterpret_cast<PFNGLDELETEFRAMEBUFFERSPROC>(get("glDeleteFramebuffers"));
    gen_renderbuffers = reinterpret_cast<PFNGLGENRENDERBUFFERSPROC>(get("glGenRenderbuffers"));
    bind_renderbuffer = reinterpret_cast<PFNGLBINDRENDERBUFFERPROC>(get("glBindRenderbuffer"));
    delete_renderbuffers =
        reinterpret_cast<PFNGLDELETERENDERBUFFERSPROC>(get("glDeleteRenderbuffers"));
    renderbuffer_storage =
        reinterpret_cast<PFNGLRENDERBUFFERSTORAGEPROC>(get("glRenderbufferStorage"));
    framebuffer_renderbuffer =
        reinterpret_cast<PFNGLFRAMEBUFFERRENDERBUFFERPROC>(get("glFramebufferRenderbuffer"));
    check_framebuffer_status =
        reinterpret_cast<PFNGLCHECKFRAMEBUFFERSTATUSPROC>(get("glCheckFramebufferStatus"));
    return gen_framebuffers && bind_framebuffer && delete_framebuffers && gen_renderbuffers &&
           bind_renderbuffer && delete_renderbuffers && renderbuffer_storage &&
           framebuffer_renderbuffer && check_framebuffer_status;
  }
};
FboApi g_fbo;  // function pointers of the current context (one context per process)

void glfw_error(int code, const char* message) {
  std::fprintf(stderr, "simview: GLFW error %d: %s\n", code, message);
}

}  // namespace

// [SECTION] GlWindow
// --------------------------------------------------------------------------------

GlWindow::~GlWindow() {
  if (imgui_) {
    if (renderer_ != nullptr) renderer_->shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
  }
  if (fbo_ != 0) g_fbo.delete_framebuffers(1, &fbo_);
  if (color_rb_ != 0) g_fbo.delete_renderbuffers(1, &color_rb_);
  if (window_ != nullptr) glfwDestroyWindow(static_cast<GLFWwindow*>(window_));
  if (window_ != nullptr) glfwTerminate();
}

bool GlWindow::open(int width, int height, const char* title, bool offscreen, std::string* error) {
  glfwSetErrorCallback(glfw_error);
  if (glfwInit() == GLFW_FALSE) {
    *error = "cannot initialise GLFW (no display? run under xvfb-run for headless use)";
    return false;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  if (offscreen) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
  GLFWwindow* w =
      glfwCreateWindow(offscreen ? 64 : width, offscreen ? 64 : height, title, nullptr, nullptr);
  if (w == nullptr) {
    glfwTerminate();
    *error = "cannot create an OpenGL 3.3 core window";
    return false;
  }
  window_ = w;
  offscreen_ = offscreen;
  glfwMakeContextCurrent(w);
  glfwSwapInterval(offscreen ? 0 : 1);
  w_ = width;
  h_ = height;
  if (offscreen) {
    if (!g_fbo.load()) {
      *error = "the OpenGL context lacks framebuffer objects";
      return false;
    }
    g_fbo.gen_renderbuffers(1, &color_rb_);
    g_fbo.bind_renderbuffer(GL_RENDERBUFFER, color_rb_);
    g_fbo.renderbuffer_storage(GL_RENDERBUFFER, GL_RGBA8, width, height);
    g_fbo.gen_framebuffers(1, &fbo_);
    g_fbo.bind_framebuffer(GL_FRAMEBUFFER, fbo_);
    g_fbo.framebuffer_renderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER,
                                   color_rb_);
    if (g_fbo.check_framebuffer_status(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE) {
      *error = "cannot create a " + std::to_string(width) + "x" + std::to_string(height) +
               " framebuffer";
      return false;
    }
  }
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // no imgui.ini next to the user's traces
  ImGui_ImplGlfw_InitForOpenGL(w, !offscreen);
  imgui_ = true;
  setup_fonts_and_style(15);  // before the renderer uploads the font atlas
  renderer_ = std::make_unique<GlRenderer>();
  return renderer_->init(glfwGetProcAddress, error);
}

bool GlWindow::should_close() const {
  return glfwWindowShouldClose(static_cast<GLFWwindow*>(window_)) != 0;
}

void GlWindow::poll(bool wait) {
  if (wait) {
    glfwWaitEventsTimeout(0.1);
  } else {
    glfwPollEvents();
  }
}

void GlWindow::begin_frame() {
  ImGui_ImplGlfw_NewFrame();
  ImGuiIO& io = ImGui::GetIO();
  if (offscreen_) {
    // The hidden window is tiny; the frame is the framebuffer object's size, with no pointer.
    io.DisplaySize = ImVec2(static_cast<float>(w_), static_cast<float>(h_));
    io.DisplayFramebufferScale = ImVec2(1, 1);
    io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
  } else {
    w_ = static_cast<int>(io.DisplaySize.x);
    h_ = static_cast<int>(io.DisplaySize.y);
  }
  ImGui::NewFrame();
}

void GlWindow::end_frame() {
  ImGui::Render();
  int fw = w_, fh = h_;
  if (!offscreen_) glfwGetFramebufferSize(static_cast<GLFWwindow*>(window_), &fw, &fh);
  if (offscreen_) g_fbo.bind_framebuffer(GL_FRAMEBUFFER, fbo_);
  glViewport(0, 0, fw, fh);
  glClearColor(0.11f, 0.11f, 0.13f, 1);
  glClear(GL_COLOR_BUFFER_BIT);
  renderer_->render(ImGui::GetDrawData());
  if (offscreen_) {
    glFinish();  // the frame is complete (and timed) when this returns
  } else {
    glfwSwapBuffers(static_cast<GLFWwindow*>(window_));
  }
}

std::vector<std::uint8_t> GlWindow::read_pixels() const {
  std::vector<std::uint8_t> px(static_cast<std::size_t>(w_) * h_ * 4);
  if (offscreen_) g_fbo.bind_framebuffer(GL_FRAMEBUFFER, fbo_);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, w_, h_, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
  // OpenGL's first row is the bottom one.
  const std::size_t row = static_cast<std::size_t>(w_) * 4;
  std::vector<std::uint8_t> flipped(px.size());
  for (int y = 0; y < h_; ++y) {
    std::copy_n(px.data() + static_cast<std::size_t>(h_ - 1 - y) * row, row,
                flipped.data() + static_cast<std::size_t>(y) * row);
  }
  return flipped;
}

// [SECTION] Fonts and style
// -------------------------------------------------------------------------

void setup_fonts_and_style(float size_px) {
  ImGuiIO& io = ImGui::GetIO();
  static const ImWchar kRanges[] = {0x0020, 0x00FF, 0x0370, 0x03FF, 0x2010, 0x2027, 0x2190,
                                    0x21FF, 0x2200, 0x22FF, 0x25A0, 0x25FF, 0};
  const char* kFont = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
  std::error_code ec;
  if (std::filesystem::exists(kFont, ec))
    io.Fonts->AddFontFromFileTTF(kFont, size_px, nullptr, kRanges);
  if (io.Fonts->Fonts.empty()) io.Fonts->AddFontDefault();
  ImGui::StyleColorsDark();
  ImGuiStyle& s = ImGui::GetStyle();
  s.WindowRounding = 0;
  s.FrameRounding = 3;
  s.WindowPadding = ImVec2(8, 6);
  s.ItemSpacing = ImVec2(8, 4);
  // No window or child backgrounds: glClear paints the one background. A software rasteriser
  // (Mesa llvmpipe) pays per covered pixel, so every full-window layer costs frame time.
  s.Colors[ImGuiCol_WindowBg] = ImVec4(0, 0, 0, 0);
  s.Colors[ImGuiCol_ChildBg] = ImVec4(0, 0, 0, 0);
}

// [SECTION] PNG
// -------------------------------------------------------------------------------------

void write_png(const std::string& path, int width, int height,
               const std::vector<std::uint8_t>& rgba) {
  // RGB: the framebuffer's alpha is whatever ImGui blended into it, and dropping it keeps the
  // documentation images small.
  std::vector<std::uint8_t> rgb(static_cast<std::size_t>(width) * height * 3);
  for (std::size_t i = 0, j = 0; j < rgb.size(); i += 4, j += 3)
    std::copy_n(rgba.data() + i, 3, rgb.data() + j);
  // Through a temporary renamed onto PATH, as every output (profiler/atomic_file.hpp).
  prof::write_file_atomically(path, [&](std::ostream& os) {
    auto put = [](void* ctx, void* data, int size) {
      static_cast<std::ostream*>(ctx)->write(static_cast<const char*>(data), size);
    };
    if (stbi_write_png_to_func(put, &os, width, height, 3, rgb.data(), width * 3) == 0)
      throw std::runtime_error(path + ": cannot encode the PNG");
  });
}

// [SECTION] Command line
// ----------------------------------------------------------------------------

int simview_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  AppOptions o;
  std::string size;
  CLI::App cli{
      "simview: ClusterSim's viewer for timelines, memory and comparisons (docs/simview.md)",
      "simview"};
  cli.add_option("traces", o.traces,
                 "trace files (Chrome JSON, .json.gz from the PyTorch profiler)");
  cli.add_option("--scenario", o.scenario, "simulate this scenario and edit its knobs");
  cli.add_option("--screenshot", o.screenshot, "render offscreen to this PNG and exit");
  cli.add_option("--size", size, "window or screenshot size WxH (default 1600x900)");
  cli.add_option("--view", o.view, "initial view: timeline, memory, stats, compare");
  cli.add_option("--step", o.step, "zoom to training step N (ProfilerStep#N)");
  std::string range;
  cli.add_option("--range", range, "zoom to START:END milliseconds after the trace's first event");
  cli.add_flag("--variants", o.variants,
               "with --scenario: run its three launch / GIL variants (compare view)");
  cli.add_option("--memory-scale", o.memory_scale,
                 "memory view y axis: shared (one scale for every GPU, default) or per-gpu "
                 "(each GPU up to its own peak)");
  cli.footer("exit codes: 0 ok, 1 internal error, 2 bad input, 3 no display / OpenGL");
  std::vector<std::string> rev(args.rbegin(), args.rend());
  try {
    cli.parse(rev);
  } catch (const CLI::CallForHelp&) {
    out << cli.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    err << "simview: " << e.what() << " (hint: simview --help)\n";
    return kExitBadInput;
  }
  // Every option is checked before any trace is read (docs/limits.md, "Exit codes").
  if (!size.empty()) {
    int w = 0, h = 0;
    if (std::sscanf(size.c_str(), "%dx%d", &w, &h) != 2 || w < 200 || h < 150 || w > 8192 ||
        h > 8192) {
      err << "simview: --size " << size
          << ": expected WxH between 200x150 and 8192x8192 (hint: e.g. --size 1600x900)\n";
      return kExitBadInput;
    }
    o.width = w;
    o.height = h;
  }
  Tab tab = Tab::kTimeline;
  if (!parse_tab(o.view, &tab)) {
    err << "simview: --view " << o.view
        << ": expected timeline, memory, stats or compare (hint: e.g. --view memory)\n";
    return kExitBadInput;
  }
  MemoryScale memory_scale = MemoryScale::kShared;
  if (!parse_memory_scale(o.memory_scale, &memory_scale)) {
    err << "simview: --memory-scale " << o.memory_scale
        << ": expected shared or per-gpu (hint: e.g. --memory-scale per-gpu)\n";
    return kExitBadInput;
  }
  if (o.traces.empty() && o.scenario.empty()) {
    err << "simview: nothing to show (hint: give trace files or --scenario; simview --help)\n";
    return kExitBadInput;
  }
  double range_a = 0, range_b = 0;
  if (!range.empty() &&
      (std::sscanf(range.c_str(), "%lf:%lf", &range_a, &range_b) != 2 || !(range_b > range_a))) {
    err << "simview: --range " << range
        << ": expected START:END in ms with END > START (hint: e.g. --range 10:25)\n";
    return kExitBadInput;
  }
  // The screenshot's path before any trace is read (docs/limits.md, "Output paths").
  try {
    if (!o.screenshot.empty()) prof::check_output_file("--screenshot", o.screenshot);
  } catch (const InputError& e) {
    err << "simview: " << e.what() << "\n";
    return kExitBadInput;
  }

  Viewer viewer;
  viewer.memory_view_state().scale = memory_scale;
  try {
    for (const std::string& t : o.traces) {
      auto doc = load_document(t);
      err << "simview: " << t << ": " << doc->trace.events.size() << " events read in "
          << doc->read_s << " s, indexed in " << doc->index_s << " s\n";
      viewer.add_document(std::move(doc));
    }
    if (!o.scenario.empty()) {
      viewer.set_scenario(o.scenario);
      const bool ok = o.variants ? viewer.run_variants() : viewer.simulate_scenario();
      err << "simview: " << o.scenario << ": " << viewer.scenario_message() << "\n";
      if (!ok) return kExitBadInput;
    }
  } catch (const InputError& e) {
    err << "simview: " << e.what() << "\n";
    return kExitBadInput;
  }
  if (!o.variants || cli.count("--view") > 0) viewer.select_tab(tab);  // --variants opens Compare
  if (!range.empty()) viewer.show_range(range_a * 1e6, range_b * 1e6);
  if (o.step >= 0 && !viewer.show_step(o.step)) {
    err << "simview: --step " << o.step << ": the trace has no ProfilerStep#" << o.step
        << " (hint: its steps are the ProfilerStep#N annotations; omit --step to see them all)\n";
    return kExitBadInput;
  }

  GlWindow window;
  std::string error;
  if (!window.open(o.width, o.height, "simview", !o.screenshot.empty(), &error)) {
    err << "simview: " << error << "\n";
    return kExitNoDisplay;
  }
  if (!o.screenshot.empty()) {
    // A few frames: the first lays out tabs and tables, later ones use their measured sizes.
    for (int i = 0; i < 4; ++i) {
      window.begin_frame();
      viewer.frame(window.width(), window.height());
      window.end_frame();
    }
    try {
      write_png(o.screenshot, o.width, o.height, window.read_pixels());
    } catch (const std::exception& e) {  // checked before: a full disk, a path changed since
      err << "simview: --screenshot " << e.what() << "\n";
      return kExitBadInput;
    }
    out << "simview: wrote " << o.screenshot << " (" << o.width << "x" << o.height << ")\n";
    return kExitOk;
  }
  while (!window.should_close()) {
    window.poll(true);
    window.begin_frame();
    viewer.frame(window.width(), window.height());
    window.end_frame();
  }
  return kExitOk;
}

}  // namespace csim::gui
