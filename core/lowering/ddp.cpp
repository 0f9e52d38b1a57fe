// DistributedDataParallel (docs/program.md, "DDP"): one process per GPU (or, as a labelled
// what-if PyTorch does not support, one thread per GPU in one process); each rank loads a
// DistributedSampler shard, broadcasts module buffers from rank 0 before each forward
// (broadcast_buffers), and during backward copies each gradient into its bucket and all-reduces
// every bucket, strictly in bucket order, on a separate NCCL stream as soon as the bucket is full,
// overlapping the rest of backward. Buckets: 1 MiB first, then bucket_cap_mb, filled in reverse
// parameter order; rebuilt after the first iteration in the order gradients became ready.
// no_sync during gradient accumulation skips the all-reduce of all but the last micro-step.
#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/program_builder.hpp"

namespace csim::core {
namespace {

struct Rank {
  int gpu = 0;
  int process = 0;
  int main = 0, autograd = 0;
  int compute = 0, nccl = 0, copy = 0;
};

// Per-bucket progress during one backward: tensors still missing, and launch order.
struct BucketState {
  std::vector<int> bucket_of_layer;  // layer index -> bucket (-1: no params)
  std::vector<int> missing;          // per bucket
  std::vector<OpId> last_ready_op;   // per bucket: op after which the bucket is complete
  int next_to_launch = 0;
};

}  // namespace

Program lower_ddp(const Scenario& s, Progress* progress) {
  ProgramBuilder b(s, progress);
  Program& p = b.program();
  const DdpSpec& ddp = s.strategy.ddp;
  const std::vector<int>& ids = s.strategy.device_ids;
  const int n = static_cast<int>(ids.size());
  const bool threads = ddp.launcher == DdpLauncher::kThread;
  if (threads) {
    const int node0 = ids.front() / s.cluster.gpus_per_node;
    for (int g : ids) {
      if (g / s.cluster.gpus_per_node != node0) {
        throw InputError(s.file, "strategy.ddp.launcher",
                         "the thread launcher runs every rank in one process, so all device_ids must be on one node",
                         "use launcher \"process\" for multi-node runs");
      }
    }
  }
  p.strategy_label = threads ? "ddp (" + std::to_string(n) + " ranks, WHAT-IF: one thread per GPU, not supported by PyTorch)"
                             : "ddp (" + std::to_string(n) + " processes)";
  p.active_gpus = ids;
  const std::int64_t global = s.training.global_batch;
  const std::int64_t per_rank = global / n;
  if (per_rank < 1) {
    throw InputError(s.file, "training.global_batch",
                     "global batch " + std::to_string(global) + " is smaller than the " + std::to_string(n) + " DDP ranks",
                     "use a global batch of at least " + std::to_string(n));
  }
  if (global % n != 0) {
    p.warnings.push_back("global batch " + std::to_string(global) + " is not divisible by " + std::to_string(n) +
                         " ranks: each rank takes " + std::to_string(per_rank) + " samples (" +
                         std::to_string(per_rank * n) + " per step)");
  }
  p.samples_per_step = per_rank * n;

  // Structure: processes, threads, streams.
  std::vector<Rank> ranks(n);
  int shared_process = -1;
  if (threads) shared_process = b.add_process(ids.front() / s.cluster.gpus_per_node, "python (all ranks, thread launcher)", true);
  for (int r = 0; r < n; ++r) {
    Rank& rk = ranks[r];
    rk.gpu = ids[r];
    const int node = rk.gpu / s.cluster.gpus_per_node;
    rk.process = threads ? shared_process : b.add_process(node, "python rank " + std::to_string(r), true);
    rk.main = b.add_thread(rk.process, rk.gpu, threads ? "rank " + std::to_string(r) + " thread" : "main");
    rk.autograd = b.add_thread(rk.process, rk.gpu, "autograd device " + std::to_string(rk.gpu));
    rk.compute = b.add_stream(rk.gpu, StreamRole::kCompute, "compute");
    rk.nccl = b.add_stream(rk.gpu, StreamRole::kComm, "nccl");
    rk.copy = b.add_stream(rk.gpu, StreamRole::kCopy, "copy");
  }
  const int world = b.add_group(ids, "ddp world");

  // Buckets over the layers' gradients (one tensor per layer here), reverse parameter order.
  const auto& layers = s.model.layers;
  const int grad_elem = b.precision().grads;
  std::vector<int> order;  // layer indices in bucket-fill order
  for (int i = static_cast<int>(layers.size()) - 1; i >= 0; --i) {
    if (layers[i].params > 0) order.push_back(i);
  }
  auto make_buckets = [&](const std::vector<int>& layer_order) {
    std::vector<Bytes> sizes;
    for (int li : layer_order) sizes.push_back(layers[li].params * grad_elem);
    const auto by_index = assign_buckets(sizes, static_cast<Bytes>(std::llround(ddp.first_bucket_mb * kMiB)),
                                         static_cast<Bytes>(std::llround(ddp.bucket_cap_mb * kMiB)));
    std::vector<std::vector<int>> by_layer;
    for (const auto& bucket : by_index) {
      by_layer.emplace_back();
      for (int k : bucket) by_layer.back().push_back(layer_order[k]);
    }
    return by_layer;
  };
  std::vector<std::vector<int>> buckets = make_buckets(order);
  std::vector<int> ready_order;  // recorded during the first backward, for the rebuild

  // Setup: parameters, buffers, bucket buffers; DDP's constructor broadcasts rank 0's state.
  b.set_step(0);
  const int setup_inst = b.new_instance();
  for (int r = 0; r < n; ++r) {
    const Rank& rk = ranks[r];
    const Lane lane{rk.main, rk.gpu, rk.compute};
    emit_model_setup(b, lane);
    if (!ddp.gradient_as_bucket_view) b.alloc(rk.main, rk.compute, rk.gpu, MemCategory::kCommBuffers, b.grad_bytes(), "DDP bucket buffers");
    const OpId sync_states = b.collective(rk.main, rk.nccl, rk.gpu, "sync_module_states: broadcast", CollectiveKind::kBroadcast,
                                          world, ids.front(), setup_inst, b.weight_bytes() + b.buffer_bytes(), {}, Phase::kSetup,
                                          b.python_ns(2), b.dispatch_ns(1));
    b.set_dtype(sync_states, b.weights_dtype());
  }
  std::vector<DataFeed> feeds;
  feeds.reserve(n);
  for (int r = 0; r < n; ++r) {
    feeds.emplace_back(b, ranks[r].gpu / s.cluster.gpus_per_node, ranks[r].main, ranks[r].gpu, ranks[r].copy,
                       " (rank " + std::to_string(r) + ")");
  }

  const bool has_buffers = b.buffer_bytes() > 0;
  // del_temporaries false: per rank, (output, input) of each micro-step, freed at the step's end.
  std::vector<std::vector<std::pair<Bytes, Bytes>>> kept(n);
  for (int step = 1; step <= s.training.steps; ++step) {
    b.set_step(step);
    if (step == 2 && !ready_order.empty()) buckets = make_buckets(ready_order);  // Reducer::rebuild_buckets
    const std::int64_t samples = batch_for_step(per_rank, s.training.dataset_size > 0 ? (s.training.dataset_size + n - 1) / n : 0, step);
    const auto micro = torch_chunk_sizes(samples, s.training.gradient_accumulation);
    const int nb = static_cast<int>(buckets.size());
    for (std::size_t m = 0; m < micro.size(); ++m) {
      const bool sync = m + 1 == micro.size();  // no_sync() for the others
      const int bcast_inst = has_buffers && ddp.broadcast_buffers ? b.new_instance() : -1;
      std::vector<int> bucket_inst(nb);
      for (int k = 0; k < nb; ++k) bucket_inst[k] = b.new_instance();
      for (int r = 0; r < n; ++r) {
        const Rank& rk = ranks[r];
        const Lane lane{rk.main, rk.gpu, rk.compute};
        const FedBatch in = feeds[r].next_batch(micro[m], lane);
        std::vector<Dep> fwd_deps{{in.copy, DepKind::kStreamWaits}};
        if (bcast_inst >= 0) {
          const OpId bc = b.collective(rk.main, rk.nccl, rk.gpu, "broadcast_buffers", CollectiveKind::kBroadcast, world,
                                       ids.front(), bcast_inst, b.buffer_bytes(), {}, Phase::kForward, b.python_ns(2), b.dispatch_ns(1));
          b.set_dtype(bc, core::Dtype::kFp32);  // module buffers are fp32 (buffer_bytes)
          fwd_deps.push_back({bc, DepKind::kStreamWaits});
        }
        const ForwardOps fwd = b.forward(lane, micro[m], std::move(fwd_deps), "");
        const OpId loss = emit_loss(b, lane, micro[m], fwd.output_bytes, {});
        const OpId go = b.marker(rk.main, rk.gpu, "loss.backward()", {}, Phase::kBackward);
        if (m == 0 && !ddp.gradient_as_bucket_view) {
          const OpId g = b.alloc(rk.autograd, rk.compute, rk.gpu, MemCategory::kGrads, b.grad_bytes(), ".grad");
          p.ops[g].deps = {{go, DepKind::kHostWaits}};
        }
        // Reducer hooks: as each layer's gradient is ready, copy it into its bucket; launch the
        // all-reduce of every bucket that is complete, in bucket order.
        BucketState st;
        st.bucket_of_layer.assign(layers.size(), -1);
        st.missing.assign(nb, 0);
        st.last_ready_op.assign(nb, kNoOp);
        for (int k = 0; k < nb; ++k) {
          for (int li : buckets[k]) st.bucket_of_layer[li] = k;
          st.missing[k] = static_cast<int>(buckets[k].size());
        }
        std::vector<OpId> allreduce(nb, kNoOp);
        auto launch = [&](int k) {
          std::vector<Dep> deps{{st.last_ready_op[k], DepKind::kStreamWaits}};
          Bytes bytes = 0;
          for (int li : buckets[k]) bytes += layers[li].params * grad_elem;
          allreduce[k] = b.collective(rk.autograd, rk.nccl, rk.gpu, "bucket " + std::to_string(k) + " all_reduce",
                                      CollectiveKind::kAllReduce, world, -1, bucket_inst[k], bytes, std::move(deps),
                                      Phase::kBackward, 0, b.dispatch_ns(1));
          b.set_dtype(allreduce[k], b.grads_dtype());
        };
        const bool record = step == 1 && r == 0 && m == 0;
        auto on_layer = [&](int li, OpId op) {
          if (record && layers[li].params > 0) ready_order.push_back(li);
          const int k = st.bucket_of_layer[li];
          if (k < 0 || !sync) return;
          OpId ready = op;
          if (!ddp.gradient_as_bucket_view) {
            ready = b.copy(rk.autograd, rk.compute, rk.gpu, "copy grad into bucket " + std::to_string(k), CopyKind::kD2D,
                           layers[li].params * grad_elem, rk.gpu, {}, Phase::kBackward, 0, b.dispatch_ns(1));
          }
          st.last_ready_op[k] = ready;
          if (--st.missing[k] == 0 && ddp.overlap) {
            while (st.next_to_launch < nb && st.missing[st.next_to_launch] == 0) launch(st.next_to_launch++);
          }
        };
        const BackwardOps bw = b.backward(Lane{rk.autograd, rk.gpu, rk.compute}, micro[m], fwd,
                                          {{loss, DepKind::kStreamWaits}, {go, DepKind::kHostWaits}}, "", on_layer);
        OpId grads_final = bw.last;
        if (sync) {
          if (!ddp.overlap) {
            // Overlap off: no bucket may start before the whole backward has run, so every
            // all-reduce waits for the last op backward put on the compute stream.
            OpId last = bw.last;
            for (OpId o : st.last_ready_op) last = std::max(last, o);
            for (int k = 0; k < nb; ++k) st.last_ready_op[k] = last;
          }
          while (st.next_to_launch < nb) launch(st.next_to_launch++);
          // finalize_backward: the compute stream waits for every bucket; without
          // gradient_as_bucket_view the reduced values are copied back into .grad.
          for (int k = 0; k < nb; ++k) {
            if (ddp.gradient_as_bucket_view) {
              grads_final = allreduce[k];  // .grad is a view of the bucket: nothing to copy back
              continue;
            }
            Bytes bytes = 0;
            for (int li : buckets[k]) bytes += layers[li].params * grad_elem;
            grads_final = b.copy(rk.autograd, rk.compute, rk.gpu, "copy bucket " + std::to_string(k) + " into .grad",
                                 CopyKind::kD2D, bytes, rk.gpu, {{allreduce[k], DepKind::kStreamWaits}}, Phase::kBackward, 0,
                                 b.dispatch_ns(1));
          }
        }
        const OpId done = b.marker(rk.autograd, rk.gpu, "autograd done", {}, Phase::kBackward);
        b.marker(rk.main, rk.gpu, "backward() returns", {{done, DepKind::kHostWaits}}, Phase::kBackward);
        if (s.training.del_temporaries) {
          release_after_backward(b, lane, fwd.output_bytes, in.bytes);
        } else {
          kept[r].emplace_back(fwd.output_bytes, in.bytes);
        }
        if (sync) {
          emit_optimizer_and_sync(b, lane, {{grads_final, DepKind::kStreamWaits}}, step == 1,
                                  ddp.gradient_as_bucket_view ? 0 : b.grad_bytes());
          for (const auto& [out, input] : kept[r]) release_after_backward(b, lane, out, input);
          kept[r].clear();
          emit_step_end(b, lane, step, micro[m]);
        }
      }
    }
  }
  return b.take();
}

}  // namespace csim::core
