// The whole simview UI driven headless: Dear ImGui without a backend (as imgui's example_null),
// a hand-built font atlas, synthetic mouse input. Checks that every tab draws, that folding bounds
// the work on a large trace, that the wheel zooms around the cursor and a click selects an event.
#include <catch2/catch.hpp>

#include <string>

#include <imgui.h>

#include "gui/event_style.hpp"
#include "gui/kernel_compare_model.hpp"
#include "gui/memory_model.hpp"
#include "gui/panels.hpp"
#include "gui/viewer.hpp"

using namespace csim;
using namespace csim::gui;

namespace {

// An ImGui context for the duration of a test.
struct HeadlessImGui {
  HeadlessImGui() {
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = ImVec2(1400, 800);
    io.DeltaTime = 1.0f / 60;
    io.IniFilename = nullptr;
    unsigned char* pixels = nullptr;
    int w = 0, h = 0;
    io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);  // builds the default font atlas
    io.Fonts->SetTexID(nullptr);
  }
  ~HeadlessImGui() { ImGui::DestroyContext(); }
  HeadlessImGui(const HeadlessImGui&) = delete;
  HeadlessImGui& operator=(const HeadlessImGui&) = delete;

  void frame(Viewer& v) {
    ImGui::NewFrame();
    v.frame(ImGui::GetIO().DisplaySize.x, ImGui::GetIO().DisplaySize.y);
    ImGui::Render();
  }
};

std::string golden(const char* name) {
  return std::string(CSIM_SOURCE_DIR) + "/traces/" + name;
}

// `lanes` lanes of `per_lane` back-to-back 1 µs kernels with 0.5 µs gaps, one GPU per 2 lanes.
prof::Trace synthetic(int lanes, int per_lane) {
  prof::Trace t;
  for (int l = 0; l < lanes; ++l) {
    if (l % 2 == 0) {
      prof::ProcessInfo p;
      p.pid = l / 2;
      p.gpu = l / 2;
      p.node = 0;
      p.name = "GPU " + std::to_string(l / 2);
      t.processes.push_back(p);
    }
    t.threads.push_back(prof::ThreadInfo{l / 2, 1000 + l, "stream", prof::LaneRole::kCompute, l});
    for (int i = 0; i < per_lane; ++i) {
      prof::TraceEvent e;
      e.pid = l / 2;
      e.tid = 1000 + l;
      e.ts_ns = i * 1500LL;
      e.dur_ns = 1000;
      e.cls = i % 7 == 0 ? prof::EventClass::kCommunication : prof::EventClass::kCompute;
      e.name = "k";
      t.events.push_back(std::move(e));
    }
  }
  return t;
}

}  // namespace

TEST_CASE("every tab draws the golden DataParallel trace headless", "[gui][imgui]") {
  HeadlessImGui ctx;
  Viewer v;
  v.add_document(load_document(golden("linear_5x2_dp2.trace.json")));
  v.add_document(load_document(golden("linear_5x2_ddp2.trace.json")));
  for (const Tab t : {Tab::kTimeline, Tab::kMemory, Tab::kStats, Tab::kCompare}) {
    v.select_tab(t);
    for (int i = 0; i < 3; ++i) ctx.frame(v);
    CHECK(ImGui::GetDrawData()->TotalVtxCount > 1000);
  }
  // Compare: two GPUs, so lanes rather than strips; no expert kernels, so the kernel panel is
  // closed.
  CHECK(v.compare_state().gpu_strips == 0);
  CHECK(v.compare_state().kernel_panel == 0);
  // The memory view shares one y scale by default; per-GPU scaling (--memory-scale per-gpu) draws
  // too.
  CHECK(v.memory_view_state().scale == MemoryScale::kShared);
  v.memory_view_state().scale = MemoryScale::kPerGpu;
  v.select_tab(Tab::kMemory);
  for (int i = 0; i < 2; ++i) ctx.frame(v);
  CHECK(ImGui::GetDrawData()->TotalVtxCount > 1000);
  v.select_tab(Tab::kTimeline);
  ctx.frame(v);
  ctx.frame(v);
  // The DDP trace is active (added last): two GPUs' lanes laid out, events drawn.
  CHECK(v.timeline().counters().draw_items > 0);
  CHECK(v.timeline().layout().items.size() >= 4);
}

TEST_CASE("the compare view shows 8-GPU traces as strips with per-GPU expert kernel bars",
          "[gui][imgui]") {
  // Two traces of 8 GPUs whose kernels are named like a mixture of experts' expert GEMMs; in the
  // second, GPU 3's take twice as long.
  auto moe = [](bool skewed) {
    prof::Trace t = synthetic(16, 50);
    for (prof::TraceEvent& e : t.events) {
      e.name = "mb0 h.0.mlp.experts.fc.fwd";
      if (skewed && e.pid == 3) e.dur_ns *= 2;
    }
    return t;
  };
  HeadlessImGui ctx;
  Viewer v;
  v.add_document(make_document(moe(false), "balanced"));
  v.add_document(make_document(moe(true), "skewed"));
  v.select_tab(Tab::kCompare);
  for (int i = 0; i < 3; ++i) ctx.frame(v);
  CHECK(ImGui::GetDrawData()->TotalVtxCount > 1000);
  CompareState& st = v.compare_state();
  CHECK(st.gpu_strips == 1);    // 8 GPUs or more: one strip per GPU by default
  CHECK(st.kernel_panel == 1);  // open: the traces have expert kernels
  REQUIRE(st.filters.size() == 2);
  CHECK(std::string(st.filters[0].data()) == "mlp.experts");
  CHECK(std::string(st.filters[1].data()) == "ep all_to_all");
  // Each trace's comparison is computed once per filter, not per frame.
  REQUIRE(st.cache.size() == 4);
  const KernelComparison& balanced = st.cache[0].k;
  const KernelComparison& skewed = st.cache[1].k;
  CHECK(st.cache[0].filter == "mlp.experts");
  CHECK(balanced.gpus.size() == 8);
  CHECK(most_often_slowest(balanced) == -1);
  CHECK(most_often_slowest(skewed) == 3);
  CHECK(st.cache[2].k.gpus.empty());  // no all-to-all in these traces
}

