// ProgramBuilder: the pieces every strategy's lowering is made of (docs/program.md):
// processes, threads, streams and groups; op factories that fill host costs from HostSpec; the
// model's forward and backward on one GPU (through the one layer loop, layer_loop.hpp) and its
// optimizer; the data-loader feed.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/lowering/fp8_lowering.hpp"
#include "core/program/program.hpp"
#include "core/progress.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core {

// Where a sequence of ops runs: the issuing host thread, the GPU and its compute stream.
struct Lane {
  int thread = 0;
  int gpu = 0;
  int stream = 0;  // compute stream of `gpu`
};

struct ForwardOps {
  std::vector<OpId> layer_ops;          // one compute op per layer, forward order
  OpId last = kNoOp;                    // the last op issued
  std::vector<OpId> activation_allocs;  // per layer (kNoOp where the layer saves nothing)
  Bytes activation_bytes = 0;           // saved for backward, all layers
  Bytes output_bytes = 0;               // the model's output (allocated by the caller)
};

struct BackwardOps {
  std::vector<OpId> layer_ops;  // one compute op per layer, in the order they run (reverse)
  OpId last = kNoOp;
};

class LayerLoop;

class ProgramBuilder {
 public:
  // With `progress`, the phase "lowering" begins; set_step counts its units.
  explicit ProgramBuilder(const Scenario& scenario, Progress* progress = nullptr);
  ~ProgramBuilder();

  Program& program() { return program_; }
  const Scenario& scenario() const { return scenario_; }
  // Precision "fp8": the casts and amax kernels around the FP8 GEMMs (docs/fp8.md).
  Fp8Lowering& fp8() { return fp8_; }
  Program take();
  // The layer loop over every layer whole (one GPU runs all of it: single, DataParallel, DDP,
  // model parallel; layer_loop.hpp), made at its first use; forward() and backward() walk it.
  LayerLoop& whole_layers();
  // The Program's name pool (Op::name; docs/program.md, "Names").
  StringPool& names() { return program_.names; }

  // [SECTION] Structure
  int add_process(int node, std::string name, bool runs_python);
  int add_thread(int process, int gpu, std::string name);
  int add_stream(int gpu, StreamRole role, std::string name);
  int add_group(std::vector<int> gpus, std::string name);
  int new_instance() { return program_.collective_instances++; }
  // The ops that follow belong to training step `step` (0: setup). Each call with a step >= 1
  // starts one unit of the lowering's progress and ends the one before: a step (every strategy
  // lowers step after step), or a rank's step where the strategy said so (count_rank_steps).
  void set_step(int step) {
    step_ = step;
    if (step <= 0) return;
    if (!counting_) count_units(scenario_.training.steps, "steps");
    if (unit_open_) lowered_.add();
    unit_open_ = true;
  }
  // The strategy lowers `ranks` ranks' steps one by one (hybrid_emitter.cpp): the progress counts
  // steps x ranks rank-steps. Called before the first step; without it, steps are counted.
  void count_rank_steps(std::int64_t ranks) {
    count_units(ranks * scenario_.training.steps, "rank-steps");
  }
  int step() const { return step_; }

  // [SECTION] Host costs (docs/program.md, "Host costs")
  TimeNs python_ns(double framework_ops) const;    // GIL held; 0 without Python
  TimeNs dispatch_ns(double framework_ops) const;  // GIL released

