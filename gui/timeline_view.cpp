// The timeline widget (timeline_view.hpp).
//
// Index:
//  [SECTION] Helpers
//  [SECTION] Ruler, legend, details
//  [SECTION] draw
//  [SECTION] Headers and lanes
//  [SECTION] Flows
//  [SECTION] Input
#include "gui/timeline_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <imgui.h>

#include "gui/event_style.hpp"

namespace csim::gui {
namespace {

// [SECTION] Helpers
// ---------------------------------------------------------------------------------

constexpr float kRulerH = 22;
constexpr float kStepsH = 18;
constexpr Rgba kGpuLaneBg = rgba(38, 40, 48);
constexpr Rgba kHostLaneBg = rgba(48, 48, 56);
constexpr Rgba kHeaderBg = rgba(52, 54, 66);
constexpr Rgba kNodeBg = rgba(66, 60, 84);
constexpr Rgba kGridCol = rgba(255, 255, 255, 22);
constexpr Rgba kSelectCol = rgba(255, 255, 255);
constexpr Rgba kFlowCol = rgba(255, 235, 59);

// A right- or down-pointing triangle for collapsible headers (the default font has no arrows).
void draw_arrow(ImDrawList* dl, float x, float y, float size, bool open, ImU32 col) {
  if (open) {
    dl->AddTriangleFilled(ImVec2(x, y), ImVec2(x + size, y), ImVec2(x + size / 2, y + size * 0.8f),
                          col);
  } else {
    dl->AddTriangleFilled(ImVec2(x, y), ImVec2(x + size * 0.8f, y + size / 2), ImVec2(x, y + size),
                          col);
  }
}

void clipped_text(ImDrawList* dl, float x, float y, float x_max, ImU32 col, const char* text) {
  const ImVec4 clip(x, y - 2, x_max, y + ImGui::GetFontSize() + 2);
  dl->AddText(ImGui::GetFont(), ImGui::GetFontSize(), ImVec2(x, y), col, text, nullptr, 0.0f,
              &clip);
}

const prof::GpuSummary* gpu_summary(const Document& doc, std::int32_t pid) {
  for (const prof::GpuSummary& g : doc.summary.per_gpu) {
    if (g.pid == pid) return &g;
  }
  return nullptr;
}

}  // namespace

// [SECTION] Ruler, legend, details
// ------------------------------------------------------------------

void draw_time_ruler(float x0, float y0, float width, float h, const TimeView& rel) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x0 + width, y0 + h), rgba(28, 28, 32));
  dl->PushClipRect(ImVec2(x0, y0), ImVec2(x0 + width, y0 + h), true);
  for (const Tick& t : ruler_ticks(rel, width, 0.0, 90)) {
    const float x = x0 + static_cast<float>(rel.x_of(t.t_ns));
    dl->AddLine(ImVec2(x, y0 + h - (t.major ? 9.0f : 4.0f)), ImVec2(x, y0 + h),
                rgba(200, 200, 200));
    if (t.major) dl->AddText(ImVec2(x + 3, y0 + 2), rgba(220, 220, 220), t.label.c_str());
  }
  dl->PopClipRect();
  dl->AddLine(ImVec2(x0, y0 + h - 1), ImVec2(x0 + width, y0 + h - 1), rgba(90, 90, 100));
}

void draw_class_legend() {
  using prof::EventClass;
  static constexpr EventClass kShown[] = {EventClass::kCompute, EventClass::kCommunication,
                                          EventClass::kCopy,    EventClass::kHost,
                                          EventClass::kGilWait, EventClass::kAnnotation};
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float sz = ImGui::GetFontSize() * 0.8f;
  auto item = [&](Rgba c, const char* label) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    dl->AddRectFilled(ImVec2(p.x, p.y + 2), ImVec2(p.x + sz, p.y + 2 + sz), c);
    ImGui::Dummy(ImVec2(sz + 2, sz));
    ImGui::SameLine();
    ImGui::TextUnformatted(label);
    ImGui::SameLine(0, 14);
  };
  for (const EventClass c : kShown) item(class_colour(c), prof::to_string(c));
  item(folded_colour(EventClass::kCompute), "folded (< 3 px)");
  item(kGpuLaneBg, "idle GPU");
  ImGui::NewLine();
}

