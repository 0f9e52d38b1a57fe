// docs/block-eval.md, "Figures".
#include "backends/block/schedule.hpp"

#include <algorithm>
#include <map>

#include "core/program/step_spans.hpp"

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

// The GPUs the figures report (rank symmetry's representatives), with their usable memory.
std::vector<GpuPeak> Schedule::gpu_peaks() const {
  std::vector<GpuPeak> peaks;
  for (int g : program_.active_gpus) {
    if (program_.symmetry.enabled() &&
        program_.symmetry.weight_of_gpu[static_cast<std::size_t>(g)] == 0)
      continue;
    peaks.push_back({g, 0,
                     core::usable_memory_bytes(scenario_.cluster,
                                               communicates_[static_cast<std::size_t>(g)] != 0)});
  }
  return peaks;
}

// docs/memory.md, "First-step and steady-state peaks" (one step), as
// core/program/memory_timeline.cpp: memory ops by time then op id (mem_, sorted by run()); the
// peak, and the steady state projected from step 1. The verdict (docs/memory.md, "OOM verdict")
// compares GPU k's allocated bytes with its capacity less lower[k] (empty: the capacity itself;
// docs/block-eval.md, "Out of memory").
std::optional<MemVerdict> Schedule::scan_memory(std::vector<GpuPeak>& peaks,
                                                const std::vector<Bytes>& lower) const {
  using ByCategory = std::array<Bytes, core::kNumMemCategories>;
  std::vector<int> index(static_cast<std::size_t>(program_.world_gpus), -1);
  for (std::size_t k = 0; k < peaks.size(); ++k)
    index[static_cast<std::size_t>(peaks[k].gpu)] = static_cast<int>(k);
  const std::size_t n = peaks.size();
  std::vector<ByCategory> cur(n, ByCategory{}), resident(n, ByCategory{});
  std::vector<Bytes> total(n, 0), steady(n, 0);
  std::optional<MemVerdict> v;
  auto over = [&](const MemEvent& e, std::size_t k, Bytes bytes, bool steady_state) {
    const MemInfo& mi = *e.info;
    const Bytes cap = peaks[k].capacity_bytes - (lower.empty() ? 0 : lower[k]);
    if (v || mi.delta <= 0 || peaks[k].capacity_bytes <= 0 || bytes <= cap) return;
    const std::size_t of = streams_[static_cast<std::size_t>(mi.stream)].mem.size();
    v = MemVerdict{Oom{mi.gpu, e.op, steady_state, program_.name_of(e.op)}, mi.stream, mi.nth,
                   static_cast<int>(of), e.t};
  };
  // Steps >= 2 simulated: their peak is the steady state; one step: projected from it.
  bool later = false;
  for (const MemEvent& e : mem_) later = later || !e.info->early;
  for (int pass = 0; pass < (later ? 1 : 2); ++pass) {
    std::fill(cur.begin(), cur.end(), ByCategory{});
    std::fill(total.begin(), total.end(), 0);
    for (const MemEvent& e : mem_) {
      const MemInfo& mi = *e.info;
      const int k = index[static_cast<std::size_t>(mi.gpu)];
      if (k < 0) continue;
      const std::size_t kk = static_cast<std::size_t>(k);
      cur[kk][mi.category] += mi.delta;
      total[kk] += mi.delta;
      if (pass == 0) {
        // The first allocation in time over capacity (docs/memory.md, "OOM verdict").
        over(e, kk, total[kk], false);
        peaks[kk].peak_bytes = std::max(peaks[kk].peak_bytes, total[kk]);
        if (mi.early) resident[kk] = cur[kk];
        if (!mi.early) steady[kk] = std::max(steady[kk], total[kk]);
      } else {
        Bytes lifted = total[kk];
        for (int c = 0; c < core::kNumMemCategories; ++c)
          lifted += std::max<Bytes>(
              0, resident[kk][static_cast<std::size_t>(c)] - cur[kk][static_cast<std::size_t>(c)]);
        steady[kk] = std::max(steady[kk], lifted);
        over(e, kk, lifted, true);
      }
    }
  }
  for (std::size_t k = 0; k < n; ++k)
    peaks[k].peak_bytes = std::max(peaks[k].peak_bytes, steady[k]);
  return v;
}

std::optional<MemVerdict> Schedule::verdict_with_less(const std::vector<Bytes>& lower) const {
  std::vector<GpuPeak> peaks = gpu_peaks();
  return scan_memory(peaks, lower);
}

