// [SECTION] index: structure, host costs, op factories, model pieces, data feed.
#include "core/lowering/program_builder.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/lowering/gemm_shape_lowering.hpp"
#include "core/lowering/layer_loop.hpp"
#include "core/lowering/op_names.hpp"
#include "core/lowering/optimizer_kernels.hpp"
#include "core/lowering/optimizer_memory.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/model/attention_kernels.hpp"
#include "core/program/caching_allocator.hpp"

namespace csim::core {

ProgramBuilder::ProgramBuilder(const Scenario& scenario, Progress* progress)
    : scenario_(scenario), progress_(progress), fp8_(scenario) {
  program_.world_gpus = scenario.cluster.world_gpus();
  program_.gpus_per_node = scenario.cluster.gpus_per_node;
  program_.steps = scenario.training.steps;
  if (progress_) progress_->begin("lowering", 0, "");  // its units once the first step begins
}

// [SECTION] Structure -----------------------------------------------------------------------------

int ProgramBuilder::add_process(int node, std::string name, bool runs_python) {
  ProcessDesc d;
  d.id = static_cast<int>(program_.processes.size());
  d.node = node;
  d.name = std::move(name);
  d.has_gil = runs_python && scenario_.host.python && scenario_.host.gil;
  program_.processes.push_back(std::move(d));
  return program_.processes.back().id;
}

int ProgramBuilder::add_thread(int process, int gpu, std::string name) {
  ThreadDesc t;
  t.id = static_cast<int>(program_.threads.size());
  t.process = process;
  t.gpu = gpu;
  t.name = std::move(name);
  program_.threads.push_back(std::move(t));
  return program_.threads.back().id;
}

int ProgramBuilder::add_stream(int gpu, StreamRole role, std::string name) {
  StreamDesc st;
  st.id = static_cast<int>(program_.streams.size());
  st.gpu = gpu;
  st.role = role;
  st.name = std::move(name);
  program_.streams.push_back(std::move(st));
  return program_.streams.back().id;
}

int ProgramBuilder::add_group(std::vector<int> gpus, std::string name) {
  CommGroup g;
  g.id = static_cast<int>(program_.groups.size());
  g.gpus = std::move(gpus);
  g.name = std::move(name);
  program_.groups.push_back(std::move(g));
  return program_.groups.back().id;
}

// [SECTION] Host costs ----------------------------------------------------------------------------

TimeNs ProgramBuilder::python_ns(double framework_ops) const {
  // docs/program.md, "Host costs": Python time = ops x python_us_per_op (GIL held).
  if (!scenario_.host.python) return 0;
  return us_to_ns(framework_ops * scenario_.host.python_us_per_op);
}

TimeNs ProgramBuilder::dispatch_ns(double framework_ops) const {
  // docs/program.md, "Host costs": dispatch time = ops x dispatch_us_per_op (GIL released).
  return us_to_ns(framework_ops * scenario_.host.dispatch_us_per_op);
}

// [SECTION] Op factories --------------------------------------------------------------------------

OpId ProgramBuilder::add(Op op) {
  op.id = static_cast<OpId>(program_.ops.size());
  op.step = step_;
  program_.ops.push_back(std::move(op));
  return program_.ops.back().id;
}

// The fields every op has: kind, name, where it is issued and runs, host costs, deps, phase; the
// op is made in place at the end of the op list (as add(), with its id and step).
Op& ProgramBuilder::new_op(OpKind kind, NameId name, int thread, int stream, int gpu, TimeNs python,
                           TimeNs dispatch, std::vector<Dep> deps, Phase phase) {
  Op& op = program_.ops.emplace_back();
  op.id = static_cast<OpId>(program_.ops.size() - 1);
  op.step = step_;
  op.kind = kind;
  op.name = name;
  op.thread = thread;
  op.stream = stream;
  op.gpu = gpu;
  op.python_ns = python;
  op.dispatch_ns = dispatch;
  op.deps = std::move(deps);
  op.phase = phase;
  return op;
}

OpId ProgramBuilder::compute(const Lane& l, const NameRef& name, ComputeKind kind, double flops,
                             Bytes bytes, double framework_ops, bool python, std::vector<Dep> deps,
                             Phase phase, std::int64_t batch) {
  Op& op = new_op(OpKind::kCompute, name.intern(program_.names), l.thread, l.stream, l.gpu,
                  python ? python_ns(framework_ops) : 0, dispatch_ns(framework_ops),
                  std::move(deps), phase);
  op.compute_kind = kind;
  op.dtype = precision().compute;
  op.flops = flops;
  op.bytes = bytes;
  op.batch = batch;
  return op.id;
}

void ProgramBuilder::set_layer_efficiency(OpId op, const LayerSpec& layer, bool backward) {
  Op& o = program_.ops[static_cast<std::size_t>(op)];
  // docs/cost-model.md, "GEMM shape": a linear layer's kernel is timed from its shape; its
  // backward is the input- and weight-gradient GEMMs.
  o.gemm = rank_gemm_shape(layer, o.batch, scenario_.strategy.parallel, o.flops, backward);
  o.gemm_pass = backward ? GemmPass::kBackward : GemmPass::kForward;
  if (layer.fused_attention.kernel == AttentionKernel::kEager) return;
  program_.ops[static_cast<std::size_t>(op)].max_efficiency =
      fused_attention_max_efficiency(scenario_.cluster.gpu, layer.fused_attention, backward);
}

OpId ProgramBuilder::copy(int thread, int stream, int gpu, const NameRef& name, CopyKind kind,
                          Bytes bytes, int src_gpu, std::vector<Dep> deps, Phase phase,
                          TimeNs python, TimeNs dispatch) {
  Op& op = new_op(OpKind::kCopy, name.intern(program_.names), thread, stream, gpu, python, dispatch,
                  std::move(deps), phase);
  op.copy_kind = kind;
  op.bytes = bytes;
  op.peer_gpu = src_gpu;
  return op.id;
}

OpId ProgramBuilder::collective(int thread, int stream, int gpu, const NameRef& name,
                                CollectiveKind kind, int group, int root, int instance, Bytes bytes,
                                std::vector<Dep> deps, Phase phase, TimeNs python,
                                TimeNs dispatch) {
  Op& op = new_op(OpKind::kCollective, name.intern(program_.names), thread, stream, gpu, python,
                  dispatch, std::move(deps), phase);
  op.collective = kind;
  op.dtype = precision().compute == Dtype::kTf32 ? Dtype::kFp32 : precision().compute;
  op.group = group;
  op.root = root;
  op.instance = instance;
  op.bytes = bytes;
  return op.id;
}

OpId ProgramBuilder::alloc(int thread, int stream, int gpu, MemCategory cat, Bytes bytes,
                           const NameRef& name) {
  Op& op = new_op(OpKind::kAlloc, name.intern(program_.names), thread, stream, gpu, 0, 0, {},
                  Phase::kMemory);
  op.mem_category = cat;
  op.bytes = bytes;
  return op.id;
}

OpId ProgramBuilder::release(int thread, int stream, int gpu, MemCategory cat, Bytes bytes,
                             const NameRef& name) {
  Op& op = new_op(OpKind::kFree, name.intern(program_.names), thread, stream, gpu, 0, 0, {},
                  Phase::kMemory);
  op.mem_category = cat;
  op.bytes = bytes;
  return op.id;
}

OpId ProgramBuilder::host_work(int thread, int gpu, const NameRef& name, TimeNs python,
                               TimeNs dispatch, std::vector<Dep> deps, Phase phase) {
  return new_op(OpKind::kHostWork, name.intern(program_.names), thread, -1, gpu, python, dispatch,
                std::move(deps), phase)
      .id;
}

OpId ProgramBuilder::marker(int thread, int gpu, const NameRef& name, std::vector<Dep> deps,
                            Phase phase) {
  return new_op(OpKind::kMarker, name.intern(program_.names), thread, -1, gpu, 0, 0,
                std::move(deps), phase)
      .id;
}

// [SECTION] Model pieces --------------------------------------------------------------------------

PrecisionBytes ProgramBuilder::precision() const {
  return precision_bytes(scenario_.training.precision, scenario_.training.amp_dtype);
}

namespace {
// A stored tensor's dtype from its bytes per element: 2 bytes are the compute dtype when that is
// half precision (fp16 or bf16 recipes), else bf16; 4 bytes fp32.
Dtype dtype_of_bytes(int bytes, Dtype compute) {
  if (bytes != 2) return Dtype::kFp32;
  return compute == Dtype::kFp16 ? Dtype::kFp16 : Dtype::kBf16;
}
}  // namespace

Dtype ProgramBuilder::grads_dtype() const {
  return dtype_of_bytes(precision().grads, precision().compute);
}
Dtype ProgramBuilder::weights_dtype() const {
  return dtype_of_bytes(precision().weights, precision().compute);
}

Bytes ProgramBuilder::weight_bytes() const {
  return scenario_.model.total_params() * precision().weights;
}
Bytes ProgramBuilder::grad_bytes() const {
  return scenario_.model.total_params() * precision().grads;
}
Bytes ProgramBuilder::buffer_bytes() const {
  return scenario_.model.total_buffer_elems() * 4;
}

Bytes ProgramBuilder::optimizer_bytes() const {
  // docs/scenario.md, "training.precision": Adam keeps two fp32 moments (8 B/param), SGD with
  // momentum one (4 B/param), plus the fp32 master copy of mixed-precision recipes.
  return scenario_.model.total_params() * optimizer_bytes_per_param(scenario_.training);
}

ProgramBuilder::~ProgramBuilder() = default;

Program ProgramBuilder::take() {
  whole_layers_.reset();  // its kept kernels and names are the taken Program's
  if (unit_open_) lowered_.add();
  unit_open_ = false;
  lowered_.finish();
  return std::move(program_);
}

LayerLoop& ProgramBuilder::whole_layers() {
  if (!whole_layers_)
    whole_layers_ = std::make_unique<LayerLoop>(*this, whole_layer_figures(scenario_.model));
  return *whole_layers_;
}

namespace {

// A pass's layer kernels in the order they run, and DDP's gradient hook after each backward one.
class KernelRecorder : public LayerHook {
 public:
  KernelRecorder(std::vector<OpId>& ops, const std::function<void(int, OpId)>* on_done)
      : ops_(ops), on_done_(on_done) {}
  void leave(LayerVisit& v) override {
    ops_.push_back(v.kernel);
    if (on_done_ != nullptr && *on_done_) (*on_done_)(v.layer, v.kernel);
  }