void draw_details_table(const std::vector<std::pair<std::string, std::string>>& rows,
                        const char* id) {
  if (!ImGui::BeginTable(id, 2, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg)) return;
  for (const auto& [k, v] : rows) {
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    ImGui::TextDisabled("%s", k.c_str());
    ImGui::TableSetColumnIndex(1);
    ImGui::TextUnformatted(v.c_str());
  }
  ImGui::EndTable();
}

// [SECTION] draw
// ------------------------------------------------------------------------------------

void TimelineView::draw(const Document& doc, TimeView* view, float height, const char* id) {
  counters_ = {};
  const TimelineModel& m = doc.timeline;
  layout_ = layout_lanes(m, collapse, metrics);
  ImGui::PushID(id);
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float h = std::max(height > 0 ? height : avail.y, 40.0f);
  const float scrollbar = ImGui::GetStyle().ScrollbarSize;
  plot_w_ = std::max(avail.x - label_width - scrollbar, 50.0f);
  if (fit_pending_) {
    fit(view, 0, m.t_max - m.t_min, plot_w_);
    fit_pending_ = false;
  }
  const ImVec2 top = ImGui::GetCursorScreenPos();
  const float steps_h = m.steps.empty() ? 0 : kStepsH;
  const float ruler_h = show_ruler ? kRulerH + steps_h : 0;
  if (show_ruler) {
    draw_time_ruler(top.x + label_width, top.y, plot_w_, kRulerH, *view);
    if (steps_h > 0) draw_step_strip(doc, top.x, top.y + kRulerH, steps_h, *view);
    ImGui::Dummy(ImVec2(avail.x, ruler_h));
  }

  ImGui::BeginChild("lanes", ImVec2(avail.x, h - ruler_h), false,
                    ImGuiWindowFlags_NoScrollWithMouse);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();  // content top-left, already scrolled
  const float scroll = ImGui::GetScrollY();
  const float visible_h = ImGui::GetWindowHeight();
  const float plot_x0 = origin.x + label_width;
  content_x_ = origin.x;
  content_y_ = origin.y;
  TimeView abs = *view;  // absolute trace time for the model's queries
  abs.start_ns += static_cast<double>(m.t_min);

  // What is under the mouse (computed before drawing so the hovered lane can highlight it).
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  hover_lane_ = hover_row_ = hover_span_ = -1;
  const bool hovered = ImGui::IsWindowHovered();
  if (hovered && mouse.x >= plot_x0 && mouse.x < plot_x0 + plot_w_) {
    const int it = item_at(layout_, mouse.y - origin.y);
    if (it >= 0 && layout_.items[it].kind == ItemKind::kLane) {
      const LayoutItem& li = layout_.items[it];
      const int r = row_at(li, mouse.y - origin.y, metrics);
      if (r >= 0) {
        hover_lane_ = li.index;
        hover_row_ = r;
        hover_span_ =
            span_at(m.lanes[li.index].rows[r], abs.time_at(mouse.x - plot_x0), 2 * abs.ns_per_px);
      }
    }
  }

  // Grid lines at the ruler's major ticks.
  for (const Tick& t : ruler_ticks(*view, plot_w_, 0.0, 90)) {
    if (!t.major) continue;
    const float x = plot_x0 + static_cast<float>(view->x_of(t.t_ns));
    dl->AddLine(ImVec2(x, origin.y + scroll), ImVec2(x, origin.y + scroll + visible_h), kGridCol);
  }

  for (const LayoutItem& item : layout_.items) {
    if (item.y + item.h < scroll || item.y > scroll + visible_h) continue;
    const float y = origin.y + item.y;
    if (item.kind == ItemKind::kLane) {
      draw_lane(doc, item, origin.x, y, abs);
    } else {
      draw_header(doc, item, origin.x, y, label_width + plot_w_, abs);
    }
  }
  draw_flows(doc, plot_x0, origin.y, abs);

  // Cursor line and box-zoom rectangle.
  if (hovered && mouse.x >= plot_x0) {
    dl->AddLine(ImVec2(mouse.x, origin.y + scroll), ImVec2(mouse.x, origin.y + scroll + visible_h),
                rgba(255, 255, 255, 60));
  }
  if (boxing_) {
    const float x0 = std::min(press_x_, mouse.x), x1 = std::max(press_x_, mouse.x);
    dl->AddRectFilled(ImVec2(x0, origin.y + scroll), ImVec2(x1, origin.y + scroll + visible_h),
                      rgba(100, 160, 255, 50));
    const std::string len = format_time((x1 - x0) * view->ns_per_px);
    dl->AddText(ImVec2(x0 + 4, origin.y + scroll + 4), rgba(255, 255, 255), len.c_str());
  }

  ImGui::Dummy(ImVec2(avail.x - scrollbar, std::max(layout_.total_h, 1.0f)));
  handle_input(doc, view, plot_x0, origin.y);
  ImGui::EndChild();
  ImGui::PopID();
}

