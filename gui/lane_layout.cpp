// Lane layout and vertical hit testing (lane_layout.hpp).
#include "gui/lane_layout.hpp"

#include <algorithm>

namespace csim::gui {

void CollapseState::toggle_node(int i) {
  if (i >= static_cast<int>(node_collapsed.size())) node_collapsed.resize(i + 1, false);
  node_collapsed[i] = !node_collapsed[i];
}

void CollapseState::toggle_gpu(int i) {
  if (i >= static_cast<int>(gpu_collapsed.size())) gpu_collapsed.resize(i + 1, false);
  gpu_collapsed[i] = !gpu_collapsed[i];
}

LaneLayout layout_lanes(const TimelineModel& m, const CollapseState& c, const LayoutMetrics& k) {
  LaneLayout l;
  l.lane_mid_y.assign(m.lanes.size(), -1.0f);
  float y = 0;
  // A trace with a single node shows no node header: the GPU headers already name it.
  const bool node_headers = m.nodes.size() > 1;
  for (std::size_t n = 0; n < m.nodes.size(); ++n) {
    const NodeGroup& node = m.nodes[n];
    float node_mid = -1;
    if (node_headers) {
      l.items.push_back(
          LayoutItem{ItemKind::kNodeHeader, static_cast<int>(n), y, k.node_header_h, 0});
      node_mid = y + k.node_header_h / 2;
      y += k.node_header_h;
      if (c.node(static_cast<int>(n))) {
        for (const int g : node.gpus) {
          for (const int lane : m.gpus[g].lanes) l.lane_mid_y[lane] = node_mid;
        }
        continue;
      }
    }
    for (const int g : node.gpus) {
      l.items.push_back(LayoutItem{ItemKind::kGpuHeader, g, y, k.gpu_header_h, 0});
      const float gpu_mid = y + k.gpu_header_h / 2;
      y += k.gpu_header_h;
      const bool collapsed = c.gpu(g);
      for (const int lane : m.gpus[g].lanes) {
        const Lane& ln = m.lanes[lane];
        if (k.compact && !prof::is_gpu_lane(ln.role) && !ln.has_gil_wait) continue;
        if (collapsed) {
          l.lane_mid_y[lane] = gpu_mid;
          continue;
        }
        const int rows = std::clamp(static_cast<int>(m.lanes[lane].rows.size()), 1, k.max_rows);
        const float h = rows * k.row_h + k.lane_gap;
        l.items.push_back(LayoutItem{ItemKind::kLane, lane, y, h, rows});
        l.lane_mid_y[lane] = y + k.row_h / 2;
        y += h;
      }
    }
  }
  l.total_h = y;
  return l;
}

int item_at(const LaneLayout& l, float y) {
  // Items are contiguous and sorted by y: the last item starting at or above y.
  const auto it = std::upper_bound(l.items.begin(), l.items.end(), y,
                                   [](float v, const LayoutItem& item) { return v < item.y; });
  if (it == l.items.begin()) return -1;
  const auto k = static_cast<int>(it - l.items.begin()) - 1;
  return y < l.items[k].y + l.items[k].h ? k : -1;
}

int row_at(const LayoutItem& item, float y, const LayoutMetrics& k) {
  if (item.kind != ItemKind::kLane) return -1;
  const float dy = y - item.y;
  if (dy < 0) return -1;
  const int r = static_cast<int>(dy / k.row_h);
  return r < item.rows ? r : -1;
}

}  // namespace csim::gui
