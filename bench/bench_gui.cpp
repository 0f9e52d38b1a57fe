// simview at scale: loads a synthetic trace of N events (default 1,000,000) and renders frames of
// the timeline while zooming and panning, offscreen through OpenGL (run under xvfb-run on a
// machine without a display: Mesa's llvmpipe rasterises in software). Without a display it
// measures the CPU side only (Dear ImGui headless) and says so.
//
//   xvfb-run -a build/release/bench/bench_gui [EVENTS] [FRAMES]
//
// Prints: write time (not part of loading), load time = read + index (simview's startup for the
// file), and frame times (mean, p95, max) with the frames per second they imply. With OpenGL, per
// phase also: the mean time to build the frame (UI: Dear ImGui + folding) and to draw it (the rest:
// ImGui::Render, the renderer, glFinish), and what the phase's last frame sent to OpenGL (draw
// calls, pipeline switches, triangles and their area per pipeline, gui/gl_renderer.hpp).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <GL/gl.h>
#include <imgui.h>

#include "gui/app.hpp"
#include "gui/viewer.hpp"
#include "profiler/chrome_trace_writer.hpp"

using namespace csim;
using namespace csim::gui;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// 8 GPUs, each with a compute, a communication and a copy stream and a host thread; events of
// 2-40 µs with short gaps, names from a small set (as kernel names repeat in real traces).
prof::Trace synthetic_trace(std::int64_t events) {
  prof::Trace t;
  constexpr int kGpus = 8, kLanesPerGpu = 4;
  static constexpr prof::LaneRole kRoles[kLanesPerGpu] = {
      prof::LaneRole::kCompute, prof::LaneRole::kComm, prof::LaneRole::kCopy,
      prof::LaneRole::kHost};
  static constexpr prof::EventClass kClasses[kLanesPerGpu] = {
      prof::EventClass::kCompute, prof::EventClass::kCommunication, prof::EventClass::kCopy,
      prof::EventClass::kHost};
  static constexpr const char* kCats[kLanesPerGpu] = {"kernel", "kernel", "gpu_memcpy", "cpu_op"};
  static constexpr const char* kNames[kLanesPerGpu] = {
      "sm80_xmma_gemm_f16f16", "ncclDevKernel_AllReduce_Sum", "Memcpy HtoD (Pinned -> Device)",
      "aten::linear"};
  for (int g = 0; g < kGpus; ++g) {
    prof::ProcessInfo p;
    p.pid = g;
    p.gpu = g;
    p.node = g / 4;
    p.rank = g;
    p.name = "node " + std::to_string(g / 4) + " / GPU " + std::to_string(g);
    t.processes.push_back(p);
    for (int l = 0; l < kLanesPerGpu; ++l) {
      t.threads.push_back(prof::ThreadInfo{
          g, 1000 + l, std::string(prof::to_string(kRoles[l])) + " lane", kRoles[l], l});
    }
  }
  const std::int64_t per_lane = events / (kGpus * kLanesPerGpu);
  t.events.reserve(static_cast<std::size_t>(per_lane * kGpus * kLanesPerGpu));
  std::uint64_t rng = 88172645463325252ULL;
  auto next = [&rng] {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  for (int g = 0; g < kGpus; ++g) {
    for (int l = 0; l < kLanesPerGpu; ++l) {
      TimeNs ts = 0;
      for (std::int64_t i = 0; i < per_lane; ++i) {
        prof::TraceEvent e;
        e.pid = g;
        e.tid = 1000 + l;
        e.ts_ns = ts;
        e.dur_ns = 2000 + static_cast<TimeNs>(next() % 38000);
        e.cls = kClasses[l];
        e.cat = kCats[l];
        e.name = kNames[l];
        ts += e.dur_ns + static_cast<TimeNs>(next() % 3000);
        t.events.push_back(std::move(e));
      }
    }
  }
  return t;
}

struct FrameStats {
  double mean_ms = 0, p95_ms = 0, max_ms = 0;
};

FrameStats stats(std::vector<double> ms) {
  FrameStats s;
  if (ms.empty()) return s;
  for (const double v : ms) s.mean_ms += v;
  s.mean_ms /= static_cast<double>(ms.size());
  std::sort(ms.begin(), ms.end());
  s.p95_ms = ms[static_cast<std::size_t>(0.95 * static_cast<double>(ms.size() - 1))];
  s.max_ms = ms.back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t events = argc > 1 ? std::atoll(argv[1]) : 1'000'000;
  const int frames = argc > 2 ? std::atoi(argv[2]) : 240;
  const std::string path =
      (std::filesystem::temp_directory_path() / ("bench_gui_" + std::to_string(events) + ".json"))
          .string();

  double t0 = now_s();
  prof::write_chrome_trace_file(synthetic_trace(events), path);
  std::printf("write  %lld events: %.2f s (%s, %.0f MB)\n", static_cast<long long>(events),
              now_s() - t0, path.c_str(),
              static_cast<double>(std::filesystem::file_size(path)) / 1e6);

  t0 = now_s();
  auto doc = load_document(path);
  const double load_s = now_s() - t0;
  std::printf("load   %zu events: %.2f s (read %.2f s + index %.2f s)\n", doc->trace.events.size(),
              load_s, doc->read_s, doc->index_s);

  constexpr int kW = 1600, kH = 900;
  GlWindow window;
  std::string error;
  const bool gl = window.open(kW, kH, "bench_gui", true, &error);
  if (!gl) {
    std::printf("no OpenGL (%s): measuring the CPU side only (Dear ImGui headless)\n",
                error.c_str());
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = ImVec2(kW, kH);
    io.DeltaTime = 1.0f / 60;
    io.IniFilename = nullptr;
    unsigned char* px = nullptr;
    int w = 0, h = 0;
    io.Fonts->GetTexDataAsRGBA32(&px, &w, &h);
  } else {
    std::printf("renderer: %s\n", reinterpret_cast<const char*>(glGetString(GL_RENDERER)));
  }
  Viewer viewer;
  viewer.add_document(std::move(doc));
  // One frame; returns the milliseconds spent building it (Dear ImGui + folding, before
  // ImGui::Render), the rest of the frame being Render, the renderer and glFinish.
  auto frame = [&] {
    const double start = now_s();
    if (gl) {
      window.begin_frame();
      viewer.frame(kW, kH);
      const double ui_ms = (now_s() - start) * 1e3;
      window.end_frame();
      return ui_ms;
    }
    ImGui::NewFrame();
    viewer.frame(kW, kH);
    const double ui_ms = (now_s() - start) * 1e3;
    ImGui::Render();
    return ui_ms;
  };
  for (int i = 0; i < 3; ++i) frame();  // layout settles, view fitted to the whole trace

  // Phase 1: the whole trace (everything folded). Phase 2: zoom in 1.05x per frame around the
  // middle, then out. Phase 3: pan at 20 px per frame at a mid zoom.
  struct Phase {
    const char* name;
    std::vector<double> ms, ui_ms;  // per frame: whole frame, building it
    GlRenderStats gl;               // the last frame's draw calls (the deepest one when zooming)
  };
  Phase fit{"fit-all", {}, {}, {}}, zoom{"zooming", {}, {}, {}}, pan{"panning", {}, {}, {}};
  auto timed = [&](Phase* p) {
    t0 = now_s();
    p->ui_ms.push_back(frame());
    p->ms.push_back((now_s() - t0) * 1e3);
  };
  const float plot_w = viewer.timeline().plot_width();
  std::size_t max_items = 0;
  for (int i = 0; i < frames / 4; ++i) timed(&fit);
  if (gl) fit.gl = window.render_stats();
  for (int i = 0; i < frames / 2; ++i) {
    zoom_at(&viewer.time_view(), plot_w / 2, i < frames / 4 ? 1.05 : 1 / 1.05);
    timed(&zoom);
    max_items = std::max(max_items, viewer.timeline().counters().draw_items);
    if (gl && i == frames / 4 - 1) zoom.gl = window.render_stats();
  }
  for (int i = 0; i < 40; ++i) zoom_at(&viewer.time_view(), plot_w / 2, 1.1);
  for (int i = 0; i < frames / 4; ++i) {
    pan_by(&viewer.time_view(), -20);
    timed(&pan);
  }
  if (gl) pan.gl = window.render_stats();
  std::printf("frames (%dx%d, %s):\n", kW, kH, gl ? "OpenGL, glFinish per frame" : "CPU only");
  for (const Phase* p : {&fit, &zoom, &pan}) {
    const FrameStats s = stats(p->ms);
    std::printf("  %-8s %4zu frames: mean %6.2f ms (%5.0f fps), p95 %6.2f ms, max %6.2f ms\n",
                p->name, p->ms.size(), s.mean_ms, 1e3 / s.mean_ms, s.p95_ms, s.max_ms);
    if (gl) {
      const double ui = stats(p->ui_ms).mean_ms;
      const GlRenderStats& g = p->gl;
      std::printf(
          "           UI %.2f ms + drawing %.2f ms; %zu draw calls, %zu pipeline switches\n"
          "           triangles (kpx): %zu (%.0f) opaque, %zu (%.0f) solid, %zu (%.0f) "
          "textured\n",
          ui, s.mean_ms - ui, g.draw_calls, g.state_changes, g.opaque_triangles, g.opaque_px / 1e3,
          g.solid_triangles, g.solid_px / 1e3, g.textured_triangles, g.textured_px / 1e3);
    }
  }
  std::printf("  most event rectangles in one frame: %zu (folding)\n", max_items);
  if (!gl) ImGui::DestroyContext();
  std::filesystem::remove(path);
  return 0;
}
