// Statistics and compare views (panels.hpp).
//
// Index: [SECTION] Breakdown bars, [SECTION] Statistics, [SECTION] Compare
#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

#include <imgui.h>

#include "gui/event_style.hpp"
#include "gui/panels.hpp"

namespace csim::gui {
namespace {

// [SECTION] Breakdown bars
// --------------------------------------------------------------------------

constexpr Part kBarParts[] = {Part::kCompute, Part::kCommunication, Part::kCopy, Part::kGilWait,
                              Part::kIdle};

// One horizontal bar split by part, `w` px wide for `scale_s` seconds.
void breakdown_bar(const GpuStats& g, float w, float h, double scale_s) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  float x = p.x;
  for (const Part part : kBarParts) {
    const double s = g.part_s[static_cast<int>(part)];
    const float dx = scale_s > 0 ? static_cast<float>(s / scale_s) * w : 0;
    if (dx <= 0) continue;
    dl->AddRectFilled(ImVec2(x, p.y + 1), ImVec2(x + dx, p.y + h - 1), part_colour(part));
    if (dx > 44) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.0f%%", g.window_s > 0 ? s / g.window_s * 100 : 0);
      dl->AddText(ImVec2(x + 3, p.y + (h - ImGui::GetFontSize()) / 2), text_on(part_colour(part)),
                  buf);
    }
    x += dx;
  }
  ImGui::Dummy(ImVec2(w, h));
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    for (const Part part : kBarParts) {
      ImGui::Text("%-14s %s", to_string(part),
                  format_time(g.part_s[static_cast<int>(part)] * 1e9).c_str());
    }
    ImGui::EndTooltip();
  }
}

void parts_legend() {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float sz = ImGui::GetFontSize() * 0.8f;
  for (const Part part : kBarParts) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    dl->AddRectFilled(ImVec2(p.x, p.y + 2), ImVec2(p.x + sz, p.y + 2 + sz), part_colour(part));
    ImGui::Dummy(ImVec2(sz + 2, sz));
    ImGui::SameLine();
    ImGui::TextUnformatted(to_string(part));
    ImGui::SameLine(0, 14);
  }
  ImGui::NewLine();
}

void figure(const char* label, const std::string& value) {
  ImGui::TableNextRow();
  ImGui::TableSetColumnIndex(0);
  ImGui::TextDisabled("%s", label);
  ImGui::TableSetColumnIndex(1);
  ImGui::TextUnformatted(value.c_str());
}

std::string pct(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %%", f * 100);
  return buf;
}

// GPUtil's showUtilization for every step (docs/summary.md, "Utilisation over time"): GPUs down,
// steps across, "busy % / memory %" per cell on a background as green as the GPU was busy.
void draw_utilisation_by_step(const prof::Summary& s) {
  std::vector<const prof::GpuSummary*> rows;
  for (const prof::GpuSummary& g : s.per_gpu)
    if (!g.by_step.empty()) rows.push_back(&g);
  if (rows.empty() || rows.front()->by_step.size() < 2) return;
  if (!ImGui::CollapsingHeader("Utilisation per step (busy % / memory % of usable)",
                               ImGuiTreeNodeFlags_DefaultOpen))
    return;
  const std::size_t steps = rows.front()->by_step.size();
  const int cols = static_cast<int>(std::min<std::size_t>(steps, 60)) + 1;
  const float row_h = ImGui::GetFontSize() + 6;
  const float h = row_h * static_cast<float>(std::min<std::size_t>(rows.size(), 8) + 1) + 6;
  if (!ImGui::BeginTable("by_step", cols,
                         ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_Borders |
                             ImGuiTableFlags_ScrollX | ImGuiTableFlags_ScrollY,
                         ImVec2(0, h)))
    return;
  ImGui::TableSetupScrollFreeze(1, 1);
  ImGui::TableSetupColumn("GPU");
  for (int c = 1; c < cols; ++c)
    ImGui::TableSetupColumn(
        ("step " + std::to_string(rows.front()->by_step[static_cast<std::size_t>(c - 1)].step))
            .c_str());
  ImGui::TableHeadersRow();
  for (const prof::GpuSummary* g : rows) {
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    ImGui::TextUnformatted(g->name.c_str());
    for (int c = 1; c < cols && static_cast<std::size_t>(c - 1) < g->by_step.size(); ++c) {
      const prof::StepUtilisation& u = g->by_step[static_cast<std::size_t>(c - 1)];
      ImGui::TableSetColumnIndex(c);
      const auto green = static_cast<int>(40 + 120 * std::clamp(u.busy_fraction, 0.0, 1.0));
      ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, rgba(30, green, 50));
      char buf[48];
      if (g->has_memory_data && g->capacity_bytes > 0)
        std::snprintf(
            buf, sizeof buf, "%3.0f / %3.0f", 100 * u.busy_fraction,
            100.0 * static_cast<double>(u.peak_bytes) / static_cast<double>(g->capacity_bytes));
      else
        std::snprintf(buf, sizeof buf, "%3.0f / -", 100 * u.busy_fraction);
      ImGui::TextUnformatted(buf);
    }
  }
  ImGui::EndTable();
}