 private:
  std::vector<OpId>& ops_;
  const std::function<void(int, OpId)>* on_done_;
};

}  // namespace

ForwardOps ProgramBuilder::forward(const Lane& l, std::int64_t batch, std::vector<Dep> first_deps,
                                   const std::string& prefix) {
  ForwardOps f;
  const auto& layers = scenario_.model.layers;
  const int n = static_cast<int>(layers.size());
  f.activation_allocs.assign(layers.size(), kNoOp);
  LayerLoop& loop = whole_layers();
  SavedActivations saved(*this, loop, f.activation_allocs);
  KernelRecorder recorder(f.layer_ops, nullptr);
  LayerHook* const hooks[] = {&recorder, &saved};
  loop.walk(0, n, true, hooks, [&](int i, bool first) {
    return pass_visit(i, first, StepPhase::kForward, batch, prefix, l, first_deps);
  });
  f.activation_bytes = saved.saved();
  if (!f.layer_ops.empty()) f.last = f.layer_ops.back();
  if (!layers.empty()) {
    f.output_bytes = static_cast<Bytes>(
        std::llround(layers.back().output_bytes_per_sample * static_cast<double>(batch)));
  }
  return f;
}

BackwardOps ProgramBuilder::backward(const Lane& l, std::int64_t batch, const ForwardOps& fwd,
                                     std::vector<Dep> first_deps, const std::string& prefix,
                                     const std::function<void(int, OpId)>& on_layer_done) {
  BackwardOps bw;
  const int n = static_cast<int>(scenario_.model.layers.size());
  LayerLoop& loop = whole_layers();
  std::vector<OpId> allocs = fwd.activation_allocs;
  SavedActivations saved(*this, loop, allocs);
  // DDP's hook runs after the layer's kernel, before its activations are freed.
  KernelRecorder recorder(bw.layer_ops, &on_layer_done);
  LayerHook* const hooks[] = {&saved, &recorder};
  loop.walk(0, n, false, hooks, [&](int i, bool first) {
    return pass_visit(i, first, StepPhase::kBackward, batch, prefix, l, first_deps);
  });
  if (!bw.layer_ops.empty()) bw.last = bw.layer_ops.back();
  return bw;
}

OpId ProgramBuilder::optimizer_step(const Lane& l, std::vector<Dep> deps, bool first_step) {
  const std::int64_t n = scenario_.model.total_params();
  if (first_step) {
    const Bytes state = optimizer_bytes();
    if (state > 0)
      alloc(l.thread, l.stream, l.gpu, MemCategory::kOptimizer, state, "optimizer state");
  }
  // docs/memory.md, "Optimizer step temporaries": foreach Adam's exp_avg_sq_sqrt (a for-loop's
  // per-tensor denom).
  const OptimizerTemporary tmp = optimizer_step_temporary(scenario_, n);
  if (tmp.bytes > 0) alloc(l.thread, l.stream, l.gpu, MemCategory::kOptimizer, tmp.bytes, tmp.name);
  OpId id = kNoOp;
  if (optimizer_runs_for_loop(scenario_.training)) {
    // docs/program.md, "Optimizer and clipping kernels": one op per layer, each its tensors'
    // kernels, so that the host's launches overlap the GPU's work as they do.
    id = emit_for_loop_optimizer(*this, l, std::move(deps));
  } else {
    // Foreach's 5 multi-tensor kernels; Python: the per-parameter-group loop, about one framework
    // op per parameter tensor on top of the kernels (one tensor per layer here).
    const OptimizerLaunch cost = optimizer_launch(scenario_.training, precision(), n, 0, true);
    id = compute(l, op_names::optimizer_step(scenario_.training.optimizer),
                 ComputeKind::kElementwise, cost.flops, cost.traffic, cost.kernels, true,
                 std::move(deps), Phase::kOptimizer);
    program_.ops[id].python_ns =
        python_ns(cost.python_ops + static_cast<double>(scenario_.model.layers.size()));
  }
  if (tmp.bytes > 0)
    release(l.thread, l.stream, l.gpu, MemCategory::kOptimizer, tmp.bytes, tmp.name);
  return id;
}

int optimizer_moment_bytes_per_param(const TrainingSpec& t) {
  if (t.optimizer == OptimizerKind::kAdam) return 8;
  if (t.optimizer == OptimizerKind::kSgd && t.sgd_momentum > 0) return 4;
  return 0;
}

OptimizerCost optimizer_cost(const TrainingSpec& t, const PrecisionBytes& pb, std::int64_t params) {
  const std::int64_t state = optimizer_moment_bytes_per_param(t);
  OptimizerCost c;
  c.traffic = params * (2 * pb.weights + pb.grads + 2 * state + 2 * pb.master);
  c.flops = static_cast<double>(params) * (t.optimizer == OptimizerKind::kAdam ? 10.0 : 3.0);
  return c;
}

// [SECTION] Step pieces ---------------------------------------------------------------------------

void emit_model_setup(ProgramBuilder& b, const Lane& l) {
  b.alloc(l.thread, l.stream, l.gpu, MemCategory::kParams, b.weight_bytes(), "model parameters");
  if (b.buffer_bytes() > 0)
    b.alloc(l.thread, l.stream, l.gpu, MemCategory::kBuffers, b.buffer_bytes(), "module buffers");
}

Bytes loss_traffic_bytes(const ModelSpec& m, Bytes out_bytes) {
  return static_cast<Bytes>(
      std::llround(m.loss_bytes_per_output_byte * static_cast<double>(out_bytes)));
}

OpId emit_loss(ProgramBuilder& b, const Lane& l, std::int64_t batch, Bytes out_bytes,
               std::vector<Dep> deps) {
  if (out_bytes > 0)
    b.alloc(l.thread, l.stream, l.gpu, MemCategory::kActivations, out_bytes, "model output");
  // docs/program.md, "A training step": cross-entropy style loss, ~5 FLOPs per output element
  // (4-byte elements), one read of the output and 3 framework ops, or the framework's own
  // kernels and traffic (ModelSpec::loss_*, core/model/eager_kernels.hpp).
  const ModelSpec& m = b.scenario().model;
  const double elems = static_cast<double>(out_bytes) / 4.0;
  return b.compute(l, "loss", ComputeKind::kElementwise, 5.0 * elems,
                   loss_traffic_bytes(m, out_bytes), m.loss_kernels, true, std::move(deps),
                   Phase::kLoss, batch);
}

void release_after_backward(ProgramBuilder& b, const Lane& l, Bytes out_bytes, Bytes input_bytes) {
  if (out_bytes > 0)
    b.release(l.thread, l.stream, l.gpu, MemCategory::kActivations, out_bytes, "model output");
  if (input_bytes > 0)
    b.release(l.thread, l.stream, l.gpu, MemCategory::kActivations, input_bytes, "input batch");
}

OpId emit_optimizer_and_sync(ProgramBuilder& b, const Lane& l, std::vector<Dep> deps,
                             bool first_step, Bytes grads_to_free) {
  deps = b.fp8().before_optimizer(b, l, std::move(deps));  // delayed scaling (docs/fp8.md)
  // docs/program.md, "Optimizer and clipping kernels": torch.nn.utils.clip_grad_norm_.
  if (b.scenario().training.clip_grad_norm > 0)
    deps = {{emit_clip_grad_norm(b, l, std::move(deps)), DepKind::kStreamWaits}};
  const OpId opt = b.optimizer_step(l, std::move(deps), first_step);
  // zero_grad(set_to_none=True), the default since PyTorch 2.0, drops the .grad tensors.
  if (grads_to_free > 0)
    b.release(l.thread, l.stream, l.gpu, MemCategory::kGrads, grads_to_free, ".grad (zero_grad)");
  // loss.item() for logging synchronises the host with the GPU: the step ends here.
  return b.marker(l.thread, l.gpu, "loss.item()", {{opt, DepKind::kHostWaits}}, Phase::kSync);
}

std::int64_t autograd_graph_nodes(const Scenario& s) {
  // docs/memory.md, "loss_as_tensor": one node per framework op of the forward (a layer's
  // kernels), 3 for the loss and 1 for the `+=` that chains the step onto total_loss.
  double ops = 0;
  for (const LayerSpec& layer : s.model.layers) ops += layer.kernels;
  return static_cast<std::int64_t>(std::llround(ops)) + 3 + 1;
}

void emit_step_end(ProgramBuilder& b, const Lane& l, int step, std::int64_t batch) {
  const TrainingSpec& t = b.scenario().training;
  if (t.leak_loss_as_tensor) {
    // total_loss += loss: backward already freed the saved activations; the graph's nodes and the
    // step's loss scalar stay reachable from total_loss.
    b.alloc(l.thread, l.stream, l.gpu, MemCategory::kAutogradGraph,
            autograd_graph_nodes(b.scenario()) * kAutogradNodeBytes,
            "autograd graph kept by total_loss");
    b.alloc(l.thread, l.stream, l.gpu, MemCategory::kAutogradGraph, kLossScalarBytes,
            "loss scalar kept by total_loss");
  }
  if (t.leak_keep_outputs) {
    // An evaluation forward without torch.no_grad whose logits are appended to a list: autograd
    // saves every activation for a backward that never runs, so nothing is freed.
    const ForwardOps eval = b.forward(l, batch, {}, "eval (grad on): ");
    if (eval.output_bytes > 0) {
      b.alloc(l.thread, l.stream, l.gpu, MemCategory::kActivations, eval.output_bytes,
              "eval output (kept in a list)");
    }
  }
  if (t.empty_cache_every > 0 && step % t.empty_cache_every == 0) {
    // After loss.item() the host has waited for the step's GPU work; empty_cache releases every
    // fully free cached segment (core/program/caching_allocator.hpp).
    b.marker(l.thread, l.gpu, kEmptyCacheOpName, {}, Phase::kMemory);
  }
}

// [SECTION] Data feed -----------------------------------------------------------------------------

std::int64_t batch_for_step(std::int64_t batch, std::int64_t dataset, int step) {
  if (dataset <= 0) return batch;
  const std::int64_t batches_per_epoch = (dataset + batch - 1) / batch;
  const std::int64_t j = (step - 1) % batches_per_epoch;
  return std::min(batch, dataset - j * batch);
}

DataFeed::DataFeed(ProgramBuilder& b, int node, int main_thread, int gpu, int copy_stream,
                   const std::string& rank_label)
    : builder_(b), gpu_(gpu), copy_stream_(copy_stream) {
  (void)main_thread;
  const int workers = b.scenario().training.loader.num_workers;
  for (int w = 0; w < workers; ++w) {
    const std::string label = "dataloader worker " + std::to_string(w) + rank_label;
    const int proc = b.add_process(node, label, true);
    worker_threads_.push_back(b.add_thread(proc, gpu, label));
  }
}

FedBatch DataFeed::next_batch(std::int64_t samples, const Lane& main) {
  const Scenario& s = builder_.scenario();
  const DataLoaderSpec& ld = s.training.loader;
  const int k = next_index_++;
  // docs/program.md, "A training step": loading a batch costs samples x per_sample_load_us of
  // Python.
  const TimeNs load_ns = us_to_ns(static_cast<double>(samples) * ld.per_sample_load_us);
  const Bytes bytes = static_cast<Bytes>(
      std::llround(static_cast<double>(samples) * s.model.input_bytes_per_sample));
  OpId got;
  if (worker_threads_.empty()) {
    got = builder_.host_work(main.thread, main.gpu, "load batch " + std::to_string(k),
                             s.host.python ? load_ns : 0, s.host.python ? 0 : load_ns, {},
                             Phase::kData);
  } else {
    const int n = static_cast<int>(worker_threads_.size());
    const int w = k % n;
    // A worker may run at most prefetch_factor x num_workers batches ahead of the consumer.
    std::vector<Dep> deps;
    const int ahead = std::max(1, ld.prefetch_factor) * n;
    if (k - ahead >= 0) deps.push_back({consumed_[k - ahead], DepKind::kHostWaits});
    const OpId load = builder_.host_work(
        worker_threads_[w], main.gpu, "load batch " + std::to_string(k),
        s.host.python ? load_ns : 0, s.host.python ? 0 : load_ns, std::move(deps), Phase::kData);
    got = builder_.marker(main.thread, main.gpu, "next(loader) batch " + std::to_string(k),
                          {{load, DepKind::kHostWaits}}, Phase::kData);
  }
  if (ld.pin_memory) {
    // The batch is copied into page-locked memory (GIL released) before the async H2D copy.
    const TimeNs pin_ns = round_to_ns(static_cast<double>(bytes) / s.host.host_memcpy_bytes_per_s);
    got = builder_.host_work(main.thread, main.gpu, "pin_memory batch " + std::to_string(k), 0,
                             pin_ns, {}, Phase::kData);
  }
  consumed_.push_back(got);
  const bool pinned = ld.pin_memory;
  const CopyKind kind = pinned ? CopyKind::kH2DPinned : CopyKind::kH2DPageable;
  const int stream = pinned ? copy_stream_ : main.stream;
  builder_.alloc(main.thread, stream, gpu_, MemCategory::kActivations, bytes, "input batch");
  const OpId cp = builder_.copy(main.thread, stream, gpu_,
                                "input H2D (" + std::string(to_string(kind)) + ")", kind, bytes, -1,
                                {}, Phase::kData, builder_.python_ns(1), builder_.dispatch_ns(1));
  if (!pinned) {
    // A pageable copy returns to the host only when done (cudaMemcpy semantics).
    builder_.marker(main.thread, main.gpu, "wait pageable copy", {{cp, DepKind::kHostWaits}},
                    Phase::kData);
  }
  return FedBatch{cp, bytes};
}

}  // namespace csim::core
