// Memory view (panels.hpp): stacked allocated bytes per GPU over time.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <imgui.h>

#include "gui/event_style.hpp"
#include "gui/panels.hpp"

namespace csim::gui {
namespace {

constexpr Rgba kCapacityCol = rgba(239, 83, 80);
constexpr Rgba kPeakCol = rgba(255, 255, 255);
constexpr Rgba kReservedCol = rgba(255, 202, 40);  // amber: reserved by the caching allocator
constexpr Rgba kRoleCol = rgba(255, 213, 79);

void dashed_hline(ImDrawList* dl, float x0, float x1, float y, ImU32 col) {
  for (float x = x0; x < x1; x += 10)
    dl->AddLine(ImVec2(x, y), ImVec2(std::min(x + 6, x1), y), col, 1.5f);
}

// Starts the next legend item of `w` px on a new line when the current one has no room for it
// (narrow windows and screenshots: the legend wraps instead of running off the edge).
void wrap_for(float w) {
  if (ImGui::GetContentRegionAvail().x < w) ImGui::NewLine();
}

// A band's legend name and colour: its category's, or the unattributed rest's.
const char* band_name(const MemoryModel& m, const MemoryBand& b) {
  return b.category >= 0 ? m.categories[b.category].c_str() : kUnattributedMemory;
}
Rgba band_colour(const MemoryModel& m, const MemoryBand& b) {
  return memory_category_colour(band_name(m, b));
}

void draw_legend(const MemoryModel& m) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float sz = ImGui::GetFontSize() * 0.8f;
  std::vector<MemoryBand> items;
  for (std::size_t k = 0; k < m.categories.size(); ++k)
    items.push_back(MemoryBand{static_cast<int>(k), 0});
  if (m.has_unattributed) items.push_back(MemoryBand{-1, 0});
  for (const MemoryBand& b : items) {
    const char* name = band_name(m, b);
    wrap_for(sz + 2 + ImGui::GetStyle().ItemSpacing.x + ImGui::CalcTextSize(name).x);
    const ImVec2 p = ImGui::GetCursorScreenPos();
    dl->AddRectFilled(ImVec2(p.x, p.y + 2), ImVec2(p.x + sz, p.y + 2 + sz), band_colour(m, b));
    ImGui::Dummy(ImVec2(sz + 2, sz));
    ImGui::SameLine();
    ImGui::TextUnformatted(name);
    ImGui::SameLine(0, 14);
  }
  wrap_for(26 + ImGui::GetStyle().ItemSpacing.x + ImGui::CalcTextSize("usable capacity").x);
  const ImVec2 p = ImGui::GetCursorScreenPos();
  dashed_hline(dl, p.x, p.x + 24, p.y + sz / 2 + 2, kCapacityCol);
  ImGui::Dummy(ImVec2(26, sz));
  ImGui::SameLine();
  ImGui::TextUnformatted("usable capacity");
  ImGui::SameLine(0, 14);
  wrap_for(26 + ImGui::GetStyle().ItemSpacing.x + ImGui::CalcTextSize("reserved (allocator)").x);
  const ImVec2 q = ImGui::GetCursorScreenPos();
  dl->AddLine(ImVec2(q.x, q.y + sz / 2 + 2), ImVec2(q.x + 24, q.y + sz / 2 + 2), kReservedCol,
              1.5f);
  ImGui::Dummy(ImVec2(26, sz));
  ImGui::SameLine();
  ImGui::TextUnformatted("reserved (allocator)");
  ImGui::NewLine();
}

}  // namespace