constexpr float kKernelBarH = 26;  // px per trace in the per-GPU kernel panel

const KernelComparison& cached_kernels(CompareState* st, const Document& d,
                                       const std::string& filter) {
  for (const CompareState::Cached& c : st->cache)
    if (c.doc == &d && c.filter == filter) return c.k;
  if (st->cache.size() > 64) st->cache.clear();  // filters edited many times
  st->cache.push_back({&d, filter, compare_kernels(d.trace, d.summary, filter)});
  return st->cache.back().k;
}

std::string ratio(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", v);
  return buf;
}

// One trace's GPUs as bars `w` px wide in all, heights on the shared scale `scale_s`; the GPU
// slowest in the most instances (most_often_slowest) in gold.
void kernel_bars(const KernelComparison& k, float w, float h, double scale_s) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const std::size_t n = std::max<std::size_t>(k.gpus.size(), 1);
  const float slot = w / static_cast<float>(n);
  const float bw = std::max(slot - 3, 2.0f);
  dl->AddRectFilled(p, ImVec2(p.x + w, p.y + h), rgba(28, 30, 36));
  int hovered = -1;
  const int slow = most_often_slowest(k);
  for (std::size_t i = 0; i < k.gpus.size(); ++i) {
    const GpuKernelTime& g = k.gpus[i];
    const float bh = scale_s > 0 ? static_cast<float>(g.per_step_s / scale_s) * (h - 2) : 0;
    const float x = p.x + slot * static_cast<float>(i) + 1;
    const bool top = static_cast<int>(i) == slow;
    dl->AddRectFilled(ImVec2(x, p.y + h - 1 - bh), ImVec2(x + bw, p.y + h - 1),
                      top ? rgba(255, 200, 60) : part_colour(Part::kCompute));
    if (ImGui::IsMouseHoveringRect(ImVec2(x, p.y), ImVec2(x + slot, p.y + h)))
      hovered = static_cast<int>(i);
  }
  ImGui::Dummy(ImVec2(w, h));
  if (hovered >= 0 && ImGui::IsItemHovered()) {
    const GpuKernelTime& g = k.gpus[static_cast<std::size_t>(hovered)];
    ImGui::BeginTooltip();
    ImGui::Text("%s: %s per step in %zu events matching \"%s\"", g.name.c_str(),
                format_time(g.per_step_s * 1e9).c_str(), g.events, k.filter.c_str());
    ImGui::Text("slowest GPU of %d of %d instances", g.slowest, k.instances);
    ImGui::EndTooltip();
  }
}

// Per filter: every GPU's time in the matching kernels, one row of bars per trace on one scale,
// with max/mean, the instances' spread and the GPU slowest most often.
void default_filters(CompareState* st) {
  if (!st->filters.empty()) return;
  for (const char* f : {"mlp.experts", "ep all_to_all"}) {
    std::array<char, 96> b{};
    std::snprintf(b.data(), b.size(), "%s", f);
    st->filters.push_back(b);
  }
}

// Open at first when some trace has GPU work matching a filter (a mixture of experts with the
// default filters), closed otherwise; then as the user leaves it.
void decide_kernel_panel(const std::vector<const Document*>& docs, std::size_t n,
                         CompareState* st) {
  default_filters(st);
  if (st->kernel_panel >= 0) return;
  st->kernel_panel = 0;
  for (const auto& f : st->filters)
    for (std::size_t i = 0; i < n; ++i)
      if (!cached_kernels(st, *docs[i], f.data()).gpus.empty()) st->kernel_panel = 1;
}

