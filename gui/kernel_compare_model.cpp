// Per-GPU comparison of matching GPU work (kernel_compare_model.hpp).
#include "gui/kernel_compare_model.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

#include "gui/time_axis.hpp"

namespace csim::gui {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool contains_any(std::string_view text, std::string_view filter) {
  while (true) {
    const std::size_t bar = filter.find('|');
    const std::string_view part = trim(filter.substr(0, bar));
    if (!part.empty() && text.find(part) != std::string_view::npos) return true;
    if (bar == std::string_view::npos) return false;
    filter.remove_prefix(bar + 1);
  }
}

}  // namespace

bool kernel_matches(const prof::TraceEvent& e, std::string_view filter) {
  if (!prof::is_gpu_work(e.cls)) return false;
  if (contains_any(e.name, filter)) return true;
  const std::string* op = prof::string_arg(e, "op");
  return op != nullptr && contains_any(*op, filter);
}

KernelComparison compare_kernels(const prof::Trace& trace, const prof::Summary& summary,
                                 std::string_view filter) {
  KernelComparison k;
  k.filter = std::string(filter);
  for (const prof::GpuSummary& g : summary.per_gpu)
    if (g.mirror_of >= 0) ++k.symmetric_mirrors;
  const double steps = std::max<double>(1.0, static_cast<double>(summary.step_times_ns.size()));

  std::map<std::int32_t, std::size_t> row;  // pid → index into k.gpus
  std::vector<TimeNs> total;
  // Occurrences per (GPU, key), and every instance's durations by GPU.
  std::unordered_map<std::string, int> seen;
  std::unordered_map<std::string, std::vector<std::pair<std::size_t, TimeNs>>> instance;
  std::vector<std::string> order;  // instance keys in first-seen order (deterministic output)
  for (const prof::TraceEvent& e : trace.events) {
    if (e.dur_ns < 0 || !kernel_matches(e, filter)) continue;
    auto [it, fresh] = row.try_emplace(e.pid, k.gpus.size());
    if (fresh) {
      GpuKernelTime g;
      g.pid = e.pid;
      const prof::ProcessInfo* p = trace.process(e.pid);
      g.name = p != nullptr && !p->name.empty() ? p->name : "pid " + std::to_string(e.pid);
      k.gpus.push_back(std::move(g));
      total.push_back(0);
    }
    const std::size_t i = it->second;
    total[i] += e.dur_ns;
    ++k.gpus[i].events;
    std::string key = e.name;
    if (const std::string* op = prof::string_arg(e, "op")) key += "\x1f" + *op;
    if (const std::string* pg = prof::string_arg(e, "Process Group Name")) key += "\x1f" + *pg;
    const int n = seen[std::to_string(e.pid) + "\x1e" + key]++;
    key += "\x1e" + std::to_string(n);
    auto [inst, first] = instance.try_emplace(std::move(key));
    if (first) order.push_back(inst->first);
    inst->second.emplace_back(i, e.dur_ns);
  }
  for (std::size_t i = 0; i < k.gpus.size(); ++i) k.gpus[i].per_step_s = ns_to_s(total[i]) / steps;

  double spread_sum = 0;
  for (const std::string& key : order) {
    const auto& d = instance.at(key);
    if (d.size() < 2) continue;
    ++k.instances;
    const auto [lo, hi] = std::minmax_element(
        d.begin(), d.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    const double spread =
        lo->second > 0 ? static_cast<double>(hi->second) / static_cast<double>(lo->second) : 1.0;
    spread_sum += spread;
    k.worst_spread = std::max(k.worst_spread, spread);
    if (spread <= 1.001) {
      ++k.equal_instances;
      continue;
    }
    const auto n_max =
        std::count_if(d.begin(), d.end(), [&](const auto& x) { return x.second == hi->second; });
    if (n_max == 1) ++k.gpus[hi->first].slowest;
  }
  if (k.instances > 0) k.mean_spread = spread_sum / k.instances;

  // GPUs by pid, so that A's and B's bars line up GPU by GPU.
  std::sort(k.gpus.begin(), k.gpus.end(),
            [](const GpuKernelTime& a, const GpuKernelTime& b) { return a.pid < b.pid; });
  if (!k.gpus.empty()) {
    k.min_s = k.gpus.front().per_step_s;
    for (const GpuKernelTime& g : k.gpus) {
      k.max_s = std::max(k.max_s, g.per_step_s);
      k.min_s = std::min(k.min_s, g.per_step_s);
      k.mean_s += g.per_step_s;
    }
    k.mean_s /= static_cast<double>(k.gpus.size());
  }
  return k;
}

double max_over_mean(const KernelComparison& k) {
  return k.mean_s > 0 ? k.max_s / k.mean_s : 0;
}

int most_often_slowest(const KernelComparison& k) {
  int best = -1;
  for (std::size_t i = 0; i < k.gpus.size(); ++i)
    if (k.gpus[i].slowest > 0 && (best < 0 || k.gpus[i].slowest > k.gpus[best].slowest))
      best = static_cast<int>(i);
  return best;
}

}  // namespace csim::gui