void TimelineView::draw_step_strip(const Document& doc, float x, float y, float h,
                                   const TimeView& rel) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float px0 = x + label_width;
  dl->AddText(ImVec2(x + 8, y + (h - ImGui::GetFontSize()) / 2), rgba(200, 200, 200), "steps");
  dl->PushClipRect(ImVec2(px0, y), ImVec2(px0 + plot_w_, y + h), true);
  const double origin = static_cast<double>(doc.timeline.t_min);
  for (std::size_t i = 0; i < doc.timeline.steps.size(); ++i) {
    const StepMark& st = doc.timeline.steps[i];
    const float a = px0 + static_cast<float>(rel.x_of(static_cast<double>(st.start) - origin));
    const float b = px0 + static_cast<float>(rel.x_of(static_cast<double>(st.end) - origin));
    if (b < px0 || a > px0 + plot_w_) continue;
    const Rgba col = i % 2 == 0 ? rgba(120, 108, 70) : rgba(96, 86, 56);
    dl->AddRectFilled(ImVec2(a, y + 1), ImVec2(std::max(b, a + 1), y + h - 1), col);
    const std::string label =
        "step " + std::to_string(st.n) + "  " + format_time(static_cast<double>(st.end - st.start));
    clipped_text(dl, std::max(a, px0) + 4, y + (h - ImGui::GetFontSize()) / 2, b - 2,
                 rgba(250, 240, 210), label.c_str());
  }
  dl->PopClipRect();
}

// [SECTION] Headers and lanes
// -----------------------------------------------------------------------