  // [SECTION] Op factories; every factory returns the new op's id.
  OpId add(Op op);
  OpId compute(const Lane& l, const NameRef& name, ComputeKind kind, double flops, Bytes bytes,
               double framework_ops, bool python, std::vector<Dep> deps, Phase phase,
               std::int64_t batch = -1);
  OpId copy(int thread, int stream, int gpu, const NameRef& name, CopyKind kind, Bytes bytes,
            int src_gpu, std::vector<Dep> deps, Phase phase, TimeNs python_ns, TimeNs dispatch_ns);
  OpId collective(int thread, int stream, int gpu, const NameRef& name, CollectiveKind kind,
                  int group, int root, int instance, Bytes bytes, std::vector<Dep> deps,
                  Phase phase, TimeNs python_ns, TimeNs dispatch_ns);
  OpId alloc(int thread, int stream, int gpu, MemCategory cat, Bytes bytes, const NameRef& name);
  OpId release(int thread, int stream, int gpu, MemCategory cat, Bytes bytes, const NameRef& name);
  OpId host_work(int thread, int gpu, const NameRef& name, TimeNs python_ns, TimeNs dispatch_ns,
                 std::vector<Dep> deps, Phase phase);
  OpId marker(int thread, int gpu, const NameRef& name, std::vector<Dep> deps, Phase phase);

  // [SECTION] Model pieces
  PrecisionBytes precision() const;
  // Dtypes of the tensors a collective carries (Op::dtype; docs/trace-format.md, "Kineto
  // conventions"): collectives default to the compute dtype (activations); gradient reductions
  // carry .grad's dtype, parameter broadcasts and gathers the parameters' as stored.
  Dtype grads_dtype() const;
  Dtype weights_dtype() const;
  void set_dtype(OpId op, Dtype d) { program_.ops[static_cast<std::size_t>(op)].dtype = d; }
  // A fused attention layer's kernel `op` gets that kernel's own efficiency on this GPU
  // (Op::max_efficiency; docs/attention.md, "Efficiency"); other layers keep their kind's curve.
  void set_layer_efficiency(OpId op, const LayerSpec& layer, bool backward);
  Bytes weight_bytes() const;     // all parameters as stored
  Bytes grad_bytes() const;       // all .grad tensors
  Bytes buffer_bytes() const;     // module buffers (fp32)
  Bytes optimizer_bytes() const;  // optimizer state incl. fp32 master copy

  // Forward of the whole model on `batch` samples through the layer loop (layer_loop.hpp), each
  // layer whole, its saved activations allocated; the first layer waits for `first_deps`.
  ForwardOps forward(const Lane& l, std::int64_t batch, std::vector<Dep> first_deps,
                     const std::string& prefix);
  // Backward in reverse layer order through the layer loop; `on_layer_done(layer, op)` runs after
  // each layer's op (DDP hooks). Frees the forward's activations as each layer finishes.
  BackwardOps backward(const Lane& l, std::int64_t batch, const ForwardOps& fwd,
                       std::vector<Dep> first_deps, const std::string& prefix,
                       const std::function<void(int layer, OpId op)>& on_layer_done);
  // optimizer.step() over all parameters on one GPU; allocates state at its first call per GPU.
  OpId optimizer_step(const Lane& l, std::vector<Dep> deps, bool first_step);

 private:
  // A new op at the end of the op list with the fields every op has (program_builder.cpp).
  Op& new_op(OpKind kind, NameId name, int thread, int stream, int gpu, TimeNs python,
             TimeNs dispatch, std::vector<Dep> deps, Phase phase);
  const Scenario& scenario_;
  Program program_;
  int step_ = 0;
  // The lowering's progress: "lowering" begun without a count by the constructor, then with its
  // units at the first step (or count_rank_steps).
  void count_units(std::int64_t total, const char* unit) {
    lowered_ = ProgressCount(progress_, "lowering", total, unit, 1);
    counting_ = true;
  }
  Progress* progress_ = nullptr;
  ProgressCount lowered_;   // units (steps or rank-steps) lowered
  bool counting_ = false;   // lowered_ has its total
  bool unit_open_ = false;  // a unit begun by set_step and not yet counted
  Fp8Lowering fp8_;
  // The loop forward() / backward() walk: every layer whole (made at the first pass).
  std::unique_ptr<LayerLoop> whole_layers_;
};

