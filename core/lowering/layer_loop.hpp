// The one walk over a pass's layers that every strategy lowers through (docs/program.md, "One
// layer loop"): single, DataParallel, DDP and model parallel (ProgramBuilder::forward / backward,
// model_parallel.cpp) as well as every kind the Emitter composes (hybrid_emitter.cpp). Per layer
// of a pass it runs the per-layer passes at fixed points around the layer's kernel:
//
//   enter hooks (outermost first)          saved activations, a device change, a unit's gathers
//     begin_kernel hooks (outermost first) recompute's re-runs, TP collectives, CP exchange
//       the kernel                         FP8 casts, FLOPs and traffic, GEMM shape or fused
//                                          attention, a forward's Python (extra_python_us)
//     end_kernel hooks (innermost first)   TP collectives, CP ring steps
//   leave hooks (innermost first)          gradient hooks, activations freed, a unit's reduction
//
// A hook is a per-layer pass (LayerHook); a strategy gives the walk the hooks it has. A recompute
// re-run is one kernel with its begin/end_kernel hooks (LayerLoop::emit) outside any walk.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/lowering/op_names.hpp"
#include "core/lowering/program_builder.hpp"

namespace csim::core {

struct ShardedLayer;

// What one rank runs of a layer, per sample (a whole layer: its LayerSpec's figures; sharded
// under tensor and context parallelism: shard_layer, shard_context).
struct LayerFigures {
  std::int64_t params = 0;  // parameters the rank holds
  double flops_per_sample = 0, traffic_per_sample = 0;
  double bwd_flops_per_sample = -1, bwd_traffic_per_sample = -1;  // < 0: 2x the forward's
  double act_bytes_per_sample = 0;     // saved for backward (the FP8 input cast writes it)
  double output_bytes_per_sample = 0;  // the layer's output (the FP8 gradient cast reads it)
};
// Every layer whole (one GPU runs all of it: single, DataParallel, DDP, model parallel).
std::vector<LayerFigures> whole_layer_figures(const ModelSpec& m);
// The rank's share of each layer (the Emitter's plan).
std::vector<LayerFigures> sharded_layer_figures(const std::vector<ShardedLayer>& sharded);

// One layer of a pass as the loop visits it; a strategy's visit may carry more (the Emitter's
// LayerPass: its segment pass and unit).
struct LayerVisit {
  int layer = 0;
  StepPhase phase = StepPhase::kForward;  // kRecompute: a forward re-run before its backward
  std::int64_t batch = 0;                 // samples the kernel runs
  std::string_view prefix;                // the kernel's name prefix (op_names::layer_kernel)
  int micro = -1;                         // the prefix's field (-1: none)
  Lane lane;                              // where the kernel is issued (an enter hook may move it)
  std::vector<Dep> deps;                  // what the kernel waits for (hooks may extend it)
  OpId kernel = kNoOp;                    // the kernel, once emitted (for the end/leave hooks)
  bool forward() const { return phase != StepPhase::kBackward; }
};

// Layer `layer`'s visit in a pass of `batch` samples whose kernels are named under `prefix`, on
// `lane` (a hook may move it); the pass's first layer (`first`) waits for `first_deps`.
LayerVisit pass_visit(int layer, bool first, StepPhase phase, std::int64_t batch,
                      std::string_view prefix, const Lane& lane,
                      const std::vector<Dep>& first_deps);

// A per-layer pass. Every hook defaults to nothing.
class LayerHook {
 public:
  virtual ~LayerHook() = default;
  virtual void enter(LayerVisit& /*v*/) {}         // the walk reaches the layer
  virtual void begin_kernel(LayerVisit& /*v*/) {}  // before its kernel (re-runs too)
  virtual void end_kernel(LayerVisit& /*v*/) {}    // after its kernel (re-runs too)
  virtual void leave(LayerVisit& /*v*/) {}         // the walk leaves the layer
};
using LayerHooks = std::span<LayerHook* const>;

class LayerLoop {
 public:
  LayerLoop(ProgramBuilder& b, std::vector<LayerFigures> figures);

