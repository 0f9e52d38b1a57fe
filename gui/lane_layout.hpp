// Vertical layout of the timeline: node headers, GPU headers and lanes (one row per nesting
// depth), with collapsible nodes and GPUs, and the inverse (pixel y → what is there). Plain C++.
#pragma once

#include <cstdint>
#include <vector>

#include "gui/timeline_model.hpp"

namespace csim::gui {

struct LayoutMetrics {
  float node_header_h = 20;  // px
  float gpu_header_h = 20;   // px; a collapsed GPU still shows its header
  float row_h = 18;          // px per nesting row of a lane
  float lane_gap = 3;        // px below each lane
  int max_rows = 6;          // deeper rows are not shown (the lane says how many are hidden)
  bool compact = false;      // only GPU streams and host threads with GIL waits (compare view)
};

struct CollapseState {
  std::vector<bool> node_collapsed;  // by TimelineModel::nodes index (missing = expanded)
  std::vector<bool> gpu_collapsed;   // by TimelineModel::gpus index (missing = expanded)

  bool node(int i) const {
    return i < static_cast<int>(node_collapsed.size()) && node_collapsed[i];
  }
  bool gpu(int i) const { return i < static_cast<int>(gpu_collapsed.size()) && gpu_collapsed[i]; }
  void toggle_node(int i);
  void toggle_gpu(int i);
};

enum class ItemKind : std::uint8_t { kNodeHeader, kGpuHeader, kLane };

struct LayoutItem {
  ItemKind kind = ItemKind::kLane;
  int index = 0;  // into nodes, gpus or lanes, by kind
  float y = 0;    // top, px from the layout's top
  float h = 0;    // height, px
  int rows = 0;   // lanes: rows shown (<= max_rows)
};

struct LaneLayout {
  std::vector<LayoutItem> items;  // top to bottom
  float total_h = 0;
  std::vector<float> lane_mid_y;  // per lane: middle of its first row, or of the header that hides
                                  // it when collapsed (flow arrows end there); -1 when hidden
};

LaneLayout layout_lanes(const TimelineModel& m, const CollapseState& c, const LayoutMetrics& k);

// Index into items of the item at `y` (px from the layout's top), -1 outside every item.
int item_at(const LaneLayout& l, float y);

// The lane row at `y` inside a lane item, or -1 when `y` is in its gap or a hidden row.
int row_at(const LayoutItem& item, float y, const LayoutMetrics& k);

}  // namespace csim::gui