EvalResult Schedule::figures(std::vector<GpuPeak> peaks) const {
  EvalResult r;
  r.path = EvalPath::kBlock;
  r.units = static_cast<std::int64_t>(units_.size());
  r.chains = chains_;
  r.chained_ops = chained_ops_;
  r.transfers_timed = static_cast<std::int64_t>(transfer_ns_.size());
  // docs/summary.md, "Steps", as core/program/step_spans.cpp: per GPU and step the span from its
  // thread reaching the step's first op to the step's last end, tiled (a step starts no earlier
  // than the previous one ended, which ends where the thread's next step is first drawn).
  std::vector<core::StepSpan> spans;
  for (const ThreadState& th : threads_) {
    for (int n = 1; n <= steps_; ++n) {
      const std::size_t k = at(th.gpu, n);
      if (step_end_[k] < 0 && step_begin_[k] < 0) continue;
      core::StepSpan ss{th.gpu, n, step_begin_[k] >= 0 ? step_begin_[k] : step_end_[k],
                        step_end_[k]};
      if (!spans.empty() && spans.back().gpu == ss.gpu) {
        core::StepSpan& prev = spans.back();
        const TimeNs d = step_drawn_[k];
        if (d >= 0 && d < prev.end_ns && prev.step + 1 == ss.step)
          prev.end_ns = std::max(prev.start_ns, d);
        ss.start_ns = std::max(ss.start_ns, prev.end_ns);
        ss.end_ns = std::max(ss.end_ns, ss.start_ns);
      }
      spans.push_back(ss);
    }
  }
  std::sort(spans.begin(), spans.end(), [](const core::StepSpan& x, const core::StepSpan& y) {
    return x.gpu != y.gpu ? x.gpu < y.gpu : x.step < y.step;
  });
  r.step_time_ns = static_cast<TimeNs>(std::llround(core::step_time_s(spans) * 1e9));
  // docs/summary.md, "Window": steps merged over GPUs; [end_{N-1}, end_N] for N >= 2, or
  // [start_1, end_1] with one step.
  std::map<int, std::pair<TimeNs, TimeNs>> merged;
  for (const core::StepSpan& s : spans) {
    auto [it, fresh] = merged.try_emplace(s.step, s.start_ns, s.end_ns);
    if (!fresh) {
      it->second.first = std::min(it->second.first, s.start_ns);
      it->second.second = std::max(it->second.second, s.end_ns);
    }
  }
  std::vector<std::pair<TimeNs, TimeNs>> window;
  int prev_n = 0;
  TimeNs prev_end = 0;
  for (const auto& [n, se] : merged) {
    const bool chained = n != merged.begin()->first && n == prev_n + 1;
    if (merged.size() == 1 || n != merged.begin()->first)
      window.push_back({chained ? prev_end : se.first, se.second});
    prev_n = n;
    prev_end = se.second;
  }
  r.peaks = std::move(peaks);
  if (verdict_) r.oom = verdict_->oom;
  // docs/block-eval.md, "Exposed communication": a chain with kernels keeps its stream busy from
  // start to end, its collectives exposed; other communication counts where no chain runs.
  // A chain straddling the window's edge counts the share of its in-line collectives that its
  // time inside has (docs/block-eval.md, "Figures").
  TimeNs exposed = 0;
  for (const GpuPeak& pk : r.peaks) {
    const std::size_t g = static_cast<std::size_t>(pk.gpu);
    const int w = program_.symmetry.enabled() ? program_.symmetry.weight_of_gpu[g] : 1;
    TimeNs e = 0;
    for (const auto& [lo, hi] : window) {
      e += minus_measure(comm_iv_[g], busy_[g], lo, hi);
      for (std::size_t c = 0; c < inline_iv_[g].size(); ++c) {
        const auto [a, b] = inline_iv_[g][c];
        const TimeNs in = std::min(b, hi) - std::max(a, lo);
        if (in <= 0 || b <= a) continue;
        e += in == b - a ? inline_ns_[g][c]
                         : static_cast<TimeNs>(std::llround(static_cast<double>(inline_ns_[g][c]) *
                                                            static_cast<double>(in) /
                                                            static_cast<double>(b - a)));
      }
    }
    exposed += w * e;
  }
  if (!window.empty()) exposed /= static_cast<TimeNs>(window.size());
  r.exposed_comm_ns = exposed;
  return r;
}

}  // namespace csim::block::detail
