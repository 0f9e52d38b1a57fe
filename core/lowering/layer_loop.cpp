// The one layer loop (layer_loop.hpp; docs/program.md, "One layer loop").
#include "core/lowering/layer_loop.hpp"

#include <cmath>

#include "core/lowering/parallel_plan.hpp"
#include "core/units.hpp"

namespace csim::core {

std::vector<LayerFigures> whole_layer_figures(const ModelSpec& m) {
  std::vector<LayerFigures> out;
  out.reserve(m.layers.size());
  for (const LayerSpec& l : m.layers) {
    LayerFigures f;
    f.params = l.params;
    f.flops_per_sample = l.fwd_flops_per_sample;
    f.traffic_per_sample = l.fwd_bytes_per_sample;
    f.bwd_flops_per_sample = l.bwd_flops_per_sample;
    f.bwd_traffic_per_sample = l.bwd_bytes_per_sample;
    f.act_bytes_per_sample = l.activation_bytes_per_sample;
    f.output_bytes_per_sample = l.output_bytes_per_sample;
    out.push_back(f);
  }
  return out;
}

std::vector<LayerFigures> sharded_layer_figures(const std::vector<ShardedLayer>& sharded) {
  std::vector<LayerFigures> out;
  out.reserve(sharded.size());
  for (const ShardedLayer& sl : sharded) {
    LayerFigures f;
    f.params = sl.params;
    f.flops_per_sample = sl.flops_per_sample;
    f.traffic_per_sample = sl.traffic_per_sample;
    f.bwd_flops_per_sample = sl.bwd_flops_per_sample;
    f.bwd_traffic_per_sample = sl.bwd_traffic_per_sample;
    f.act_bytes_per_sample = sl.act_bytes_per_sample;
    f.output_bytes_per_sample = sl.output_bytes_per_sample;
    out.push_back(f);
  }
  return out;
}

LayerVisit pass_visit(int layer, bool first, StepPhase phase, std::int64_t batch,
                      std::string_view prefix, const Lane& lane,
                      const std::vector<Dep>& first_deps) {
  LayerVisit v;
  v.layer = layer;
  v.phase = phase;
  v.batch = batch;
  v.prefix = prefix;
  v.lane = lane;
  if (first) v.deps = first_deps;
  return v;
}

LayerLoop::LayerLoop(ProgramBuilder& b, std::vector<LayerFigures> figures)
    : b_(b), m_(b.scenario().model), figures_(std::move(figures)), kernels_(figures_.size()) {}

NameId LayerLoop::kernel_name(const LayerVisit& v) {
  if (last_names_ == nullptr || v.prefix != last_prefix_) {
    last_prefix_.assign(v.prefix);
    NameTable& t = names_[last_prefix_];
    if (t.empty()) t.resize(figures_.size());
    last_names_ = &t;
  }
  KernelName& k = (*last_names_)[static_cast<std::size_t>(v.layer)][phase_index(v.phase)];
  if (k.index != 0) return NameId{k.index - 1, k.has_field ? v.micro : -1};
  const LayerSpec& l = m_.layers[static_cast<std::size_t>(v.layer)];
  const std::string prefix(v.prefix);
  const NameId id = op_names::layer_kernel(prefix, v.micro, l.name, v.phase).intern(b_.names());
  k.index = id.index + 1;
  // As StringPool::intern: the id carries the field where the pattern holds the field's byte (a
  // field of -1 is dropped either way).
  k.has_field = b_.names().pattern(id).find(kNameField) != std::string_view::npos;
  return id;
}

OpId LayerLoop::kernel(LayerVisit& v) {
  const LayerSpec& layer = m_.layers[static_cast<std::size_t>(v.layer)];
  const LayerFigures& f = figures(v.layer);
  const PrecisionBytes pb = b_.precision();
  const double b = static_cast<double>(v.batch);
  // A forward's launches hold the GIL; a recompute is autograd's C++ re-running the saved
  // forward; a backward takes the GIL only for the model's Python hooks.
  const bool python =
      v.phase == StepPhase::kForward || (v.phase == StepPhase::kBackward && m_.python_hooks);
  // FP8 casts (docs/fp8.md): their label ("mb1 h.0.attn.qkv"), as text, only where the layer has
  // them (no string per kernel otherwise).
  const bool fp8 = b_.fp8().fp8_layer(v.layer);
  const std::string fp8_label =
      fp8 ? NameRef::cat({v.prefix, layer.name}, v.micro).str(b_.names()) : std::string();
  const NameRef name(kernel_name(v));
  OpId c = kNoOp;
  if (v.forward()) {
    std::vector<Dep> deps =
        b_.fp8().before_forward(b_, v.lane, v.layer, f.params, f.act_bytes_per_sample, v.batch,
                                fp8_label, python, std::move(v.deps));
    const Bytes traffic =
        static_cast<Bytes>(std::llround(f.traffic_per_sample * b)) + f.params * pb.weights;
    c = b_.compute(v.lane, name, layer.kind, f.flops_per_sample * b, traffic, layer.kernels, python,
                   std::move(deps), v.phase, v.batch);
  } else {
    // Backward: 2x the forward FLOPs unless the layer states its own; the layer's backward
    // traffic, 2x the forward's unless it says otherwise (docs/program.md, "A training step").
    std::vector<Dep> deps =
        b_.fp8().before_backward(b_, v.lane, v.layer, f.params, f.output_bytes_per_sample, v.batch,
                                 fp8_label, python, std::move(v.deps));
    const Bytes traffic =
        backward_traffic_bytes(f.traffic_per_sample, f.bwd_traffic_per_sample, b) +
        f.params * (pb.weights + pb.grads);
    c = b_.compute(v.lane, name, layer.kind,
                   backward_flops(f.flops_per_sample, f.bwd_flops_per_sample, b), traffic,
                   backward_kernels(layer), python, std::move(deps), v.phase, v.batch);
  }
  b_.set_layer_efficiency(c, layer, !v.forward());
  b_.fp8().mark(b_, c, v.layer);
  // The layer's own Python around its kernels (model.layers[].extra_python_us: the notes' GIL
  // example), where its forward runs the Python.
  if (v.phase == StepPhase::kForward && layer.extra_python_us > 0 && b_.scenario().host.python)
    b_.program().ops[static_cast<std::size_t>(c)].python_ns += us_to_ns(layer.extra_python_us);
  return c;
}

OpId LayerLoop::emit(LayerVisit& v, LayerHooks hooks) {
  for (LayerHook* h : hooks) h->begin_kernel(v);
  const bool fp8 = b_.fp8().fp8_layer(v.layer);
  KernelOp* const t =
      fp8 ? nullptr : &kernels_[static_cast<std::size_t>(v.layer)][phase_index(v.phase)];
  if (t != nullptr && t->valid && t->op.batch == v.batch) {
    // Copied into place (ProgramBuilder::add's id and step), not through a temporary Op. The name
    // as an id alone: a NameRef is 112 bytes, value-initialised on every construction, which perf
    // showed as the costliest instruction of the kernel path.
    const NameId name = kernel_name(v);
    std::vector<Op>& ops = b_.program().ops;
    v.kernel = static_cast<OpId>(ops.size());
    Op& op = ops.emplace_back(t->op);
    op.id = v.kernel;
    op.step = b_.step();
    op.name = name;
    op.thread = v.lane.thread;
    op.stream = v.lane.stream;
    op.gpu = v.lane.gpu;
    op.deps = std::move(v.deps);
  } else {
    v.kernel = kernel(v);
    if (t != nullptr) {  // as emitted, before any end_kernel hook changes it
      t->op = b_.program().ops[static_cast<std::size_t>(v.kernel)];
      t->op.deps.clear();
      t->valid = true;
    }
  }
  for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) (*it)->end_kernel(v);
  return v.kernel;
}