void draw_memory_view(const Document& doc, TimeView* view, MemoryViewState* st, float label_width) {
  const MemoryModel& m = doc.memory;
  if (m.gpus.empty()) {
    ImGui::TextWrapped(
        "This trace has no memory counters (PyTorch-profiler traces record memory only with "
        "profile_memory=True); simulated traces always have them.");
    return;
  }
  // Headline: imbalance and the DataParallel roles, the OOM verdict.
  if (m.imbalance > 0) {
    std::string fullest;
    double best = -1;
    for (const GpuMemory& g : m.gpus) {
      if (g.peak_bytes > best) {
        best = g.peak_bytes;
        fullest = g.name;
      }
    }
    ImGui::Text("imbalance (max / mean of peak memory): %.2fx   fullest: %s", m.imbalance,
                fullest.c_str());
  }
  if (doc.summary.device_ids0 >= 0) {
    ImGui::SameLine(0, 30);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kRoleCol),
                       "DataParallel: device_ids[0] = GPU %d (optimizer state, reduced grads), "
                       "output_device = GPU %d "
                       "(gathered outputs, loss)",
                       doc.summary.device_ids0, doc.summary.output_device);
  }
  if (m.oom) {
    ImGui::TextColored(ImVec4(1, 0.35f, 0.3f, 1), "OOM on GPU %d%s%s: short by %s", m.oom->gpu,
                       m.oom->op.empty() ? "" : " at ", m.oom->op.c_str(),
                       format_bytes(static_cast<double>(m.oom->shortfall_bytes)).c_str());
  }
  bool per_gpu = st->scale == MemoryScale::kPerGpu;
  if (ImGui::Checkbox("per-GPU y scale", &per_gpu))
    st->scale = per_gpu ? MemoryScale::kPerGpu : MemoryScale::kShared;
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "Off (default): one scale for every GPU, so equal heights are equal bytes.\n"
        "On: each GPU's lane up to its own peak; heights do not compare across GPUs.");
  ImGui::SameLine(0, 14);
  ImGui::Checkbox("y up to capacity", &st->scale_to_capacity);
  ImGui::SameLine(0, 20);
  draw_legend(m);

  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float plot_w = std::max(avail.x - label_width - ImGui::GetStyle().ScrollbarSize, 50.0f);
  draw_time_ruler(ImGui::GetCursorScreenPos().x + label_width, ImGui::GetCursorScreenPos().y,
                  plot_w, 22, *view);
  ImGui::Dummy(ImVec2(avail.x, 22));

  TimeView abs = *view;
  abs.start_ns += static_cast<double>(doc.timeline.t_min);

  ImGui::BeginChild("memory", ImVec2(0, 0), false);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  for (std::size_t gi = 0; gi < m.gpus.size(); ++gi) {
    const GpuMemory& g = m.gpus[gi];
    const double y_max = memory_y_top(m, gi, st->scale, st->scale_to_capacity);
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float h = st->plot_h;
    const float x0 = p.x + label_width, y0 = p.y + 2, y1 = p.y + h - 4;
    const bool role = g.device_ids0 || g.output_device;
    // Label column.
    dl->AddText(ImVec2(p.x + 4, y0 + 2), rgba(240, 240, 240), g.name.c_str());
    char buf[160];
    std::snprintf(buf, sizeof buf, "peak %s", format_bytes(g.peak_bytes).c_str());
    dl->AddText(ImVec2(p.x + 4, y0 + 20), rgba(200, 200, 210), buf);
    if (g.capacity_bytes > 0) {
      std::snprintf(buf, sizeof buf, "of %s usable (%.0f %%)",
                    format_bytes(static_cast<double>(g.capacity_bytes)).c_str(),
                    g.peak_bytes / static_cast<double>(g.capacity_bytes) * 100);
      dl->AddText(ImVec2(p.x + 4, y0 + 36), rgba(170, 170, 180), buf);
    }
    if (st->scale == MemoryScale::kPerGpu) {
      std::snprintf(buf, sizeof buf, "own y scale: 0 - %s", format_bytes(y_max).c_str());
      dl->AddText(ImVec2(p.x + 4, y0 + 72), rgba(170, 170, 180), buf);
    }
    if (role) {
      const char* r = g.device_ids0 && g.output_device
                          ? "device_ids[0] + output_device"
                          : (g.device_ids0 ? "device_ids[0]" : "output_device");
      dl->AddText(ImVec2(p.x + 4, y0 + 54), kRoleCol, r);
    }
    // Plot.
    dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x0 + plot_w, y1), rgba(30, 30, 36));
    dl->PushClipRect(ImVec2(x0, y0), ImVec2(x0 + plot_w, y1), true);
    auto y_of = [&](double bytes) { return y1 - static_cast<float>(bytes / y_max) * (y1 - y0); };
    for (const MemoryColumn& c : memory_columns(g, abs, plot_w)) {
      double base = 0;
      for (const MemoryBand& b : memory_bands(g, c.sample)) {
        dl->AddRectFilled(ImVec2(x0 + static_cast<float>(c.x0), y_of(base + b.bytes)),
                          ImVec2(x0 + static_cast<float>(std::max(c.x1, c.x0 + 1)), y_of(base)),
                          band_colour(m, b));
        base += b.bytes;
      }
    }
    // Reserved (caching allocator): a step line above the stack; the gap is cached, free memory.
    if (!g.reserved.empty()) {
      float prev_x = x0, prev_y = y_of(0);
      for (std::size_t i = 0; i < g.reserved.size(); ++i) {
        const float x = x0 + static_cast<float>(abs.x_of(static_cast<double>(g.reserved_t[i])));
        if (x > x0 + plot_w) break;
        const float y = y_of(g.reserved[i]);
        const float cx = std::max(x, x0);
        if (cx > prev_x)
          dl->AddLine(ImVec2(prev_x, prev_y), ImVec2(cx, prev_y), kReservedCol, 1.5f);
        if (x >= x0) dl->AddLine(ImVec2(cx, prev_y), ImVec2(cx, y), kReservedCol, 1.5f);
        prev_x = cx;
        prev_y = y;
      }
      dl->AddLine(ImVec2(prev_x, prev_y), ImVec2(x0 + plot_w, prev_y), kReservedCol, 1.5f);
    }
    // GiB gridlines and their labels, over the stack so that they read on any fill.
    const int max_ticks = std::max(1, static_cast<int>((y1 - y0) / 24));
    for (const double tick : memory_ticks(y_max, max_ticks)) {
      const float ty = y_of(tick);
      const std::string label = memory_tick_label(tick, y_max);
      const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
      if (ty - ts.y < y0) continue;  // no room for the label above the lane's top: skip the line
      dl->AddLine(ImVec2(x0, ty), ImVec2(x0 + plot_w, ty), rgba(255, 255, 255, 38));
      dl->AddRectFilled(ImVec2(x0 + 1, ty - ts.y), ImVec2(x0 + 5 + ts.x, ty),
                        rgba(30, 30, 36, 200));
      dl->AddText(ImVec2(x0 + 3, ty - ts.y), rgba(190, 190, 200), label.c_str());
    }
    if (g.capacity_bytes > 0 && g.capacity_bytes <= y_max) {
      dashed_hline(dl, x0, x0 + plot_w, y_of(static_cast<double>(g.capacity_bytes)), kCapacityCol);
    }
    // Peak marker: a downward triangle above the peak and its value.
    const float px = x0 + static_cast<float>(abs.x_of(static_cast<double>(g.peak_t)));
    const float py = std::max(y_of(g.peak_bytes), y0 + 10);
    dl->AddTriangleFilled(ImVec2(px - 5, py - 9), ImVec2(px + 5, py - 9), ImVec2(px, py - 1),
                          kPeakCol);
    std::snprintf(buf, sizeof buf, "peak %s", format_bytes(g.peak_bytes).c_str());
    dl->AddText(ImVec2(px + 7, std::max(py - 16, y0 + 1)), kPeakCol, buf);
    if (m.oom && m.oom->gpu == g.gpu) {
      const float ox = x0 + static_cast<float>(abs.x_of(static_cast<double>(m.oom->at_ns)));
      dl->AddLine(ImVec2(ox, y0), ImVec2(ox, y1), kCapacityCol, 2.5f);
      dl->AddText(ImVec2(ox + 4, y0 + 2), kCapacityCol, "OOM");
    }
    dl->PopClipRect();
    if (role)
      dl->AddRect(ImVec2(x0 - 1, y0 - 1), ImVec2(x0 + plot_w + 1, y1 + 1), kRoleCol, 0, 0, 2);
    // Hover: the breakdown at the cursor.
    if (ImGui::IsWindowHovered() && mouse.x >= x0 && mouse.x < x0 + plot_w && mouse.y >= y0 &&
        mouse.y < y1) {
      dl->AddLine(ImVec2(mouse.x, y0), ImVec2(mouse.x, y1), rgba(255, 255, 255, 90));
      const int s = sample_at(g, abs.time_at(mouse.x - x0));
      if (s >= 0) {
        ImGui::BeginTooltip();
        ImGui::Text("%s at %s", g.name.c_str(),
                    format_time(static_cast<double>(g.t[s] - doc.timeline.t_min)).c_str());
        ImGui::Text("allocated %s", format_bytes(g.allocated[s]).c_str());
        if (!g.reserved.empty()) {
          const double t = abs.time_at(mouse.x - x0);
          const auto it = std::upper_bound(g.reserved_t.begin(), g.reserved_t.end(), t,
                                           [](double v, TimeNs x) { return v < x; });
          if (it != g.reserved_t.begin())
            ImGui::Text(
                "reserved %s (caching allocator)",
                format_bytes(g.reserved[static_cast<std::size_t>(it - g.reserved_t.begin() - 1)])
                    .c_str());
        }
        const std::vector<MemoryBand> bands = memory_bands(g, static_cast<std::size_t>(s));
        for (auto b = bands.rbegin(); b != bands.rend(); ++b) {
          ImGui::Text("  %-16s %s", band_name(m, *b), format_bytes(b->bytes).c_str());
        }
        ImGui::EndTooltip();
      }
      if (ImGui::GetIO().MouseWheel != 0) {
        zoom_at(view, mouse.x - x0, ImGui::GetIO().MouseWheel > 0 ? 1.25 : 0.8);
      }
    }
    ImGui::Dummy(ImVec2(avail.x - ImGui::GetStyle().ScrollbarSize, h));
  }
  if (ImGui::IsWindowHovered() && ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {
    pan_by(view, ImGui::GetIO().MouseDelta.x);
  }
  ImGui::EndChild();
}

}  // namespace csim::gui
