// docs/cost-model.md, "Resource sharing": SMs and HBM of a GPU shared by its running activities.
#include "backends/sim/resources.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace csim::sim {

void DeviceShares::reset(std::vector<GpuCapacity> gpus, std::size_t ops) {
  gpus_.clear();
  gpus_.resize(gpus.size());
  for (std::size_t g = 0; g < gpus.size(); ++g) gpus_[g].cap = gpus[g];
  generation_.assign(ops, 0);
  moved_.clear();
}

// docs/cost-model.md, "Resource sharing" (SMs): f_sm = slowdown x sm_count / (sm_count - taken),
// taken = min(SMs held, sm_count - 1).
double DeviceShares::sm_factor(const Gpu& g) const {
  double f = g.cap.slowdown;
  const int taken = std::min(g.held_sms, g.cap.sm_count - 1);
  if (taken > 0)
    f *= static_cast<double>(g.cap.sm_count) / static_cast<double>(g.cap.sm_count - taken);
  return f;
}

// docs/cost-model.md, "Resource sharing" (HBM): kernels at their SM-limited rate 1 / f_sm ask for
// demand / f_sm bytes/ns, holders for their declared bytes/ns. When the asks fit in the GPU's HBM
// bandwidth every kernel runs at f_sm; otherwise the bandwidth is shared by max-min fairness
// (water-filling, the asks as caps) and a kernel given b < its ask runs at factor demand / b.
void DeviceShares::solve(const Gpu& g) {
  const std::size_t n = g.kernels.size();
  const double f_sm = sm_factor(g);
  factor_scratch_.assign(n, f_sm);
  const double hbm = g.cap.hbm_bytes_per_ns;
  if (hbm <= 0 || n == 0) return;
  double asked = 0;
  for (const Holder& h : g.holders) asked += h.hbm_bytes_per_ns;
  for (const Kernel& k : g.kernels) asked += k.demand / f_sm;
  if (asked <= hbm) return;
  // Water-filling over holders (index -1 - h) and kernels (index k), by ask, ties by position.
  const std::size_t m = g.holders.size() + n;
  auto ask = [&](int i) {
    return i < 0 ? g.holders[static_cast<std::size_t>(-1 - i)].hbm_bytes_per_ns
                 : g.kernels[static_cast<std::size_t>(i)].demand / f_sm;
  };
  order_scratch_.clear();
  for (std::size_t h = 0; h < g.holders.size(); ++h)
    order_scratch_.push_back(-1 - static_cast<int>(h));
  for (std::size_t k = 0; k < n; ++k) order_scratch_.push_back(static_cast<int>(k));
  std::stable_sort(order_scratch_.begin(), order_scratch_.end(),
                   [&](int a, int b) { return ask(a) < ask(b); });
  double left = hbm;
  for (std::size_t pos = 0; pos < m; ++pos) {
    const int i = order_scratch_[pos];
    const double share = left / static_cast<double>(m - pos);
    if (ask(i) <= share) {  // satisfied: a kernel keeps f_sm
      left -= ask(i);
      continue;
    }
    // Every ask from here on exceeds the share: each gets it.
    for (std::size_t rest = pos; rest < m; ++rest) {
      const int j = order_scratch_[rest];
      if (j >= 0)
        factor_scratch_[static_cast<std::size_t>(j)] =
            g.kernels[static_cast<std::size_t>(j)].demand / share;
    }
    return;
  }
}

// Each kernel's model time left drops by the time run at its old factor, (now - since) / f_old,
// and it ends at now + llround(left x f_new) (docs/cost-model.md, "Resource sharing").
void DeviceShares::rerate(Gpu& g, TimeNs now_ns, std::size_t skip) {
  for (std::size_t p = 0; p < g.kernels.size(); ++p) {
    Kernel& k = g.kernels[p];
    const double f = factor_scratch_[p];
    if (p == skip || k.factor == f) continue;
    k.remaining_model_ns -= static_cast<double>(now_ns - k.since_ns) / k.factor;
    if (k.remaining_model_ns < 0) k.remaining_model_ns = 0;
    k.since_ns = now_ns;
    k.factor = f;
    const TimeNs end = now_ns + static_cast<TimeNs>(std::llround(k.remaining_model_ns * f));
    if (end == k.end_ns) continue;
    k.end_ns = end;
    moved_.push_back(Moved{k.op, ++generation_[k.op], end});
  }
}

TimeNs DeviceShares::start_kernel(core::OpId op, int gpu, TimeNs now_ns, TimeNs model_ns,
                                  double hbm_bytes) {
  moved_.clear();
  Gpu& g = gpus_[static_cast<std::size_t>(gpu)];
  const double demand = model_ns > 0 ? hbm_bytes / static_cast<double>(model_ns) : 0.0;
  g.kernels.push_back(Kernel{op, static_cast<double>(model_ns), now_ns, 1.0, demand, 0});
  solve(g);
  const std::size_t self = g.kernels.size() - 1;
  const double f = factor_scratch_[self];
  const TimeNs d =
      f == 1.0 ? model_ns : static_cast<TimeNs>(std::llround(static_cast<double>(model_ns) * f));
  g.kernels[self].factor = f;
  g.kernels[self].end_ns = now_ns + d;
  rerate(g, now_ns, self);
  return now_ns + d;
}

void DeviceShares::finish_kernel(core::OpId op, int gpu, TimeNs now_ns) {
  moved_.clear();
  Gpu& g = gpus_[static_cast<std::size_t>(gpu)];
  for (std::size_t i = 0; i < g.kernels.size(); ++i) {
    if (g.kernels[i].op != op) continue;
    g.kernels.erase(g.kernels.begin() + static_cast<std::ptrdiff_t>(i));
    break;
  }
  if (g.kernels.empty()) return;
  solve(g);
  rerate(g, now_ns, g.kernels.size());
}

void DeviceShares::set_holder(core::OpId op, int gpu, TimeNs now_ns, int sms,
                              double hbm_bytes_per_ns) {
  moved_.clear();
  Gpu& g = gpus_[static_cast<std::size_t>(gpu)];
  std::size_t i = 0;
  while (i < g.holders.size() && g.holders[i].op != op) ++i;
  if (i == g.holders.size()) {
    if (sms == 0 && hbm_bytes_per_ns == 0) return;
    g.holders.push_back(Holder{op, 0, 0});
  }
  g.held_sms += sms - g.holders[i].sms;
  if (sms == 0 && hbm_bytes_per_ns == 0) {
    g.holders.erase(g.holders.begin() + static_cast<std::ptrdiff_t>(i));
  } else {
    g.holders[i].sms = sms;
    g.holders[i].hbm_bytes_per_ns = hbm_bytes_per_ns;
  }
  if (g.kernels.empty()) return;
  solve(g);
  rerate(g, now_ns, g.kernels.size());
}

double DeviceShares::factor_of(core::OpId op, int gpu) const {
  for (const Kernel& k : gpus_[static_cast<std::size_t>(gpu)].kernels)
    if (k.op == op) return k.factor;
  CSIM_ASSERT_MSG(false, "factor_of: the kernel is not running");
  return 0;
}

}  // namespace csim::sim