void draw_kernel_panel(const std::vector<const Document*>& docs, std::size_t n, CompareState* st) {
  ImGui::SetNextItemOpen(st->kernel_panel == 1, ImGuiCond_Always);
  const bool open = ImGui::CollapsingHeader("Per GPU: time in kernels matching a filter");
  st->kernel_panel = open ? 1 : 0;
  if (!open) return;
  const float label_w = 150;
  const float bars_w = std::min(ImGui::GetContentRegionAvail().x - label_w - 620, 520.0f);
  for (std::size_t f = 0; f < st->filters.size(); ++f) {
    ImGui::PushID(static_cast<int>(f));
    ImGui::SetNextItemWidth(label_w - 8);
    ImGui::InputText("##filter", st->filters[f].data(), st->filters[f].size());
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("GPU kernels whose name or op contains this ('|' separates several)");
    const std::string filter = st->filters[f].data();
    std::vector<const KernelComparison*> ks;
    double scale = 0;
    for (std::size_t i = 0; i < n; ++i) {
      ks.push_back(&cached_kernels(st, *docs[i], filter));
      scale = std::max(scale, ks.back()->max_s);
    }
    ImGui::SameLine();
    ImGui::TextDisabled(
        "per GPU, per step, on one scale (%s at the top); gold: the GPU slowest most often",
        format_time(scale * 1e9).c_str());
    for (std::size_t i = 0; i < n; ++i) {
      const KernelComparison& k = *ks[i];
      ImGui::TextColored(ImVec4(0.6f, 0.85f, 1, 1), "  %c", static_cast<char>('A' + i));
      ImGui::SameLine(label_w);
      if (k.gpus.empty()) {
        ImGui::TextDisabled("no GPU kernel matches");
        continue;
      }
      kernel_bars(k, bars_w, kKernelBarH, scale);
      ImGui::SameLine();
      ImGui::BeginGroup();
      ImGui::Text("%zu GPUs  %s - %s  max/mean %s", k.gpus.size(),
                  format_time(k.min_s * 1e9).c_str(), format_time(k.max_s * 1e9).c_str(),
                  ratio(max_over_mean(k)).c_str());
      const int slow = most_often_slowest(k);
      std::string line = std::to_string(k.instances) +
                         " kernels run by several GPUs: " + std::to_string(k.equal_instances) +
                         " equal, max/min mean " + ratio(k.mean_spread) + " worst " +
                         ratio(k.worst_spread);
      if (slow >= 0)
        line += "; slowest most often: " + k.gpus[static_cast<std::size_t>(slow)].name + " (" +
                std::to_string(k.gpus[static_cast<std::size_t>(slow)].slowest) + ")";
      if (k.symmetric_mirrors > 0)
        line +=
            "; rank symmetry: " + std::to_string(k.symmetric_mirrors) + " mirrored GPUs not drawn";
      ImGui::TextDisabled("%s", line.c_str());
      ImGui::EndGroup();
    }
    ImGui::PopID();
  }
}

}  // namespace

// [SECTION] Statistics
// ------------------------------------------------------------------------------

