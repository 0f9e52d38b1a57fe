// docs/block-eval.md, "Figures".
#include "backends/block/schedule.hpp"

#include <algorithm>

namespace csim::block::detail {

// [SECTION] Figures ------------------------------------------------------------------------------

// |a \ b| for interval lists (docs/block-eval.md, "Exposed communication"), within [lo, hi].
static TimeNs minus_measure(std::vector<std::pair<TimeNs, TimeNs>> a,
                            std::vector<std::pair<TimeNs, TimeNs>> b, TimeNs lo, TimeNs hi) {
  struct E {
    TimeNs t;
    int kind, delta;
  };
  std::vector<E> e;
  for (const auto& [x, y] : a)
    if (y > x) e.push_back({x, 0, 1}), e.push_back({y, 0, -1});
  for (const auto& [x, y] : b)
    if (y > x) e.push_back({x, 1, 1}), e.push_back({y, 1, -1});
  std::sort(e.begin(), e.end(), [](const E& p, const E& q) { return p.t < q.t; });
  int act[2] = {0, 0};
  TimeNs out = 0;
  for (std::size_t i = 0; i < e.size();) {
    const TimeNs t = e[i].t;
    while (i < e.size() && e[i].t == t) act[e[i].kind] += e[i].delta, ++i;
    if (i == e.size()) break;
    const TimeNs from = std::max(t, lo), to = std::min(e[i].t, hi);
    if (act[0] > 0 && act[1] == 0 && to > from) out += to - from;
  }
  return out;
}

EvalResult Schedule::figures() const {
  EvalResult r;
  r.path = EvalPath::kBlock;
  r.units = static_cast<std::int64_t>(units_.size());
  r.chains = chains_;
  r.chained_ops = chained_ops_;
  r.transfers_timed = static_cast<std::int64_t>(transfer_ns_.size());
  // docs/summary.md, "Steps" (one step): the latest end over GPUs minus the earliest start.
  TimeNs lo = -1, hi = -1;
  for (int g : p_.active_gpus) {
    const std::size_t k = static_cast<std::size_t>(g);
    if (step_begin_[k] < 0) continue;
    lo = lo < 0 ? step_begin_[k] : std::min(lo, step_begin_[k]);
    hi = std::max(hi, step_end_[k]);
  }
  r.step_time_ns = lo >= 0 ? hi - lo : 0;
  // docs/memory.md, "First-step and steady-state peaks" (one step), as core/memory_timeline.cpp:
  // memory ops by time then op id; the peak, and the steady state projected from step 1.
  std::vector<MemEvent> mem = mem_;
  std::sort(mem.begin(), mem.end(), [](const MemEvent& a, const MemEvent& b) {
    return a.t != b.t ? a.t < b.t : a.op < b.op;
  });
  using ByCategory = std::array<Bytes, core::kNumMemCategories>;
  std::vector<int> index(static_cast<std::size_t>(p_.world_gpus), -1);
  for (int g : p_.active_gpus) {
    if (p_.symmetry.enabled() && p_.symmetry.weight_of_gpu[static_cast<std::size_t>(g)] == 0)
      continue;
    index[static_cast<std::size_t>(g)] = static_cast<int>(r.peaks.size());
    r.peaks.push_back({g, 0});
  }
  const std::size_t n = r.peaks.size();
  std::vector<ByCategory> cur(n, ByCategory{}), resident(n, ByCategory{});
  std::vector<Bytes> total(n, 0), steady(n, 0);
  for (int pass = 0; pass < 2; ++pass) {
    std::fill(cur.begin(), cur.end(), ByCategory{});
    std::fill(total.begin(), total.end(), 0);
    for (const MemEvent& e : mem) {
      const MemInfo& mi = *e.info;
      const int k = index[static_cast<std::size_t>(mi.gpu)];
      if (k < 0) continue;
      const std::size_t kk = static_cast<std::size_t>(k);
      cur[kk][mi.category] += mi.delta;
      total[kk] += mi.delta;
      if (pass == 0) {
        r.peaks[kk].peak_bytes = std::max(r.peaks[kk].peak_bytes, total[kk]);
        if (mi.early) resident[kk] = cur[kk];
      } else {
        Bytes lifted = total[kk];
        for (int c = 0; c < core::kNumMemCategories; ++c)
          lifted += std::max<Bytes>(
              0, resident[kk][static_cast<std::size_t>(c)] - cur[kk][static_cast<std::size_t>(c)]);
        steady[kk] = std::max(steady[kk], lifted);
      }
    }
  }
  for (std::size_t k = 0; k < n; ++k)
    r.peaks[k].peak_bytes = std::max(r.peaks[k].peak_bytes, steady[k]);
  // docs/block-eval.md, "Exposed communication": a chain with kernels keeps its stream busy from
  // start to end, its collectives exposed; other communication counts where no chain runs.
  TimeNs exposed = 0;
  for (const GpuPeak& pk : r.peaks) {
    const std::size_t g = static_cast<std::size_t>(pk.gpu);
    const int w = p_.symmetry.enabled() ? p_.symmetry.weight_of_gpu[g] : 1;
    exposed += w * (inline_comm_[g] + minus_measure(comm_iv_[g], busy_[g], lo, hi));
  }
  r.exposed_comm_ns = exposed;
  return r;
}

}  // namespace csim::block::detail
