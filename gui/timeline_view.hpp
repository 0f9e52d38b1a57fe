// The timeline widget (Dear ImGui): time ruler, collapsible node → GPU → lane labels, events
// coloured by class with folding of sub-pixel events, hover tooltip, click selection with flow
// arrows, wheel zoom around the cursor, drag pan, right-drag box zoom, keyboard shortcuts.
// All arithmetic lives in time_axis / timeline_model / lane_layout; this file only draws and
// routes input.
#pragma once

#include <cstddef>
#include <vector>

#include "gui/document.hpp"
#include "gui/lane_layout.hpp"
#include "gui/time_axis.hpp"

namespace csim::gui {

struct TimelineSelection {
  const Document* doc = nullptr;  // which trace the selected event belongs to
  int event = -1;                 // index into doc->trace.events, -1: none
  std::vector<int> flows;         // flows_of_event() of the selection
};

struct FrameCounters {            // what the last draw() produced, for tests and the benchmark
  std::size_t draw_items = 0;     // rectangles drawn for events (folds count once)
  std::size_t folded_events = 0;  // events inside folded blocks
  std::size_t labels = 0;         // event labels drawn
};

class TimelineView {
 public:
  // Draws `doc` in a region `height` px tall (<= 0: the rest of the window) of the current
  // window. `view` is relative to doc.timeline.t_min, so views of several traces can share one.
  void draw(const Document& doc, TimeView* view, float height, const char* id);

  void request_fit() { fit_pending_ = true; }
  void set_fit_pending(bool pending) { fit_pending_ = pending; }
  const FrameCounters& counters() const { return counters_; }
  const LaneLayout& layout() const { return layout_; }
  float plot_width() const { return plot_w_; }
  // Screen position of the lanes' content origin (top-left of the layout, scrolled) in the last
  // frame; the plot starts label_width to its right.
  float content_x() const { return content_x_; }
  float content_y() const { return content_y_; }

  LayoutMetrics metrics;  // row heights; compact mode for the compare view
  CollapseState collapse;
  TimelineSelection* selection = nullptr;  // shared between views (nullptr: no selection)
  float label_width = 230;                 // px, the lane name column
  float min_event_px = 3;                  // narrower events are folded
  bool show_ruler = true;

 private:
  void handle_input(const Document& doc, TimeView* view, float plot_x0, float top_y);
  void draw_header(const Document& doc, const LayoutItem& item, float x, float y, float w,
                   const TimeView& abs);
  void draw_lane(const Document& doc, const LayoutItem& item, float x, float y,
                 const TimeView& abs);
  void draw_step_strip(const Document& doc, float x, float y, float h, const TimeView& rel);
  void draw_flows(const Document& doc, float plot_x0, float top_y, const TimeView& abs);

  bool fit_pending_ = true;
  LaneLayout layout_;
  FrameCounters counters_;
  std::vector<DrawItem> items_;  // reused per row
  float plot_w_ = 0;
  float content_x_ = 0, content_y_ = 0;
  bool panning_ = false;
  bool boxing_ = false;
  float press_x_ = 0, press_y_ = 0;
  float drag_dist_ = 0;
  int hover_lane_ = -1, hover_row_ = -1, hover_span_ = -1;
};

// Draws the time ruler (ticks, labels relative to the view's origin) in a strip `h` px tall.
void draw_time_ruler(float x0, float y0, float width, float h, const TimeView& rel_view);

// The class legend (compute, communication, copy, host, GIL wait, annotation, idle) on one line.
void draw_class_legend();

// A two-column table of event_details() for the tooltip or the details panel.
void draw_details_table(const std::vector<std::pair<std::string, std::string>>& rows,
                        const char* id);

}  // namespace csim::gui