// The data loader of one training process (docs/program.md, "A training step"): with num_workers
// == 0 the main thread loads each batch itself; otherwise worker processes load batches
// round-robin, at most prefetch_factor batches ahead per worker, and the main thread waits for
// its next batch. Then the batch is copied to the GPU (pinned: async; pageable: synchronous).
struct FedBatch {
  OpId copy = kNoOp;  // the H2D copy: later GPU work waits for it (kStreamWaits)
  Bytes bytes = 0;    // the batch on the GPU (category activations, freed by the caller)
};

class DataFeed {
 public:
  DataFeed(ProgramBuilder& b, int node, int main_thread, int gpu, int copy_stream,
           const std::string& rank_label);
  // Emits "get batch k" on the main thread and the H2D copy; returns the copy op (stream-waitable).
  FedBatch next_batch(std::int64_t samples, const Lane& main);

 private:
  ProgramBuilder& builder_;
  int gpu_, copy_stream_;
  std::vector<int> worker_threads_;
  std::vector<OpId> consumed_;  // main-thread op that took batch k
  int next_index_ = 0;
};

// optimizer.step() over `params` parameters (docs/program.md, "A training step"): a foreach
// implementation streams every parameter, its grad and its state once: bytes = params x (2 x
// weights + grads + 2 x state + 2 x master); FLOPs 10/param (Adam) or 3/param (SGD).
struct OptimizerCost {
  Bytes traffic = 0;
  double flops = 0;
};
OptimizerCost optimizer_cost(const TrainingSpec& t, const PrecisionBytes& pb, std::int64_t params);
// Optimizer state per parameter without the master copy: Adam's two fp32 moments 8, SGD momentum
// 4, plain SGD 0.
int optimizer_moment_bytes_per_param(const TrainingSpec& t);

// [SECTION] Step pieces shared by the strategies (docs/program.md, "A training step")

// Parameters and module buffers allocated once, before step 1 (step 0).
void emit_model_setup(ProgramBuilder& b, const Lane& l);
// The loss's memory traffic over `out_bytes` of model output (ModelSpec::loss_*).
Bytes loss_traffic_bytes(const ModelSpec& m, Bytes out_bytes);
// The loss on the model's output (a small elementwise kernel + Python); allocates the output.
// Returns the loss op; the output (out_bytes) is freed by release_after_backward.
OpId emit_loss(ProgramBuilder& b, const Lane& l, std::int64_t batch, Bytes out_bytes,
               std::vector<Dep> deps);
// Frees the model output and the input batch once backward is issued.
void release_after_backward(ProgramBuilder& b, const Lane& l, Bytes out_bytes, Bytes input_bytes);
// optimizer.step(), zero_grad(set_to_none=True) freeing the grads, and loss.item(): the host
// waits for the step's GPU work, which ends the step.
OpId emit_optimizer_and_sync(ProgramBuilder& b, const Lane& l, std::vector<Dep> deps,
                             bool first_step, Bytes grads_to_free);

// What the training script does after loss.item() (docs/memory.md, "Scenario switches"):
// training.leaks.loss_as_tensor keeps the step's autograd graph and a loss scalar alive;
// training.leaks.keep_outputs runs an evaluation forward without torch.no_grad whose saved
// activations and output are kept; training.empty_cache_every calls torch.cuda.empty_cache().
void emit_step_end(ProgramBuilder& b, const Lane& l, int step, std::int64_t batch);
// Bytes per step training.leaks.loss_as_tensor keeps: autograd_graph_nodes() nodes of
// kAutogradNodeBytes each (docs/memory.md, "loss_as_tensor").
inline constexpr Bytes kAutogradNodeBytes = 256;
inline constexpr Bytes kLossScalarBytes = 4;  // a 0-d fp32 tensor
std::int64_t autograd_graph_nodes(const Scenario& s);

// Samples in step `step` (1-based) for a loader of `batch` samples over `dataset` samples
// (0 = unlimited): batches follow epochs, the last batch of an epoch is partial (drop_last=False).
std::int64_t batch_for_step(std::int64_t batch, std::int64_t dataset, int step);

}  // namespace csim::core