void draw_stats_view(const Document& doc) {
  const StatsModel& st = doc.stats;
  const prof::Summary& s = st.summary;
  ImGui::Text("%s", st.label.empty() ? doc.label.c_str() : st.label.c_str());
  if (ImGui::BeginTable("figures", 2, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg)) {
    figure("step time (median of steps 2..N)",
           s.step_time_s > 0 ? format_time(s.step_time_s * 1e9) : "n/a (no ProfilerStep#N)");
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f samples/s", s.samples_per_s);
    figure("throughput", s.samples_per_s > 0 ? buf : "n/a (samples per step unknown)");
    figure("achieved (executed FLOPs)",
           st.achieved_flops_per_s > 0 ? format_rate(st.achieved_flops_per_s, "FLOP/s") : "n/a");
    figure("MFU", st.mfu >= 0 ? pct(st.mfu) : "n/a (GPU peak unknown)");
    if (s.hfu > 0) figure("HFU (recompute included)", pct(s.hfu));
    figure("exposed communication (sum of GPUs)",
           format_time(s.exposed_comm_s * 1e9) + " per step");
    figure("overlapped communication", format_time(s.overlapped_comm_s * 1e9) + " per step");
    figure("GIL wait of host threads (sum)", format_time(st.host_gil_wait_s * 1e9) + " per step");
    if (ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      ImGui::TextUnformatted("Time host threads spend in \"GIL wait\" events, per step:");
      for (const StatsModel::ThreadWait& w : st.gil_wait_by_thread)
        ImGui::Text("  %s  %s", format_time(w.wait_s * 1e9).c_str(), w.name.c_str());
      if (st.gil_wait_by_thread.empty()) ImGui::TextUnformatted("  (no GIL waits)");
      ImGui::EndTooltip();
    }
    if (!st.gil_wait_by_thread.empty()) {
      figure("  most waiting thread", format_time(st.gil_wait_by_thread.front().wait_s * 1e9) +
                                          " per step  " + st.gil_wait_by_thread.front().name);
    }
    figure("GPU idle on GIL wait (sum of GPUs)",
           format_time(st.gpu_gil_wait_s * 1e9) +
               " per step (the GPU has nothing to run while its threads wait for the GIL)");
    figure("bubble (mean idle fraction)", pct(st.bubble_fraction));
    if (s.imbalance > 0) {
      std::snprintf(buf, sizeof buf, "%.2fx", s.imbalance);
      figure("memory imbalance (max / mean peak)", buf);
    }
    for (const std::string& n : s.notes) figure("note", n);
    ImGui::EndTable();
  }
  draw_utilisation_by_step(s);
  ImGui::Separator();
  ImGui::Text("Per GPU, one step (window %s):", format_time(s.window_s * 1e9).c_str());
  parts_legend();
  double scale = 0;
  for (const GpuStats& g : st.gpus) scale = std::max(scale, g.window_s);
  const float bar_w = std::max(ImGui::GetContentRegionAvail().x - 520, 200.0f);
  if (ImGui::BeginTable(
          "per_gpu", 5,
          ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY)) {
    ImGui::TableSetupColumn("GPU");
    ImGui::TableSetupColumn("step split");
    ImGui::TableSetupColumn("busy");
    ImGui::TableSetupColumn("bubble");
    ImGui::TableSetupColumn("role");
    ImGui::TableHeadersRow();
    for (std::size_t i = 0; i < st.gpus.size(); ++i) {
      const GpuStats& g = st.gpus[i];
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      ImGui::TextUnformatted(g.name.c_str());
      ImGui::TableSetColumnIndex(1);
      ImGui::PushID(static_cast<int>(i));
      breakdown_bar(g, bar_w, ImGui::GetFontSize() + 6, scale);
      ImGui::PopID();
      ImGui::TableSetColumnIndex(2);
      ImGui::TextUnformatted(pct(s.per_gpu[i].busy_fraction).c_str());
      ImGui::TableSetColumnIndex(3);
      ImGui::TextUnformatted(pct(g.bubble_fraction).c_str());
      ImGui::TableSetColumnIndex(4);
      ImGui::TextColored(ImVec4(1, 0.84f, 0.31f, 1), "%s", g.role.c_str());
    }
    ImGui::EndTable();
  }
}

// [SECTION] Compare
// ---------------------------------------------------------------------------------