void SavedActivations::enter(LayerVisit& v) {
  if (v.phase != StepPhase::kForward) return;
  const LayerSpec& l = b_.scenario().model.layers[static_cast<std::size_t>(v.layer)];
  // Saved activations (and the last layer's output) are allocated before the kernel writes them.
  const Bytes act = static_cast<Bytes>(
      std::llround(loop_.figures(v.layer).act_bytes_per_sample * static_cast<double>(v.batch)));
  OpId a = kNoOp;
  if (act > 0) {
    a = b_.alloc(v.lane.thread, v.lane.stream, v.lane.gpu, MemCategory::kActivations, act,
                 NameRef::cat({v.prefix, l.name, ".act"}));
    saved_ += act;
  }
  allocs_[static_cast<std::size_t>(v.layer)] = a;
}

void SavedActivations::leave(LayerVisit& v) {
  if (v.phase != StepPhase::kBackward) return;
  const OpId a = allocs_[static_cast<std::size_t>(v.layer)];
  if (a == kNoOp) return;
  const LayerSpec& l = b_.scenario().model.layers[static_cast<std::size_t>(v.layer)];
  b_.release(v.lane.thread, v.lane.stream, v.lane.gpu, MemCategory::kActivations,
             b_.program().ops[static_cast<std::size_t>(a)].bytes,
             NameRef::cat({v.prefix, l.name, ".act"}));
}

}  // namespace csim::core
