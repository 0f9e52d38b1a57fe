// torch.nn.DataParallel (docs/program.md, "DataParallel"): one Python process; per step
//  (1) the batch goes to device_ids[0] and is scattered along dim 0 with torch.chunk semantics,
//  (2) replicate: broadcast_coalesced of parameters and buffers from device_ids[0],
//  (3) parallel_apply: one Python thread per replica runs its forward (Python under the GIL),
//  (4) gather of the outputs onto output_device, where the loss is computed,
//  (5) backward on autograd's per-device C++ threads: Gather's backward scatters the output
//      gradient, Broadcast's backward reduce-adds the replicas' gradients onto device_ids[0],
//  (6) optimizer on device_ids[0] only,
//  (7) what the script does after loss.item() (docs/memory.md, "Scenario switches"), through the
//      DataParallel module; with del_temporaries false the gathered output and the input batch
//      live until the optimizer has run.
#include <algorithm>
#include <map>

#include "core/lowering/lowering.hpp"
#include "core/lowering/program_builder.hpp"
#include "core/program/caching_allocator.hpp"

namespace csim::core {
namespace {

// Python framework ops of nn.parallel.replicate per layer: module copy, parameter and buffer
// re-binding (docs/program.md, "DataParallel").
constexpr double kReplicatePyOpsPerLayer = 4.0;
constexpr double kReplicatePyOpsFixed = 10.0;

struct DeviceLanes {
  int gpu = 0;
  int compute = 0;         // default stream
  int copy = 0;            // side stream used by Scatter/Gather copies
  int replica_thread = 0;  // parallel_apply worker
  int autograd_thread = 0;
};

}  // namespace

Program lower_data_parallel(const Scenario& s, Progress* progress) {
  ProgramBuilder b(s, progress);
  Program& p = b.program();
  const std::vector<int>& ids = s.strategy.device_ids;
  const int n = static_cast<int>(ids.size());
  const int d0 = ids.front();
  const int od = s.strategy.output_device;
  const int node = d0 / s.cluster.gpus_per_node;
  p.strategy_label =
      "data_parallel (" + std::to_string(n) + " GPUs, output_device " + std::to_string(od) + ")";
  p.active_gpus = ids;
  p.samples_per_step = s.training.global_batch;

  const int proc = b.add_process(node, "python (DataParallel)", true);
  const int main = b.add_thread(proc, d0, "main");
  std::map<int, DeviceLanes> dev;
  for (int i = 0; i < n; ++i) {
    DeviceLanes d;
    d.gpu = ids[i];
    d.compute = b.add_stream(d.gpu, StreamRole::kCompute, "compute");
    d.copy = b.add_stream(d.gpu, StreamRole::kCopy, "scatter/gather copy");
    d.replica_thread = b.add_thread(proc, d.gpu, "parallel_apply replica " + std::to_string(i));
    d.autograd_thread = b.add_thread(proc, d.gpu, "autograd device " + std::to_string(d.gpu));
    dev[d.gpu] = d;
  }
  const Lane lane0{main, d0, dev[d0].compute};
  std::map<int, int> group_of_replicas;  // replica count -> group of the first r devices
  auto group_for = [&](int r) {
    auto it = group_of_replicas.find(r);
    if (it != group_of_replicas.end()) return it->second;
    const int g = b.add_group(std::vector<int>(ids.begin(), ids.begin() + r),
                              "data_parallel x" + std::to_string(r));
    group_of_replicas[r] = g;
    return g;
  };

  b.set_step(0);
  emit_model_setup(b, lane0);
  DataFeed feed(b, node, main, d0, dev[d0].copy, "");
  const Bytes replica_bytes = b.weight_bytes() + b.buffer_bytes();
  bool warned = false;

  for (int step = 1; step <= s.training.steps; ++step) {
    b.set_step(step);
    const std::int64_t samples =
        batch_for_step(s.training.global_batch, s.training.dataset_size, step);
    const auto micro = torch_chunk_sizes(samples, s.training.gradient_accumulation);
    OpId last_grad_op = kNoOp;
    std::vector<std::pair<Bytes, Bytes>> kept;  // del_temporaries false: (gathered output, input)
    for (std::size_t m = 0; m < micro.size(); ++m) {
      const FedBatch in = feed.next_batch(micro[m], lane0);
      // (1) scatter: torch.chunk sizes; only as many replicas as chunks run.
      const std::vector<std::int64_t> chunks = torch_chunk_sizes(micro[m], n);
      const int r = static_cast<int>(chunks.size());
      if (r < n && !warned) {
        p.warnings.push_back("batch of " + std::to_string(micro[m]) + " over " + std::to_string(n) +
                             " GPUs: torch.chunk gives " + std::to_string(r) + " chunks, so only " +
                             std::to_string(r) + " replicas run");
        warned = true;
      }
      std::vector<OpId> chunk_ready(r);
      std::vector<Bytes> chunk_bytes(r);
      for (int i = 0; i < r; ++i) {
        chunk_bytes[i] = in.bytes * chunks[i] / micro[m];
        if (i == 0) {
          chunk_ready[i] = in.copy;  // chunk 0 is a view of the batch on device_ids[0]
          continue;
        }
        const DeviceLanes& d = dev[ids[i]];
        b.alloc(main, d.copy, d.gpu, MemCategory::kActivations, chunk_bytes[i], "input chunk");
        OpId c = b.copy(main, d.copy, d.gpu, "scatter chunk " + std::to_string(i), CopyKind::kPeer,
                        chunk_bytes[i], d0, {{in.copy, DepKind::kStreamWaits}}, Phase::kScatter,
                        b.python_ns(1), b.dispatch_ns(1));
        p.ops[c].batch = chunks[i];
        chunk_ready[i] = c;
      }
      // (2) replicate: broadcast_coalesced from device_ids[0]; replica 0 uses the module itself.
      std::vector<OpId> bcast(r, kNoOp);
      if (r > 1) {
        const int g = group_for(r);
        const int inst = b.new_instance();
        const double py_ops = kReplicatePyOpsFixed +
                              kReplicatePyOpsPerLayer * static_cast<double>(s.model.layers.size());
        for (int i = 0; i < r; ++i) {
          const DeviceLanes& d = dev[ids[i]];
          if (i > 0)
            b.alloc(main, d.compute, d.gpu, MemCategory::kParams, replica_bytes,
                    "replica parameters");
          bcast[i] =
              b.collective(main, d.compute, d.gpu, "replicate: broadcast_coalesced",
                           CollectiveKind::kBroadcast, g, d0, inst, replica_bytes, {},
                           Phase::kReplicate, i == 0 ? b.python_ns(py_ops) : 0, b.dispatch_ns(1));
          b.set_dtype(bcast[i], b.weights_dtype());
        }
      }
      // (3) parallel_apply: a thread per replica, each running the forward of its chunk.
      std::vector<ForwardOps> fwd(r);
      std::vector<OpId> replica_done(r);
      std::vector<OpId> outputs_alloc(r);
      for (int i = 0; i < r; ++i) {
        const DeviceLanes& d = dev[ids[i]];
        const OpId spawn = b.host_work(main, d0, "start thread replica " + std::to_string(i),
                                       s.host.python ? us_to_ns(s.host.thread_start_us) : 0, 0, {},
                                       Phase::kParallelApply);
        std::vector<Dep> deps{{spawn, DepKind::kHostWaits},
                              {chunk_ready[i], DepKind::kStreamWaits}};
        if (bcast[i] != kNoOp) deps.push_back({bcast[i], DepKind::kStreamWaits});
        const Lane rl{d.replica_thread, d.gpu, d.compute};
        fwd[i] = b.forward(rl, chunks[i], std::move(deps), "replica " + std::to_string(i) + ": ");
        outputs_alloc[i] = b.alloc(d.replica_thread, d.compute, d.gpu, MemCategory::kActivations,
                                   fwd[i].output_bytes, "replica output");
        replica_done[i] =
            b.marker(d.replica_thread, d.gpu, "replica " + std::to_string(i) + " returns", {},
                     Phase::kParallelApply);
      }
      std::vector<Dep> join;
      for (OpId o : replica_done) join.push_back({o, DepKind::kHostWaits});
      b.marker(main, d0, "join replica threads", std::move(join), Phase::kParallelApply);
      // (4) gather onto output_device, then the loss there.
      const DeviceLanes& out = dev[od];
      Bytes gathered = 0;
      for (int i = 0; i < r; ++i) gathered += fwd[i].output_bytes;
      b.alloc(main, out.compute, od, MemCategory::kGatheredOutputs, gathered, "gathered outputs");
      std::vector<Dep> loss_deps;
      for (int i = 0; i < r; ++i) {
        if (ids[i] == od) {
          loss_deps.push_back({fwd[i].last, DepKind::kStreamWaits});
          continue;
        }
        const OpId c =
            b.copy(main, out.compute, od, "gather output " + std::to_string(i), CopyKind::kPeer,
                   fwd[i].output_bytes, ids[i], {{fwd[i].last, DepKind::kStreamWaits}},
                   Phase::kGather, i == 0 ? b.python_ns(2) : 0, b.dispatch_ns(1));
        loss_deps.push_back({c, DepKind::kStreamWaits});
      }
      const OpId loss = b.compute(Lane{main, od, out.compute}, "loss", ComputeKind::kElementwise,
                                  5.0 * static_cast<double>(gathered) / 4.0, gathered, 3, true,
                                  std::move(loss_deps), Phase::kLoss, micro[m]);
      // (5) backward on the per-device autograd threads.
      const OpId go = b.marker(main, d0, "loss.backward()", {}, Phase::kBackward);
      const OpId grad_out =
          b.alloc(out.autograd_thread, out.compute, od, MemCategory::kGatheredOutputs, gathered,
                  "grad of gathered outputs");
      p.ops[grad_out].deps = {{go, DepKind::kHostWaits}};
      const OpId loss_bwd = b.compute(
          Lane{out.autograd_thread, od, out.compute}, "loss.bwd", ComputeKind::kElementwise,
          2.0 * static_cast<double>(gathered) / 4.0, 2 * gathered, 2, s.model.python_hooks,
          {{loss, DepKind::kStreamWaits}}, Phase::kBackward, micro[m]);
      // Gather's backward is a Scatter of the output gradient to the replicas' devices.
      std::vector<OpId> grad_in(r, loss_bwd);
      for (int i = 0; i < r; ++i) {
        if (ids[i] == od) continue;
        const DeviceLanes& d = dev[ids[i]];
        b.alloc(out.autograd_thread, d.copy, d.gpu, MemCategory::kActivations, fwd[i].output_bytes,
                "grad of replica output");
        grad_in[i] = b.copy(out.autograd_thread, d.copy, d.gpu,
                            "gather.bwd: scatter grad " + std::to_string(i), CopyKind::kPeer,
                            fwd[i].output_bytes, od, {{loss_bwd, DepKind::kStreamWaits}},
                            Phase::kBackward, 0, b.dispatch_ns(1));
      }
      const OpId handed =
          b.marker(out.autograd_thread, od, "gather.bwd done", {}, Phase::kBackward);
      std::vector<OpId> bwd_last(r), bwd_done(r);
      for (int i = 0; i < r; ++i) {
        const DeviceLanes& d = dev[ids[i]];
        const OpId ga = b.alloc(d.autograd_thread, d.compute, d.gpu, MemCategory::kGrads,
                                b.grad_bytes(), "replica grads");
        p.ops[ga].deps = {{handed, DepKind::kHostWaits}};
        const Lane bl{d.autograd_thread, d.gpu, d.compute};
        const BackwardOps bw =
            b.backward(bl, chunks[i], fwd[i], {{grad_in[i], DepKind::kStreamWaits}},
                       "replica " + std::to_string(i) + ": ", {});
        bwd_last[i] = bw.last;
        bwd_done[i] =
            b.marker(d.autograd_thread, d.gpu, "replica " + std::to_string(i) + " backward issued",
                     {}, Phase::kBackward);
      }
      // Broadcast's backward: ReduceAddCoalesced onto device_ids[0], run by device_ids[0]'s
      // autograd thread once every replica's gradients exist.
      const DeviceLanes& first = dev[d0];
      std::vector<Dep> all_grads;
      for (int i = 0; i < r; ++i) all_grads.push_back({bwd_done[i], DepKind::kHostWaits});
      const bool accumulate = m > 0;
      const OpId ra =
          b.alloc(first.autograd_thread, first.compute, d0, MemCategory::kGrads, b.grad_bytes(),
                  accumulate ? "reduced grads (to accumulate)" : ".grad (reduced)");
      p.ops[ra].deps = std::move(all_grads);
      OpId reduced = bwd_last[0];
      if (r > 1) {
        const int g = group_for(r);
        const int inst = b.new_instance();
        for (int i = 0; i < r; ++i) {
          const DeviceLanes& d = dev[ids[i]];
          const OpId c = b.collective(
              first.autograd_thread, d.compute, d.gpu, "broadcast.bwd: reduce_add_coalesced",
              CollectiveKind::kReduce, g, d0, inst, b.grad_bytes(),
              {{bwd_last[i], DepKind::kStreamWaits}}, Phase::kReduce, 0, b.dispatch_ns(1));
          b.set_dtype(c, b.grads_dtype());
          if (i == 0) reduced = c;
        }
      }
      if (accumulate) {
        reduced = b.compute(Lane{first.autograd_thread, d0, first.compute}, "accumulate .grad",
                            ComputeKind::kElementwise, static_cast<double>(s.model.total_params()),
                            3 * b.grad_bytes(), 1, false, {}, Phase::kBackward);
        b.release(first.autograd_thread, first.compute, d0, MemCategory::kGrads, b.grad_bytes(),
                  "reduced grads (accumulated)");
      }
      // Replica-side temporaries die with the autograd graph.
      for (int i = 0; i < r; ++i) {
        const DeviceLanes& d = dev[ids[i]];
        b.release(first.autograd_thread, d.compute, d.gpu, MemCategory::kGrads, b.grad_bytes(),
                  "replica grads");
        if (i > 0) {
          b.release(first.autograd_thread, d.compute, d.gpu, MemCategory::kParams, replica_bytes,
                    "replica parameters");
          b.release(first.autograd_thread, d.compute, d.gpu, MemCategory::kActivations,
                    chunk_bytes[i], "input chunk");
        }
        b.release(first.autograd_thread, d.compute, d.gpu, MemCategory::kActivations,
                  fwd[i].output_bytes, "replica output");
        if (ids[i] != od)
          b.release(first.autograd_thread, d.compute, d.gpu, MemCategory::kActivations,
                    fwd[i].output_bytes, "grad of replica output");
      }
      last_grad_op = reduced;
      const OpId ag_done =
          b.marker(first.autograd_thread, d0, "autograd done", {}, Phase::kBackward);
      b.marker(main, d0, "backward() returns", {{ag_done, DepKind::kHostWaits}}, Phase::kBackward);
      // The script's temporaries: the gathered output on output_device and the input batch on
      // device_ids[0]; autograd frees the output's gradient.
      if (s.training.del_temporaries) {
        b.release(main, out.compute, od, MemCategory::kGatheredOutputs, gathered,
                  "gathered outputs");
      }
      b.release(main, out.compute, od, MemCategory::kGatheredOutputs, gathered,
                "grad of gathered outputs");
      if (s.training.del_temporaries) {
        b.release(main, dev[d0].compute, d0, MemCategory::kActivations, in.bytes, "input batch");
      } else {
        kept.emplace_back(gathered, in.bytes);
      }
    }
    // (6) optimizer on device_ids[0] only.
    emit_optimizer_and_sync(b, lane0, {{last_grad_op, DepKind::kStreamWaits}}, step == 1,
                            b.grad_bytes());
    // del_temporaries false: (output, input) of each micro-batch live until here.
    for (const auto& [gathered, input] : kept) {
      b.release(main, dev[od].compute, od, MemCategory::kGatheredOutputs, gathered,
                "gathered outputs");
      b.release(main, dev[d0].compute, d0, MemCategory::kActivations, input, "input batch");
    }
    // (7) docs/memory.md, "Scenario switches" under DataParallel.
    const TrainingSpec& t = s.training;
    const std::vector<std::int64_t> chunks = torch_chunk_sizes(samples, n);
    const int r = static_cast<int>(chunks.size());
    const Lane out_lane{main, od, dev[od].compute};
    if (t.leak_loss_as_tensor) {
      // total_loss lives on output_device; it keeps every replica's forward nodes, the loss's and
      // the `+=`, and DataParallel's Scatter, Broadcast and Gather functions.
      const std::int64_t per_replica = autograd_graph_nodes(s) - 4;
      b.alloc(main, out_lane.stream, od, MemCategory::kAutogradGraph,
              (r * per_replica + 4 + 3) * kAutogradNodeBytes, "autograd graph kept by total_loss");
      b.alloc(main, out_lane.stream, od, MemCategory::kAutogradGraph, kLossScalarBytes,
              "loss scalar kept by total_loss");
    }
    if (t.leak_keep_outputs) {
      // An evaluation forward through the module without torch.no_grad, its gathered logits kept
      // in a list: each replica's saved activations stay, and so do the replicas' parameter
      // copies (the graph's GEMMs saved them); the gathered output stays on output_device.
      Bytes gathered = 0;
      for (int i = 0; i < r; ++i) {
        const DeviceLanes& d = dev[ids[i]];
        if (i > 0)
          b.alloc(main, d.compute, d.gpu, MemCategory::kParams, replica_bytes,
                  "eval replica parameters (kept by the graph)");
        const ForwardOps eval = b.forward(Lane{d.replica_thread, d.gpu, d.compute}, chunks[i], {},
                                          "eval (grad on): replica " + std::to_string(i) + ": ");
        gathered += eval.output_bytes;
      }
      if (gathered > 0)
        b.alloc(main, out_lane.stream, od, MemCategory::kGatheredOutputs, gathered,
                "eval outputs (kept in a list)");
    }
    if (t.empty_cache_every > 0 && step % t.empty_cache_every == 0) {
      // torch.cuda.empty_cache() releases the cached segments of every device.
      for (int g : ids) b.marker(main, g, kEmptyCacheOpName, {}, Phase::kMemory);
    }
  }
  return b.take();
}

}  // namespace csim::core