void draw_compare_view(const std::vector<const Document*>& docs, CompareState* st,
                       TimelineSelection* selection) {
  if (docs.size() < 2) {
    ImGui::TextWrapped(
        "Open two or three traces (simview A.json B.json [C.json]) or press \"Run launch / GIL "
        "variants\" in the scenario panel to compare them here.");
    return;
  }
  const std::size_t n = std::min<std::size_t>(docs.size(), 3);
  st->timelines.resize(n);
  std::vector<const TimelineModel*> models;
  for (std::size_t i = 0; i < n; ++i) models.push_back(&docs[i]->timeline);
  // Alignment: first events, or the start of a step every trace has (sim vs real: start-up and
  // warm-up differ, the steps do not).
  const std::vector<std::int64_t> steps = common_steps(models);
  if (!steps.empty()) {
    const std::string current =
        st->align_step > 0 ? "step " + std::to_string(st->align_step) : "first events";
    ImGui::SetNextItemWidth(150);
    if (ImGui::BeginCombo("align", current.c_str())) {
      if (ImGui::Selectable("first events", st->align_step == 0)) {
        st->align_step = 0;
        st->fit_pending = true;
      }
      for (const std::int64_t k : steps) {
        if (ImGui::Selectable(("step " + std::to_string(k)).c_str(), st->align_step == k)) {
          st->align_step = k;
          st->fit_pending = true;
        }
      }
      ImGui::EndCombo();
    }
  }
  if (st->gpu_strips < 0) {
    st->gpu_strips = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (docs[i]->timeline.gpus.size() >= 8) st->gpu_strips = 1;
  }
  if (!steps.empty()) ImGui::SameLine(0, 20);
  bool strips = st->gpu_strips == 1;
  if (ImGui::Checkbox("one strip per GPU", &strips)) {
    for (TimelineView& tv : st->timelines) tv.collapse.gpu_collapsed.clear();
  }
  st->gpu_strips = strips ? 1 : 0;
  const std::vector<double> offsets = align_offsets_ns(models, st->align_step);
  if (st->fit_pending) {
    TimeNs longest = 1;
    for (std::size_t i = 0; i < n; ++i)
      longest = std::max(longest, docs[i]->timeline.t_max - docs[i]->timeline.t_min -
                                      static_cast<TimeNs>(offsets[i]));
    const float w = std::max(ImGui::GetContentRegionAvail().x - st->timelines[0].label_width -
                                 ImGui::GetStyle().ScrollbarSize,
                             50.0f);
    fit(&st->view, 0, longest, w);
    st->fit_pending = false;
  }
  // The difference table takes what it needs; the timelines share the rest.
  const std::vector<const StatsModel*> stats = [&] {
    std::vector<const StatsModel*> v;
    for (std::size_t i = 0; i < n; ++i) v.push_back(&docs[i]->stats);
    return v;
  }();
  const std::vector<CompareRow> rows = compare_table(stats);
  const float line_h = ImGui::GetFontSize() + 6;
  decide_kernel_panel(docs, n, st);
  const float panel_h =
      line_h + (st->kernel_panel == 1 ? static_cast<float>(st->filters.size()) *
                                            (line_h + 4 + static_cast<float>(n) * (kKernelBarH + 4))
                                      : 0.0f);
  const float table_h = (rows.size() + 2) * line_h + 8 + panel_h;
  const float each =
      std::max((ImGui::GetContentRegionAvail().y - table_h) / static_cast<float>(n) - 24, 80.0f);
  for (std::size_t i = 0; i < n; ++i) {
    const Document& d = *docs[i];
    ImGui::TextColored(ImVec4(0.6f, 0.85f, 1, 1), "%c  %s", static_cast<char>('A' + i),
                       d.label.c_str());
    ImGui::SameLine();
    ImGui::TextDisabled("  %s   step %s", d.stats.label.c_str(),
                        format_time(d.summary.step_time_s * 1e9).c_str());
    TimelineView& tv = st->timelines[i];
    tv.metrics.compact = true;
    tv.metrics.max_rows = 1;
    tv.metrics.row_h = 14;
    tv.metrics.lane_gap = 1;
    tv.metrics.gpu_header_h = 18;
    tv.selection = selection;
    tv.set_fit_pending(false);  // the shared view is fitted above, once for all traces
    if (st->gpu_strips == 1) tv.collapse.gpu_collapsed.assign(d.timeline.gpus.size(), true);
    // This trace's view is the shared one shifted by its offset; a pan or zoom made in it goes
    // back to the shared view, so every trace follows.
    TimeView mine = st->view;
    mine.start_ns += offsets[i];
    tv.draw(d, &mine, each, d.label.c_str());
    st->view.start_ns = mine.start_ns - offsets[i];
    st->view.ns_per_px = mine.ns_per_px;
  }
  draw_kernel_panel(docs, n, st);
  if (ImGui::BeginTable(
          "diff", static_cast<int>(n) + 2,
          ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders)) {
    ImGui::TableSetupColumn("metric");
    static constexpr const char* kNames[] = {"A", "B", "C"};
    for (std::size_t i = 0; i < n; ++i) ImGui::TableSetupColumn(kNames[i]);
    ImGui::TableSetupColumn(n == 2 ? "B vs A" : "C vs A");
    ImGui::TableHeadersRow();
    for (const CompareRow& r : rows) {
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      ImGui::TextUnformatted(r.metric.c_str());
      for (std::size_t i = 0; i < n; ++i) {
        ImGui::TableSetColumnIndex(static_cast<int>(i) + 1);
        ImGui::TextUnformatted(r.values[i].c_str());
      }
      ImGui::TableSetColumnIndex(static_cast<int>(n) + 1);
      if (!r.delta.empty()) {
        const bool better = (r.raw.back() < r.raw.front()) == r.lower_is_better;
        const bool same = r.raw.back() == r.raw.front();
        ImGui::TextColored(same
                               ? ImVec4(0.8f, 0.8f, 0.8f, 1)
                               : (better ? ImVec4(0.4f, 0.9f, 0.4f, 1) : ImVec4(1, 0.45f, 0.4f, 1)),
                           "%s", r.delta.c_str());
      }
    }
    ImGui::EndTable();
  }
}

}  // namespace csim::gui
