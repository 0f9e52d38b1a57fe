// Running kernels re-rated when the SMs NCCL holds on their GPU change (docs/cost-model.md,
// "Compute-communication interference"): a kernel of model duration d runs at 1 / f of its
// alone-speed, f = slowdown x sm_count / (sm_count - taken); when an NCCL kernel starts or ends on
// the GPU, f changes and every kernel running there keeps its done work and finishes the rest at
// the new rate. SimGrid's update_actions_state / next_occurring_event, for one resource kind.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/program.hpp"
#include "core/units.hpp"

namespace csim::sim {

class KernelRates {
 public:
  void reset(int gpus, std::size_t ops) {
    running_.assign(static_cast<std::size_t>(gpus), {});
    generation_.assign(ops, 0);
  }
  // A kernel of `model_ns` starts at `now_ns` on `gpu` at factor `f`; returns its end, as the
  // fixed-duration model did: now + d when f == 1, else now + llround(d x f).
  TimeNs start(core::OpId op, int gpu, TimeNs now_ns, TimeNs model_ns, double f) {
    const TimeNs d =
        f == 1.0 ? model_ns : static_cast<TimeNs>(std::llround(static_cast<double>(model_ns) * f));
    running_[gpu].push_back(Kernel{op, static_cast<double>(model_ns), now_ns, f, now_ns + d});
    return now_ns + d;
  }
  // The factor of `gpu` becomes `f` at `now_ns`: each running kernel's remaining model time drops
  // by the time run at its old factor, (now - since) / f_old, and it ends at
  // now + llround(remaining x f). Calls moved(op, generation, end) for each kernel whose end
  // changed (its earlier completion event is then stale), in start order.
  template <typename Moved>
  void rerate(int gpu, TimeNs now_ns, double f, Moved&& moved) {
    for (Kernel& k : running_[gpu]) {
      if (k.factor == f) continue;
      k.remaining_model_ns -= static_cast<double>(now_ns - k.since_ns) / k.factor;
      if (k.remaining_model_ns < 0) k.remaining_model_ns = 0;
      k.since_ns = now_ns;
      k.factor = f;
      const TimeNs end = now_ns + static_cast<TimeNs>(std::llround(k.remaining_model_ns * f));
      if (end == k.end_ns) continue;
      k.end_ns = end;
      moved(k.op, ++generation_[k.op], end);
    }
  }
  // The kernel has ended: it leaves its GPU's running list (the others keep their order).
  void finish(core::OpId op, int gpu) {
    std::vector<Kernel>& list = running_[gpu];
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (list[i].op != op) continue;
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  }
  // The generation a completion event of `op` must carry to be current (0 until re-rated).
  std::uint32_t generation(core::OpId op) const { return generation_[op]; }

 private:
  struct Kernel {
    core::OpId op;
    double remaining_model_ns;  // model time left at factor 1, as of since_ns
    TimeNs since_ns;
    double factor;
    TimeNs end_ns;
  };
  std::vector<std::vector<Kernel>> running_;  // per GPU: kernels started, not ended, start order
  std::vector<std::uint32_t> generation_;     // by op
};

}  // namespace csim::sim
