// Model parallel (docs/program.md, "Model parallel"): the notes' split of a model over devices
// in one process — `self.seq1 = ...to('cuda:0')`, `self.seq2 = ...to('cuda:1')`, `x.to('cuda:1')`
// in forward. One Python process: the main thread issues the forward layer by layer on each
// layer's device, copying the activation to the next device at each split (a peer copy on the
// destination's compute stream, waiting for the source's last kernel); autograd's thread runs the
// backward in reverse, copying the gradient back across each split. Without micro-batches only
// one GPU computes at a time: the others' idle time is the point of the example.
#include <cmath>

#include "core/program/caching_allocator.hpp"

#include "core/lowering/layer_loop.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/op_names.hpp"
#include "core/lowering/optimizer_kernels.hpp"
#include "core/lowering/optimizer_memory.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/lowering/program_builder.hpp"

namespace csim::core {
namespace {

// Device index (into device_ids) of each layer: split_at when given, else contiguous parts
// balanced by forward FLOPs.
std::vector<int> layer_devices(const Scenario& s) {
  const int n = static_cast<int>(s.strategy.device_ids.size());
  const int nl = static_cast<int>(s.model.layers.size());
  std::vector<int> part_first = s.strategy.parallel.stage_first_layer;
  if (part_first.empty()) {
    for (const Segment& sg : partition_layers(s.model, n)) part_first.push_back(sg.first);
  }
  std::vector<int> dev(static_cast<std::size_t>(nl), 0);
  for (int k = 0; k < n; ++k) {
    const int end = k + 1 < n ? part_first[static_cast<std::size_t>(k + 1)] : nl;
    for (int i = part_first[static_cast<std::size_t>(k)]; i < end; ++i)
      dev[static_cast<std::size_t>(i)] = k;
  }
  return dev;
}

// Where the passes run: the issuing threads (the main thread forward, autograd's thread of each
// device backward), each layer's device index, the devices' GPUs and compute streams.
struct DeviceLayout {
  int main = 0;
  const std::vector<int>* ids = nullptr;
  std::vector<int> dev;       // per layer
  std::vector<int> compute;   // per device
  std::vector<int> autograd;  // per device
};

// The per-layer pass of model parallelism (a LayerHook of the one layer loop, layer_loop.hpp):
// each layer's kernel on its device, and at each split the activation copied forward
// (x.to('cuda:k')) or the gradient copied back (ToCopyBackward). Kernels follow one another
// across devices: each waits for the one before (stream order within a device).
class DevicePlacement : public LayerHook {
 public:
  DevicePlacement(ProgramBuilder& b, const DeviceLayout& d, std::int64_t batch, OpId prev)
      : b_(b),
        d_(d),
        batch_(static_cast<double>(batch)),
        prev_(prev),
        done_(d.ids->size(), kNoOp) {}

  void enter(LayerVisit& v) override {
    const int k = device(v.layer);
    const int g = gpu(k);
    if (v.forward()) {
      v.lane = Lane{d_.main, g, d_.compute[static_cast<std::size_t>(k)]};
      if (v.layer > 0 && device(v.layer - 1) != k) {
        // x.to('cuda:k'): the previous layer's output copied to this device.
        const Bytes bytes = output_bytes(v.layer - 1);
        const std::string prefix(v.prefix);
        b_.alloc(d_.main, v.lane.stream, g, MemCategory::kActivations, bytes,
                 prefix + "activation copy");
        const OpId cp = b_.copy(d_.main, v.lane.stream, g,
                                prefix + "activation to GPU " + std::to_string(g), CopyKind::kPeer,
                                bytes, gpu(device(v.layer - 1)), {{prev_, DepKind::kStreamWaits}},
                                Phase::kForward, b_.python_ns(1), b_.dispatch_ns(1));
        v.deps.push_back({cp, DepKind::kStreamWaits});
      }
      return;
    }
    const int th = d_.autograd[static_cast<std::size_t>(k)];
    v.lane = Lane{th, g, d_.compute[static_cast<std::size_t>(k)]};
    std::vector<Dep> deps{{prev_, DepKind::kStreamWaits}};
    deps.insert(deps.end(), v.deps.begin(), v.deps.end());
    const int nl = static_cast<int>(d_.dev.size());
    if (v.layer + 1 < nl && device(v.layer + 1) != k) {
      // ToCopyBackward: the gradient copied back to this device.
      const OpId cp = b_.copy(th, v.lane.stream, g, "gradient to GPU " + std::to_string(g),
                              CopyKind::kPeer, output_bytes(v.layer), gpu(device(v.layer + 1)),
                              std::move(deps), Phase::kBackward, 0, b_.dispatch_ns(1));
      deps = {{cp, DepKind::kStreamWaits}};
    }
    v.deps = std::move(deps);
  }