  // A pass over layers [first, end): a forward (or evaluation) pass in layer order, a backward in
  // reverse. `make(i, first)` makes layer i's visit (a LayerVisit or a type derived from it;
  // `first`: the pass's first layer, whose kernel waits for what the pass waits for); `hooks`
  // outermost first.
  template <class MakeVisit>
  void walk(int first, int end, bool forward, LayerHooks hooks, MakeVisit make) {
    for (int n = 0; n < end - first; ++n) {
      auto v = make(forward ? first + n : end - 1 - n, n == 0);
      for (LayerHook* h : hooks) h->enter(v);
      emit(v, hooks);
      for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) (*it)->leave(v);
    }
  }

  // One layer's kernel with the hooks' begin_kernel / end_kernel around it (a walk's, or a
  // recompute re-run's). Its FLOPs and traffic are the layer's figures times v.batch; a forward's
  // launches hold the GIL and add the layer's extra_python_us, a recompute's do not (the re-run
  // is autograd's C++), a backward's where the model has Python hooks (docs/program.md, "A
  // training step").
  OpId emit(LayerVisit& v, LayerHooks hooks);

  const LayerFigures& figures(int layer) const { return figures_[static_cast<std::size_t>(layer)]; }

 private:
  OpId kernel(LayerVisit& v);
  NameId kernel_name(const LayerVisit& v);
  static std::size_t phase_index(StepPhase p) {  // forward 0, recompute 1, backward 2
    return p == StepPhase::kBackward ? 2 : p == StepPhase::kRecompute ? 1 : 0;
  }

  ProgramBuilder& b_;
  const ModelSpec& m_;
  std::vector<LayerFigures> figures_;
  // Kernel names (docs/program.md, "Names"): a kernel's pattern is the same for every
  // micro-batch (only the field differs), so it is interned once per prefix, layer and phase and
  // later kernels take the id with their own field. The last prefix's table is kept at hand.
  struct KernelName {
    std::uint32_t index = 0;  // the pattern's id in the pool + 1; 0: not interned yet
    bool has_field = false;   // the pattern holds kNameField (the id carries the micro-batch)
  };
  using NameTable = std::vector<std::array<KernelName, 3>>;  // per layer, by phase_index
  std::unordered_map<std::string, NameTable> names_;         // by prefix
  std::string last_prefix_;
  NameTable* last_names_ = nullptr;
  // The kernels outside FP8: every field of one is a function of its layer, its phase, its batch
  // and the scenario, except its id, step, name, lane and deps; the first kernel of each layer and
  // phase is emitted in full and kept (before any end_kernel hook), and later ones of the same
  // batch are copies of it with those fields set.
  struct KernelOp {
    Op op;
    bool valid = false;
  };
  std::vector<std::array<KernelOp, 3>> kernels_;  // per layer, by phase_index
};

// Saved activations (docs/memory.md, "Activations"): a forward allocates each layer's saved
// activation (its figures' act_bytes_per_sample x batch, named "<prefix><layer>.act")
// before the kernel writes it, on the kernel's lane; a backward frees it once the layer's kernel
// is issued. `allocs` holds, per layer, the forward's alloc (kNoOp: nothing saved).
class SavedActivations : public LayerHook {
 public:
  SavedActivations(ProgramBuilder& b, const LayerLoop& loop, std::vector<OpId>& allocs)
      : b_(b), loop_(loop), allocs_(allocs) {}
  void enter(LayerVisit& v) override;
  void leave(LayerVisit& v) override;
  Bytes saved() const { return saved_; }  // allocated by this pass

 private:
  ProgramBuilder& b_;
  const LayerLoop& loop_;
  std::vector<OpId>& allocs_;
  Bytes saved_ = 0;
};

}  // namespace csim::core