void TimelineView::draw_header(const Document& doc, const LayoutItem& item, float x, float y,
                               float w, const TimeView& abs) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const TimelineModel& m = doc.timeline;
  const float fh = ImGui::GetFontSize();
  const float ty = y + (item.h - fh) / 2;
  if (item.kind == ItemKind::kNodeHeader) {
    const NodeGroup& node = m.nodes[item.index];
    dl->AddRectFilled(ImVec2(x, y), ImVec2(x + w, y + item.h - 1), kNodeBg);
    draw_arrow(dl, x + 4, ty + 2, fh * 0.7f, !collapse.node(item.index), rgba(230, 230, 230));
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s  (%zu GPUs)", node.name.c_str(), node.gpus.size());
    dl->AddText(ImVec2(x + 6 + fh, ty), rgba(240, 240, 240), buf);
    return;
  }
  const GpuGroup& g = m.gpus[item.index];
  const bool collapsed = collapse.gpu(item.index);
  dl->AddRectFilled(ImVec2(x, y), ImVec2(x + w, y + item.h - 1), kHeaderBg);
  draw_arrow(dl, x + 12, ty + 2, fh * 0.7f, !collapsed, rgba(230, 230, 230));
  clipped_text(dl, x + 14 + fh, ty, x + label_width - 4, rgba(240, 240, 240), g.name.c_str());
  const float px0 = x + label_width;
  if (collapsed) {
    // One strip with the top row of every GPU stream, so a collapsed GPU still shows when it works.
    // Drawn in the summary's priority (docs/summary.md, "Time split"): other events (a stream's
    // waits), then communication, copies and compute on top, so a comm stream's long wait does
    // not hide the kernels running meanwhile on the compute stream.
    items_.clear();
    for (const int lane : g.lanes) {
      const Lane& ln = m.lanes[lane];
      if (!prof::is_gpu_lane(ln.role) || ln.rows.empty()) continue;
      fold_row_into(ln.rows[0], abs, plot_w_, 2, &items_);
    }
    const auto rank = [](prof::EventClass c) {
      return c == prof::EventClass::kCompute         ? 3
             : c == prof::EventClass::kCopy          ? 2
             : c == prof::EventClass::kCommunication ? 1
                                                     : 0;
    };
    for (int pass = 0; pass < 4; ++pass) {
      for (const DrawItem& d : items_) {
        if (rank(d.cls) != pass) continue;
        const float a = px0 + static_cast<float>(std::max(d.x0, -1.0));
        const float b = px0 + static_cast<float>(std::min(d.x1, static_cast<double>(plot_w_) + 1));
        dl->AddRectFilled(ImVec2(a, y + 4), ImVec2(std::max(b, a + 1), y + item.h - 5),
                          class_colour(d.cls));
      }
    }
    return;
  }
  // Expanded: the GPU's busy fraction, peak memory and DataParallel role, from the summary.
  if (const prof::GpuSummary* s = gpu_summary(doc, g.pid)) {
    std::string info =
        "busy " + std::to_string(static_cast<int>(std::lround(s->busy_fraction * 100))) + " %";
    if (s->has_memory_data) {
      info += "   peak " + format_bytes(static_cast<double>(s->peak_bytes));
      if (s->capacity_bytes > 0)
        info += " / " + format_bytes(static_cast<double>(s->capacity_bytes));
    }
    const bool d0 = doc.summary.device_ids0 >= 0 && s->gpu == doc.summary.device_ids0;
    const bool od = doc.summary.output_device >= 0 && s->gpu == doc.summary.output_device;
    if (d0 || od)
      info += d0 && od ? "   device_ids[0] + output_device"
                       : (d0 ? "   device_ids[0]" : "   output_device");
    clipped_text(dl, px0 + 6, ty, px0 + plot_w_,
                 (d0 || od) ? rgba(255, 213, 79) : rgba(190, 190, 200), info.c_str());
  }
}

