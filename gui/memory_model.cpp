// Memory model: per-GPU stacked series, peaks, roles, decimation (memory_model.hpp).
#include "gui/memory_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace csim::gui {

MemoryModel build_memory(const prof::Trace& trace, const prof::Summary& summary) {
  MemoryModel m;
  // Categories in first-seen order; "allocated" is the total, not a category.
  std::map<std::int32_t, std::vector<const prof::CounterSample*>> by_pid, reserved_of;
  for (const prof::CounterSample& c : trace.counters) {
    if (c.name == prof::kReservedMemoryCounter) reserved_of[c.pid].push_back(&c);
    if (c.name != "memory") continue;
    by_pid[c.pid].push_back(&c);
    for (const auto& [series, value] : c.values) {
      if (series == "allocated") continue;
      if (std::find(m.categories.begin(), m.categories.end(), series) == m.categories.end()) {
        m.categories.push_back(series);
      }
    }
  }
  bool first = true;
  for (auto& [pid, samples] : by_pid) {
    std::stable_sort(samples.begin(), samples.end(),
                     [](const prof::CounterSample* a, const prof::CounterSample* b) {
                       return a->ts_ns < b->ts_ns;
                     });
    GpuMemory g;
    g.pid = pid;
    const prof::ProcessInfo* pi = trace.process(pid);
    g.name = pi != nullptr && !pi->name.empty() ? pi->name : "pid " + std::to_string(pid);
    g.gpu = pi != nullptr ? pi->gpu : -1;
    g.capacity_bytes = pi != nullptr ? pi->capacity_bytes : 0;
    g.by_category.assign(m.categories.size(), {});
    for (const prof::CounterSample* c : samples) {
      g.t.push_back(c->ts_ns);
      double total = 0;
      bool has_total = false;
      for (std::size_t k = 0; k < m.categories.size(); ++k) g.by_category[k].push_back(0);
      for (const auto& [series, value] : c->values) {
        if (series == "allocated") {
          total = value;
          has_total = true;
          continue;
        }
        const auto k = static_cast<std::size_t>(
            std::find(m.categories.begin(), m.categories.end(), series) - m.categories.begin());
        g.by_category[k].back() = value;
      }
      if (!has_total) {
        for (const auto& cat : g.by_category) total += cat.back();
      }
      g.allocated.push_back(total);
      double attributed = 0;
      for (const auto& cat : g.by_category) attributed += cat.back();
      if (total > attributed) m.has_unattributed = true;
      if (total > g.peak_bytes) {
        g.peak_bytes = total;
        g.peak_t = c->ts_ns;
      }
    }
    std::vector<const prof::CounterSample*>& res = reserved_of[pid];
    std::stable_sort(res.begin(), res.end(),
                     [](const prof::CounterSample* a, const prof::CounterSample* b) {
                       return a->ts_ns < b->ts_ns;
                     });
    for (const prof::CounterSample* c : res) {
      for (const auto& [series, value] : c->values) {
        if (series != "reserved") continue;
        g.reserved_t.push_back(c->ts_ns);
        g.reserved.push_back(value);
        g.peak_reserved_bytes = std::max(g.peak_reserved_bytes, value);
      }
    }
    if (!g.t.empty()) {
      m.t_min = first ? g.t.front() : std::min(m.t_min, g.t.front());
      m.t_max = first ? g.t.back() : std::max(m.t_max, g.t.back());
      first = false;
    }
    g.device_ids0 = summary.device_ids0 >= 0 && g.gpu == summary.device_ids0;
    g.output_device = summary.output_device >= 0 && g.gpu == summary.output_device;
    m.max_bytes = std::max(
        {m.max_bytes, g.peak_bytes, g.peak_reserved_bytes, static_cast<double>(g.capacity_bytes)});
    m.gpus.push_back(std::move(g));
  }
  std::stable_sort(m.gpus.begin(), m.gpus.end(), [](const GpuMemory& a, const GpuMemory& b) {
    if ((a.gpu >= 0) != (b.gpu >= 0)) return a.gpu >= 0;
    return a.gpu < b.gpu;
  });
  m.imbalance = summary.imbalance;
  m.oom = summary.oom;
  return m;
}

std::vector<MemoryBand> memory_bands(const GpuMemory& g, std::size_t s) {
  std::vector<MemoryBand> out;
  if (s >= g.allocated.size()) return out;
  double attributed = 0;
  for (std::size_t k = 0; k < g.by_category.size(); ++k) {
    const double v = g.by_category[k][s];
    if (v <= 0) continue;
    out.push_back(MemoryBand{static_cast<int>(k), v});
    attributed += v;
  }
  if (g.allocated[s] > attributed) out.push_back(MemoryBand{-1, g.allocated[s] - attributed});
  return out;
}