TEST_CASE("the memory view draws a profile_memory trace's allocated curve", "[gui][imgui]") {
  // tests/data/kineto/profile_memory.json: device 1's allocator totals (1, 3, 6, 4, 5 MiB) with no
  // category, all within the fitted view. The stack is drawn in the unattributed band's colour:
  // a filled rectangle (4 vertices) per sample, each sample wider than a pixel (memory_columns),
  // and the legend's swatch: 5 x 4 + 4 vertices. Before memory_bands the view drew only
  // categories: only the swatch-less legend, no vertex of that colour.
  HeadlessImGui ctx;
  Viewer v;
  v.add_document(
      load_document(std::string(CSIM_SOURCE_DIR) + "/tests/data/kineto/profile_memory.json"));
  v.select_tab(Tab::kMemory);
  for (int i = 0; i < 3; ++i) ctx.frame(v);
  const ImU32 band = memory_category_colour(kUnattributedMemory);
  int vertices = 0;
  const ImDrawData* dd = ImGui::GetDrawData();
  for (int l = 0; l < dd->CmdListsCount; ++l)
    for (const ImDrawVert& vx : dd->CmdLists[l]->VtxBuffer) vertices += vx.col == band ? 1 : 0;
  CHECK(vertices == 5 * 4 + 4);
}

TEST_CASE("folding bounds the draw work on a 400k-event trace", "[gui][imgui]") {
  HeadlessImGui ctx;
  Viewer v;
  v.add_document(make_document(synthetic(8, 50'000), "synthetic"));
  ctx.frame(v);
  ctx.frame(v);
  const FrameCounters& c = v.timeline().counters();
  // Fitted: 75 ms over ~1150 px = 65 µs per pixel, so each lane folds into very few blocks;
  // at most one block per min_event_px (3 px) per lane.
  const double per_lane_bound = v.timeline().plot_width() / 3 + 2;
  CHECK(c.draw_items <= static_cast<std::size_t>(8 * per_lane_bound));
  CHECK(c.folded_events > 390'000);
}

TEST_CASE("wheel zooms around the cursor, a click selects the event under it", "[gui][imgui]") {
  HeadlessImGui ctx;
  Viewer v;
  v.add_document(load_document(golden("linear_5x2_dp2.trace.json")));
  ctx.frame(v);
  ctx.frame(v);
  const Document& d = *v.active_document();
  const TimelineView& tl = v.timeline();
  const float plot_x0 = tl.content_x() + tl.label_width;

  // Zoom: the time under the cursor stays put.
  ImGuiIO& io = ImGui::GetIO();
  // A copy: the layout is rebuilt every frame (identically while nothing collapses).
  LayoutItem found;
  bool have = false;
  for (const LayoutItem& it : tl.layout().items) {
    if (it.kind == ItemKind::kLane && prof::is_gpu_lane(d.timeline.lanes[it.index].role)) {
      found = it;
      have = true;
      break;
    }
  }
  REQUIRE(have);
  const LayoutItem* lane_item = &found;
  const float y = tl.content_y() + lane_item->y + tl.metrics.row_h / 2;
  const float x = plot_x0 + 300;
  io.MousePos = ImVec2(x, y);
  ctx.frame(v);
  const double t_before = v.time_view().time_at(300);
  const double scale_before = v.time_view().ns_per_px;
  io.MouseWheel = 2;
  ctx.frame(v);
  io.MouseWheel = 0;
  CHECK(v.time_view().ns_per_px == Approx(scale_before / 1.5625));
  CHECK(v.time_view().time_at(300) == Approx(t_before));

  // Click on the middle of the lane's widest event.
  const Lane& lane = d.timeline.lanes[lane_item->index];
  REQUIRE_FALSE(lane.rows.empty());
  const Span* widest = &lane.rows[0].spans[0];
  for (const Span& s : lane.rows[0].spans) {
    if (s.end - s.start > widest->end - widest->start) widest = &s;
  }
  const double mid =
      static_cast<double>(widest->start + widest->end) / 2 - static_cast<double>(d.timeline.t_min);
  TimeView& view = v.time_view();
  fit(&view, widest->start - d.timeline.t_min, widest->end - d.timeline.t_min, tl.plot_width());
  ctx.frame(v);
  io.MousePos = ImVec2(plot_x0 + static_cast<float>(view.x_of(mid)),
                       tl.content_y() + lane_item->y + tl.metrics.row_h / 2);
  ctx.frame(v);
  io.MouseDown[0] = true;
  ctx.frame(v);
  io.MouseDown[0] = false;
  ctx.frame(v);
  REQUIRE(v.selection().event >= 0);
  CHECK(static_cast<std::uint32_t>(v.selection().event) == widest->event);
  CHECK(v.selection().doc == &d);
}