void TimelineView::draw_lane(const Document& doc, const LayoutItem& item, float x, float y,
                             const TimeView& abs) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const Lane& lane = doc.timeline.lanes[item.index];
  const float fh = ImGui::GetFontSize();
  const float rh = metrics.row_h;
  const float px0 = x + label_width;
  const bool gpu_lane = prof::is_gpu_lane(lane.role);
  // GPU streams get a background, so idle time reads as dark gaps; host threads only a baseline
  // (every filled pixel costs frame time on a software rasteriser).
  if (gpu_lane) {
    dl->AddRectFilled(ImVec2(px0, y), ImVec2(px0 + plot_w_, y + item.h - metrics.lane_gap),
                      kGpuLaneBg);
  } else {
    dl->AddLine(ImVec2(px0, y + item.h - metrics.lane_gap),
                ImVec2(px0 + plot_w_, y + item.h - metrics.lane_gap), kHostLaneBg);
  }
  // Label column: a role swatch and the lane's name.
  dl->AddRectFilled(ImVec2(x + 22, y + rh / 2 - 4), ImVec2(x + 30, y + rh / 2 + 4),
                    role_colour(lane.role));
  std::string name = lane.name;
  if (static_cast<int>(lane.rows.size()) > item.rows) {
    name += "  (+" + std::to_string(lane.rows.size() - item.rows) + " rows)";
  }
  clipped_text(dl, x + 35, y + (rh - fh) / 2, x + label_width - 4, rgba(215, 215, 220),
               name.c_str());

  dl->PushClipRect(ImVec2(px0, y), ImVec2(px0 + plot_w_, y + item.h), true);
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const int selected = selection != nullptr && selection->doc == &doc ? selection->event : -1;
  for (int r = 0; r < item.rows; ++r) {
    const Row& row = lane.rows[r];
    items_.clear();
    fold_row_into(row, abs, plot_w_, min_event_px, &items_);
    const float y0 = y + r * rh, y1 = y0 + rh - 1;
    for (const DrawItem& d : items_) {
      const float a = px0 + static_cast<float>(std::max(d.x0, -2.0));
      const float b = px0 + static_cast<float>(std::min(d.x1, static_cast<double>(plot_w_) + 2));
      const bool fold = d.count > 1;
      const Rgba col = fold ? folded_colour(d.cls) : class_colour(d.cls);
      dl->AddRectFilled(ImVec2(a, y0), ImVec2(b, y1), col);
      ++counters_.draw_items;
      if (fold) {
        counters_.folded_events += d.count;
        if (item.index == hover_lane_ && r == hover_row_ && mouse.x >= a && mouse.x <= b) {
          const Span& s0 = row.spans[d.first];
          const Span& s1 = row.spans[d.first + d.count - 1];
          ImGui::BeginTooltip();
          ImGui::Text("%u events folded into %s", d.count,
                      format_time(static_cast<double>(s1.end - s0.start)).c_str());
          ImGui::TextDisabled("zoom in (wheel) to see them one by one");
          ImGui::EndTooltip();
          hover_span_ = -1;  // the fold's tooltip replaces the event one
        }
        continue;
      }
      const Span& s = row.spans[d.first];
      if (static_cast<int>(s.event) == selected)
        dl->AddRect(ImVec2(a, y0), ImVec2(b, y1), kSelectCol, 0, 0, 2);
      if (b - a > 28) {
        const prof::TraceEvent& e = doc.trace.events[s.event];
        clipped_text(dl, std::max(a, px0) + 3, y0 + (rh - 1 - fh) / 2, b - 2, text_on(col),
                     e.name.c_str());
        ++counters_.labels;
      }
    }
  }
  dl->PopClipRect();

  if (item.index == hover_lane_ && hover_span_ >= 0) {
    const prof::TraceEvent& e = doc.trace.events[lane.rows[hover_row_].spans[hover_span_].event];
    ImGui::BeginTooltip();
    draw_details_table(event_details(doc.trace, e, doc.timeline.t_min, false), "tip");
    ImGui::EndTooltip();
  }
}

// [SECTION] Flows
// -----------------------------------------------------------------------------------

void TimelineView::draw_flows(const Document& doc, float plot_x0, float top_y,
                              const TimeView& abs) {
  if (selection == nullptr || selection->doc != &doc || selection->event < 0) return;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->PushClipRect(
      ImVec2(plot_x0, top_y + ImGui::GetScrollY()),
      ImVec2(plot_x0 + plot_w_, top_y + ImGui::GetScrollY() + ImGui::GetWindowHeight()), true);
  for (const int fi : selection->flows) {
    const prof::FlowEvent& f = doc.trace.flows[fi];
    const int la = doc.timeline.lane_of(f.from_pid, f.from_tid);
    const int lb = doc.timeline.lane_of(f.to_pid, f.to_tid);
    if (la < 0 || lb < 0 || layout_.lane_mid_y[la] < 0 || layout_.lane_mid_y[lb] < 0) continue;
    const ImVec2 p0(plot_x0 + static_cast<float>(abs.x_of(static_cast<double>(f.from_ts_ns))),
                    top_y + layout_.lane_mid_y[la]);
    const ImVec2 p1(plot_x0 + static_cast<float>(abs.x_of(static_cast<double>(f.to_ts_ns))),
                    top_y + layout_.lane_mid_y[lb]);
    const float bend = std::clamp(std::fabs(p1.x - p0.x) * 0.5f + 10.0f, 10.0f, 80.0f);
    dl->AddBezierCubic(p0, ImVec2(p0.x + bend, p0.y), ImVec2(p1.x - bend, p1.y), p1, kFlowCol,
                       2.0f);
    dl->AddCircleFilled(p0, 3.5f, kFlowCol);
    dl->AddTriangleFilled(ImVec2(p1.x, p1.y), ImVec2(p1.x - 9, p1.y - 5),
                          ImVec2(p1.x - 9, p1.y + 5), kFlowCol);
  }
  dl->PopClipRect();
}