  void leave(LayerVisit& v) override {
    prev_ = v.kernel;
    const int k = device(v.layer);
    done_[static_cast<std::size_t>(k)] = v.kernel;
    // Backward past a split: the activation copied in at it is freed.
    if (!v.forward() && v.layer > 0 && device(v.layer - 1) != k)
      b_.release(v.lane.thread, v.lane.stream, v.lane.gpu, MemCategory::kActivations,
                 output_bytes(v.layer - 1), "activation copy");
  }

  OpId last() const { return prev_; }
  // Per device, its last kernel of the pass (kNoOp: none ran there).
  const std::vector<OpId>& done() const { return done_; }

 private:
  int device(int layer) const { return d_.dev[static_cast<std::size_t>(layer)]; }
  int gpu(int k) const { return (*d_.ids)[static_cast<std::size_t>(k)]; }
  Bytes output_bytes(int layer) const {
    return static_cast<Bytes>(std::llround(
        b_.scenario().model.layers[static_cast<std::size_t>(layer)].output_bytes_per_sample *
        batch_));
  }
  ProgramBuilder& b_;
  const DeviceLayout& d_;
  double batch_;
  OpId prev_;
  std::vector<OpId> done_;
};

// The forward layer by layer on each layer's device, through the layer loop. Returns, per layer,
// the saved activations' alloc (kNoOp: none).
std::vector<OpId> forward_on_devices(ProgramBuilder& b, const DeviceLayout& d, std::int64_t batch,
                                     const std::vector<Dep>& first, const std::string& prefix) {
  const int nl = static_cast<int>(d.dev.size());
  std::vector<OpId> act(static_cast<std::size_t>(nl), kNoOp);
  LayerLoop& loop = b.whole_layers();
  DevicePlacement placement(b, d, batch, kNoOp);
  SavedActivations saved(b, loop, act);
  LayerHook* const hooks[] = {&placement, &saved};
  loop.walk(0, nl, true, hooks, [&](int i, bool is_first) {
    return pass_visit(i, is_first, StepPhase::kForward, batch, prefix, Lane{}, first);
  });
  return act;
}

// The model output on the last device and the input batch on the first, freed once backward
// returned (or at the step's end with del_temporaries false).
void release_output_and_input(ProgramBuilder& b, const DeviceLayout& d, const Lane& last, Bytes out,
                              Bytes input) {
  release_after_backward(b, last, out, 0);
  if (input > 0)
    b.release(d.main, d.compute.front(), d.ids->front(), MemCategory::kActivations, input,
              "input batch");
}

}  // namespace

std::int64_t model_parallel_graph_nodes(const Scenario& s) {
  // docs/memory.md, "Under model_parallel": one graph over every device; each x.to('cuda:k')
  // adds a ToCopyBackward node.
  const std::vector<int> dev = layer_devices(s);
  std::int64_t copies = 0;
  for (std::size_t i = 1; i < dev.size(); ++i) copies += dev[i] != dev[i - 1] ? 1 : 0;
  return autograd_graph_nodes(s) + copies;
}

namespace {

// What the script does after loss.item() (docs/memory.md, "Under model_parallel"): one process
// over every device.
void emit_step_end_on_devices(ProgramBuilder& b, const DeviceLayout& d, const Lane& last, int step,
                              std::int64_t batch) {
  const TrainingSpec& t = b.scenario().training;
  if (t.leak_loss_as_tensor) {
    // total_loss lives with the loss on the last device; the graph spans every device.
    b.alloc(last.thread, last.stream, last.gpu, MemCategory::kAutogradGraph,
            model_parallel_graph_nodes(b.scenario()) * kAutogradNodeBytes,
            "autograd graph kept by total_loss");
    b.alloc(last.thread, last.stream, last.gpu, MemCategory::kAutogradGraph, kLossScalarBytes,
            "loss scalar kept by total_loss");
  }
  if (t.leak_keep_outputs) {
    // An evaluation forward without torch.no_grad: each device keeps its layers' saved
    // activations and the activation copied in at its split; the logits stay on the last device.
    forward_on_devices(b, d, batch, {}, "eval (grad on): ");
    const Bytes out = static_cast<Bytes>(std::llround(
        b.scenario().model.layers.back().output_bytes_per_sample * static_cast<double>(batch)));
    if (out > 0)
      b.alloc(last.thread, last.stream, last.gpu, MemCategory::kActivations, out,
              "eval output (kept in a list)");
  }
  if (t.empty_cache_every > 0 && step % t.empty_cache_every == 0) {
    // torch.cuda.empty_cache() empties the cache of every device the process used.
    for (int g : *d.ids) b.marker(d.main, g, kEmptyCacheOpName, {}, Phase::kMemory);
  }
}

}  // namespace

Program lower_model_parallel(const Scenario& s, Progress* progress) {
  ProgramBuilder b(s, progress);
  Program& p = b.program();
  const auto& ids = s.strategy.device_ids;
  const int n = static_cast<int>(ids.size());
  const auto& layers = s.model.layers;
  const int nl = static_cast<int>(layers.size());
  p.strategy_label = "model_parallel (" + std::to_string(n) + " devices, one process)";
  p.active_gpus = ids;
  p.samples_per_step = s.training.global_batch;

  const std::vector<int> dev = layer_devices(s);

  const int node = ids.front() / s.cluster.gpus_per_node;
  const int proc = b.add_process(node, "python (model parallel)", true);
  const int main = b.add_thread(proc, ids.front(), "main");
  std::vector<int> autograd(static_cast<std::size_t>(n)), compute(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) {
    autograd[static_cast<std::size_t>(k)] =
        b.add_thread(proc, ids[static_cast<std::size_t>(k)],
                     "autograd device " + std::to_string(ids[static_cast<std::size_t>(k)]));
    compute[static_cast<std::size_t>(k)] =
        b.add_stream(ids[static_cast<std::size_t>(k)], StreamRole::kCompute, "compute");
  }
  const int copy = b.add_stream(ids.front(), StreamRole::kCopy, "copy");
  const PrecisionBytes pb = b.precision();

  // Setup: each device holds its layers' parameters and buffers.
  b.set_step(0);
  std::vector<std::int64_t> params(static_cast<std::size_t>(n), 0),
      buffers(static_cast<std::size_t>(n), 0);
  for (int i = 0; i < nl; ++i) {
    params[static_cast<std::size_t>(dev[static_cast<std::size_t>(i)])] +=
        layers[static_cast<std::size_t>(i)].params;
    buffers[static_cast<std::size_t>(dev[static_cast<std::size_t>(i)])] +=
        layers[static_cast<std::size_t>(i)].buffer_elems;
  }
  for (int k = 0; k < n; ++k) {
    const int g = ids[static_cast<std::size_t>(k)];
    b.alloc(main, compute[static_cast<std::size_t>(k)], g, MemCategory::kParams,
            params[static_cast<std::size_t>(k)] * pb.weights, "model parameters");
    if (buffers[static_cast<std::size_t>(k)] > 0) {
      b.alloc(main, compute[static_cast<std::size_t>(k)], g, MemCategory::kBuffers,
              buffers[static_cast<std::size_t>(k)] * 4, "module buffers");
    }
  }
  DataFeed feed(b, node, main, ids.front(), copy, "");
  const DeviceLayout layout{main, &ids, dev, compute, autograd};
  const int k_opt = optimizer_bytes_per_param(s.training);

  for (int step = 1; step <= s.training.steps; ++step) {
    b.set_step(step);
    const std::int64_t samples =
        batch_for_step(s.training.global_batch, s.training.dataset_size, step);
    const auto micro = torch_chunk_sizes(samples, s.training.gradient_accumulation);
    std::vector<std::pair<Bytes, Bytes>>
        kept;  // del_temporaries false: (output, input) to step end
    const int last = dev[static_cast<std::size_t>(nl - 1)];
    const Lane last_lane{main, ids[static_cast<std::size_t>(last)],
                         compute[static_cast<std::size_t>(last)]};
    for (std::size_t mi = 0; mi < micro.size(); ++mi) {
      const double bs = static_cast<double>(micro[mi]);
      const FedBatch in = feed.next_batch(micro[mi], Lane{main, ids.front(), compute[0]});
      const std::vector<OpId> act =
          forward_on_devices(b, layout, micro[mi], {{in.copy, DepKind::kStreamWaits}}, "");
      const Bytes out =
          static_cast<Bytes>(std::llround(layers.back().output_bytes_per_sample * bs));
      const OpId loss = emit_loss(b, last_lane, micro[mi], out, {});
      const OpId go = b.marker(main, ids[static_cast<std::size_t>(last)], "loss.backward()", {},
                               Phase::kBackward);
      if (mi == 0) {
        for (int k = 0; k < n; ++k) {
          if (params[static_cast<std::size_t>(k)] == 0) continue;
          const OpId ga =
              b.alloc(autograd[static_cast<std::size_t>(k)], compute[static_cast<std::size_t>(k)],
                      ids[static_cast<std::size_t>(k)], MemCategory::kGrads,
                      params[static_cast<std::size_t>(k)] * pb.grads, ".grad");
          p.ops[static_cast<std::size_t>(ga)].deps = {{go, DepKind::kHostWaits}};
        }
      }
      // Backward in reverse on autograd's thread of each layer's device; the first kernel waits
      // for the loss and for loss.backward() to hand autograd the graph.
      LayerLoop& loop = b.whole_layers();
      DevicePlacement placement(b, layout, micro[mi], loss);
      std::vector<OpId> saved_allocs = act;
      SavedActivations saved(b, loop, saved_allocs);
      LayerHook* const hooks[] = {&placement, &saved};
      const std::vector<Dep> handed{{go, DepKind::kHostWaits}};
      loop.walk(0, nl, false, hooks, [&](int i, bool first) {
        return pass_visit(i, first, StepPhase::kBackward, micro[mi], "", Lane{}, handed);
      });
      const std::vector<OpId>& done = placement.done();
      std::vector<Dep> joins;
      for (int k = 0; k < n; ++k) {
        if (done[static_cast<std::size_t>(k)] != kNoOp) {
          joins.push_back(
              {b.marker(autograd[static_cast<std::size_t>(k)], ids[static_cast<std::size_t>(k)],
                        "autograd done", {}, Phase::kBackward),
               DepKind::kHostWaits});
        }
      }
      b.marker(main, ids.front(), "backward() returns", std::move(joins), Phase::kBackward);
      if (s.training.del_temporaries) {
        release_output_and_input(b, layout, last_lane, out, in.bytes);
      } else {
        kept.emplace_back(out, in.bytes);
      }
    }
    // optimizer.step() over parameters on every device (foreach kernels grouped by device).
    std::vector<Dep> ends;
    for (int k = 0; k < n; ++k) {
      const int g = ids[static_cast<std::size_t>(k)];
      const Lane lane{main, g, compute[static_cast<std::size_t>(k)]};
      const std::int64_t np = params[static_cast<std::size_t>(k)];
      if (step == 1 && np * k_opt > 0)
        b.alloc(main, lane.stream, g, MemCategory::kOptimizer, np * k_opt, "optimizer state");
      // docs/program.md, "A training step": optimizer traffic and FLOPs per parameter.
      const OptimizerLaunch cost = optimizer_launch(
          s.training, pb, np, parameter_tensors_of_share(s.model, np), runs_torch_optim(s));
      // docs/memory.md, "Optimizer step temporaries": per device group, foreach Adam's sqrt.
      const OptimizerTemporary tmp = optimizer_step_temporary(s, np);
      if (tmp.bytes > 0)
        b.alloc(main, lane.stream, g, MemCategory::kOptimizer, tmp.bytes, tmp.name);
      const OpId o = b.compute(lane, op_names::optimizer_step(s.training.optimizer),
                               ComputeKind::kElementwise, cost.flops, cost.traffic, cost.kernels,
                               true, b.fp8().before_optimizer(b, lane, {}), Phase::kOptimizer);
      if (tmp.bytes > 0)
        b.release(main, lane.stream, g, MemCategory::kOptimizer, tmp.bytes, tmp.name);
      if (np > 0)
        b.release(main, lane.stream, g, MemCategory::kGrads, np * pb.grads, ".grad (zero_grad)");
      ends.push_back({o, DepKind::kHostWaits});
    }
    b.marker(main, ids.front(), "loss.item()", std::move(ends), Phase::kSync);
    for (const auto& [out, input] : kept)
      release_output_and_input(b, layout, last_lane, out, input);
    emit_step_end_on_devices(b, layout, last_lane, step, samples);
  }
  return b.take();
}

}  // namespace csim::core
