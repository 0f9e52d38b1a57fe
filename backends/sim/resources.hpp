// The simulator's resource contract (docs/cost-model.md, "Resource sharing"). Every running
// activity declares what it takes from the resources it shares, and a sharing solver gives it a
// rate that is recomputed whenever an activity that shares a resource with it starts or ends
// (SimGrid's update_actions_state / next_occurring_event):
//
//   activity            declares                                  shared through
//   compute kernel      model duration d, HBM bytes M              SMs and HBM of its GPU (here)
//   D2D copy            a kernel of 2 x bytes                       SMs and HBM of its GPU (here)
//   NCCL kernel         SMs it holds, HBM bytes/ns while data moves SMs and HBM of its GPU (here)
//   H2D / D2H / peer    HBM bytes/ns while data moves              HBM of its GPUs (here)
//     copy              flows over links + its GPU's copy engine   engine::FlowNetwork (max-min)
//   collective data     flows over links                           engine::FlowNetwork (max-min)
//   host op             the GIL, a CPU core                         FifoResource (exclusive, FIFO)
//   any GPU op          its stream                                  the stream queue (one at a
//   time)
//
// DeviceShares is the SM and HBM part. A kernel keeps its done work when its rate changes and
// finishes the rest at the new rate; its completion events carry a generation so that the ones a
// re-rating made stale are dropped. Only the GPU an activity runs on is re-solved: SMs and HBM are
// per GPU, so no other activity's rate can change.
#pragma once

#include <cstdint>
#include <vector>

#include "core/program/program.hpp"
#include "core/units.hpp"

namespace csim::sim {

// What one GPU offers (docs/cost-model.md, "Resource sharing").
struct GpuCapacity {
  int sm_count = 1;
  double hbm_bytes_per_ns = 0;  // mem_bw x mem_bw_efficiency; <= 0: HBM is not shared (unbounded)
  double slowdown = 1;          // a straggler's factor on every kernel (docs, "Stragglers")
};

class DeviceShares {
 public:
  // A kernel whose completion time moved: its new end and the generation its event must carry.
  struct Moved {
    core::OpId op;
    std::uint32_t generation;
    TimeNs end_ns;
  };

  void reset(std::vector<GpuCapacity> gpus, std::size_t ops);

  // Kernel `op` of model duration `model_ns` (alone on its GPU) moving `hbm_bytes` starts on `gpu`
  // at `now_ns`; returns its end (generation(op) is the one its event carries). The kernels
  // already running there may be re-rated: see moved().
  TimeNs start_kernel(core::OpId op, int gpu, TimeNs now_ns, TimeNs model_ns, double hbm_bytes);
  // The kernel has ended; the others on its GPU are re-rated.
  void finish_kernel(core::OpId op, int gpu, TimeNs now_ns);

  // A holder (an NCCL kernel, a DMA copy) on `gpu` holds `sms` SMs and moves `hbm_bytes_per_ns`
  // through HBM from `now_ns` on; called again it replaces what `op` declared on that GPU, and
  // with (0, 0) it leaves. The kernels running there are re-rated.
  void set_holder(core::OpId op, int gpu, TimeNs now_ns, int sms, double hbm_bytes_per_ns);

  // The kernels re-rated by the last call, in their start order; valid until the next call.
  const std::vector<Moved>& moved() const { return moved_; }
  // The generation a completion event of `op` must carry to be current (0 until re-rated).
  std::uint32_t generation(core::OpId op) const { return generation_[op]; }
  // The rate factor of `op` (running): its time per unit of model time, for tests.
  double factor_of(core::OpId op, int gpu) const;

 private:
  struct Kernel {
    core::OpId op;
    double remaining_model_ns;  // model time left, as of since_ns
    TimeNs since_ns;
    double factor;  // ns per model ns
    double demand;  // HBM bytes per model ns: M / d
    TimeNs end_ns;
  };
  struct Holder {
    core::OpId op;
    int sms;
    double hbm_bytes_per_ns;
  };
  struct Gpu {
    GpuCapacity cap;
    std::vector<Kernel> kernels;  // started, not ended, start order
    std::vector<Holder> holders;  // declared, not left, declaration order
    int held_sms = 0;
    double holder_hbm = 0;  // Σ holders' HBM bytes/ns
    double kernel_hbm = 0;  // Σ kernels' demand (bytes per model ns)
  };
  std::vector<Gpu> gpus_;
  std::vector<std::uint32_t> generation_;  // by op
  std::vector<Moved> moved_;
  std::vector<double> factor_scratch_;
  std::vector<int> order_scratch_;

  double sm_factor(const Gpu& g) const;
  // The factor of each kernel of `g` (factor_scratch_, by position); docs "Resource sharing".
  void solve(const Gpu& g);
  // Applies factor_scratch_ to the kernels of `g` at `now_ns`, skipping position `skip`.
  void rerate(Gpu& g, TimeNs now_ns, std::size_t skip);
};

}  // namespace csim::sim