// [SECTION] Input
// -----------------------------------------------------------------------------------

void TimelineView::handle_input(const Document& doc, TimeView* view, float plot_x0, float top_y) {
  ImGuiIO& io = ImGui::GetIO();
  const bool hovered = ImGui::IsWindowHovered();
  const ImVec2 mouse = io.MousePos;
  const bool in_plot = mouse.x >= plot_x0 && mouse.x < plot_x0 + plot_w_;

  if (hovered && io.MouseWheel != 0) {
    if (io.KeyShift) {
      ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseWheel * 3 * metrics.row_h);
    } else if (in_plot) {
      zoom_at(view, mouse.x - plot_x0, std::pow(1.25, io.MouseWheel));
    }
  }
  if (hovered && io.MouseWheelH != 0) pan_by(view, io.MouseWheelH * 40);

  // Left button: drag pans (both axes); a click without drag selects, or toggles a header.
  if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
    panning_ = true;
    drag_dist_ = 0;
    press_x_ = mouse.x;
    press_y_ = mouse.y;
  }
  if (panning_ && ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
    if (io.MouseDelta.x != 0 || io.MouseDelta.y != 0) {
      pan_by(view, io.MouseDelta.x);
      ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseDelta.y);
      drag_dist_ += std::fabs(io.MouseDelta.x) + std::fabs(io.MouseDelta.y);
    }
  }
  if (panning_ && ImGui::IsMouseReleased(ImGuiMouseButton_Left)) {
    panning_ = false;
    if (drag_dist_ < 3) {
      const int it = item_at(layout_, press_y_ - top_y);
      if (it >= 0 && layout_.items[it].kind == ItemKind::kNodeHeader) {
        collapse.toggle_node(layout_.items[it].index);
      } else if (it >= 0 && layout_.items[it].kind == ItemKind::kGpuHeader) {
        collapse.toggle_gpu(layout_.items[it].index);
      } else if (selection != nullptr && press_x_ >= plot_x0) {
        if (hover_span_ >= 0) {
          const Span& s = doc.timeline.lanes[hover_lane_].rows[hover_row_].spans[hover_span_];
          selection->doc = &doc;
          selection->event = static_cast<int>(s.event);
          selection->flows = flows_of_event(doc.trace, doc.trace.events[s.event]);
        } else {
          *selection = {};
        }
      }
    }
  }

  // Right button: box zoom.
  if (hovered && in_plot && ImGui::IsMouseClicked(ImGuiMouseButton_Right)) {
    boxing_ = true;
    press_x_ = mouse.x;
  }
  if (boxing_ && ImGui::IsMouseReleased(ImGuiMouseButton_Right)) {
    boxing_ = false;
    zoom_to_box(view, press_x_ - plot_x0, mouse.x - plot_x0, plot_w_);
  }

  // Keyboard, while the pointer is over the timeline: F / Home fit, W / S zoom, A / D pan, Esc.
  if (hovered || ImGui::IsWindowFocused()) {
    const double step = std::max<double>(plot_w_ * 0.1, 1);
    if (ImGui::IsKeyPressed('F', false) ||
        ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Home), false)) {
      fit(view, 0, doc.timeline.t_max - doc.timeline.t_min, plot_w_);
    }
    if (ImGui::IsKeyPressed('W')) zoom_at(view, plot_w_ / 2, 1.25);
    if (ImGui::IsKeyPressed('S')) zoom_at(view, plot_w_ / 2, 0.8);
    if (ImGui::IsKeyPressed('A')) pan_by(view, step);
    if (ImGui::IsKeyPressed('D')) pan_by(view, -step);
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape), false) && selection != nullptr)
      *selection = {};
  }
}

}  // namespace csim::gui