// [SECTION] Y scale and ticks
// ---------------------------------------------------------------------------------

bool parse_memory_scale(const std::string& s, MemoryScale* out) {
  if (s == "shared") {
    *out = MemoryScale::kShared;
    return true;
  }
  if (s == "per-gpu" || s == "per_gpu") {
    *out = MemoryScale::kPerGpu;
    return true;
  }
  return false;
}

double memory_y_top(const MemoryModel& m, std::size_t gpu, MemoryScale scale, bool to_capacity) {
  double top = 0;
  for (std::size_t i = 0; i < m.gpus.size(); ++i) {
    if (scale == MemoryScale::kPerGpu && i != gpu) continue;
    const GpuMemory& g = m.gpus[i];
    top = std::max({top, g.peak_bytes, g.peak_reserved_bytes});
    if (to_capacity) top = std::max(top, static_cast<double>(g.capacity_bytes));
  }
  return std::max(top * 1.12, 1.0);
}

namespace {

constexpr double kKiB = 1024.0, kMiB = kKiB * 1024, kGiB = kMiB * 1024;

double tick_unit(double bytes) {
  if (bytes >= kGiB) return kGiB;
  if (bytes >= kMiB) return kMiB;
  if (bytes >= kKiB) return kKiB;
  return 1;
}

}  // namespace

std::vector<double> memory_ticks(double top_bytes, int max_ticks) {
  std::vector<double> out;
  if (!(top_bytes > 0) || !std::isfinite(top_bytes) || max_ticks < 1) return out;
  const double unit = tick_unit(top_bytes);
  const double top = top_bytes / unit;  // >= 1 unless top_bytes < 1 B
  // Smallest step in {1, 2, 5} × 10^k (units) with floor(top / step) <= max_ticks.
  double step = 0;
  for (int e = -3; step == 0; ++e) {
    const double decade = std::pow(10.0, e);  // not repeated ×10: 0.5 GiB must be exact
    for (const double f : {1.0, 2.0, 5.0}) {
      if (std::floor(top / (f * decade) + 1e-9) <= max_ticks) {
        step = f * decade;
        break;
      }
    }
  }
  for (int k = 1; k * step <= top * (1 + 1e-12); ++k) out.push_back(k * step * unit);
  return out;
}

std::string memory_tick_label(double bytes, double top_bytes) {
  const double unit = tick_unit(top_bytes);
  const char* name = unit == kGiB ? "GiB" : unit == kMiB ? "MiB" : unit == kKiB ? "KiB" : "B";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%g %s", bytes / unit, name);
  return buf;
}

int sample_at(const GpuMemory& g, double t_ns) {
  const auto it = std::upper_bound(g.t.begin(), g.t.end(), t_ns,
                                   [](double t, TimeNs s) { return t < static_cast<double>(s); });
  return static_cast<int>(it - g.t.begin()) - 1;
}

std::vector<MemoryColumn> memory_columns(const GpuMemory& g, const TimeView& view,
                                         double width_px) {
  std::vector<MemoryColumn> out;
  if (g.t.empty()) return out;
  const double t0 = view.start_ns, t1 = view.end_ns(width_px);
  int i = std::max(sample_at(g, t0), 0);
  const int n = static_cast<int>(g.t.size());
  while (i < n && static_cast<double>(g.t[i]) <= t1) {
    // Sample i holds over [t_i, t_{i+1}); the last one to the end of the window.
    const double x0 = std::max(view.x_of(static_cast<double>(g.t[i])), 0.0);
    const double x1 =
        i + 1 < n ? std::min(view.x_of(static_cast<double>(g.t[i + 1])), width_px) : width_px;
    const int px = static_cast<int>(x0);
    if (!out.empty() && static_cast<int>(out.back().x0) == px &&
        out.back().x1 <= static_cast<double>(px + 1)) {
      // Same pixel column as the previous short sample: keep the fuller one, extend the column.
      MemoryColumn& prev = out.back();
      if (g.allocated[i] > g.allocated[prev.sample]) prev.sample = static_cast<std::uint32_t>(i);
      prev.x1 = std::max(prev.x1, x1);
    } else if (x1 > x0 || out.empty()) {
      out.push_back(MemoryColumn{x0, std::max(x1, x0), static_cast<std::uint32_t>(i)});
    }
    ++i;
  }
  return out;
}

}  // namespace csim::gui
