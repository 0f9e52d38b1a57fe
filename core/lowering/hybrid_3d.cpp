// 3D / hybrid parallelism (docs/program.md, "3D parallel"): dp x tp x pp ranks placed by
// RankGrid (Megatron's default tp-dp-pp: tensor fastest and inside a node, pipeline outermost),
// and the emitter shared by the pipeline, tensor_parallel, 3d, zero and fsdp lowerings.
//
// Per GPU: one Python process with one thread issuing the stage's schedule in order (Megatron
// calls backward from the schedule loop; autograd's device thread issues the kernels while the
// caller waits, so one issuing thread is equivalent); streams: compute (kernels and the
// tensor-parallel collectives, which Megatron runs in line), dp (gradient reduction, ZeRO
// gathers), four point-to-point streams (send/recv towards the next and previous stage) and copy.
//
// The Emitter is declared in hybrid_emitter.hpp; what the script does after each step (the memory
// switches) is in hybrid_leaks.cpp.
//
// [SECTION] index: rank grid, emitter (structure, collectives, forward, backward, step), entry
#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_map>

#include "core/error.hpp"
#include "core/lowering/hybrid_emitter.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/lowering/program_builder.hpp"

namespace csim::core {

// [SECTION] Rank grid -----------------------------------------------------------------------------

RankGrid::RankGrid(const ParallelSpec& ps) {
  size_[static_cast<int>(ParallelDim::kTp)] = ps.tp;
  size_[static_cast<int>(ParallelDim::kDp)] = ps.dp;
  size_[static_cast<int>(ParallelDim::kPp)] = ps.pp;
  int stride = 1;
  for (ParallelDim d : ps.rank_order) {
    stride_[static_cast<int>(d)] = stride;
    stride *= size_[static_cast<int>(d)];
  }
}

int RankGrid::rank(RankCoord c) const {
  return c.tp * stride_[static_cast<int>(ParallelDim::kTp)] +
         c.dp * stride_[static_cast<int>(ParallelDim::kDp)] +
         c.pp * stride_[static_cast<int>(ParallelDim::kPp)];
}

RankCoord RankGrid::coord(int rank) const {
  RankCoord c;
  c.tp = rank / stride_[static_cast<int>(ParallelDim::kTp)] %
         size_[static_cast<int>(ParallelDim::kTp)];
  c.dp = rank / stride_[static_cast<int>(ParallelDim::kDp)] %
         size_[static_cast<int>(ParallelDim::kDp)];
  c.pp = rank / stride_[static_cast<int>(ParallelDim::kPp)] %
         size_[static_cast<int>(ParallelDim::kPp)];
  return c;
}

std::vector<int> RankGrid::tp_ranks(int dp, int pp) const {
  std::vector<int> out;
  for (int t = 0; t < size_[static_cast<int>(ParallelDim::kTp)]; ++t)
    out.push_back(rank({dp, t, pp}));
  return out;
}

std::vector<int> RankGrid::dp_ranks(int tp, int pp) const {
  std::vector<int> out;
  for (int d = 0; d < size_[static_cast<int>(ParallelDim::kDp)]; ++d)
    out.push_back(rank({d, tp, pp}));
  return out;
}

// [SECTION] Emitter -------------------------------------------------------------------------------

namespace hybrid {

int Emitter::instance_for(int rank, int group) {
  // Every member issues the same sequence of collectives on a group, so the k-th op of each
  // member on the group belongs to the k-th instance.
  const std::int64_t world = static_cast<std::int64_t>(ranks_.size());
  const int k = seq_[static_cast<std::int64_t>(group) * world + rank]++;
  const std::int64_t key = (static_cast<std::int64_t>(group) << 32) | static_cast<std::uint32_t>(k);
  auto it = open_.find(key);
  if (it == open_.end()) {
    const int inst = b_.new_instance();
    // Members that issue ops: all of them, or under rank symmetry the representatives only.
    int members = 0;
    for (int gpu : b_.program().groups[static_cast<std::size_t>(group)].gpus)
      members += emitted_gpu_[static_cast<std::size_t>(gpu)] ? 1 : 0;
    if (members > 1) open_[key] = {inst, members - 1};
    return inst;
  }
  const int inst = it->second.first;
  if (--it->second.second == 0) open_.erase(it);
  return inst;
}

OpId Emitter::coll(RankState& r, int stream, const std::string& name, CollectiveKind k, int group,
                   Bytes bytes, std::vector<Dep> deps, const char* phase) {
  const int inst = instance_for(r.rank, group);
  const bool fwd = std::string(phase) == "forward";
  return b_.collective(r.thread, stream, r.gpu, name, k, group, -1, inst, bytes, std::move(deps),
                       phase, fwd ? b_.python_ns(1) : 0, b_.dispatch_ns(1));
}

OpId Emitter::reduce_grads(RankState& r, Bytes grads, std::vector<Dep> deps) {
  // Stage 0: an all-reduce (as DDP); stage 1: a reduce-scatter (Megatron's distributed
  // optimizer), the all-gather of the updated parameters follows the optimizer.
  const bool rs = ps_.zero_stage == 1;
  const OpId id = coll(r, r.dp, rs ? "dp reduce_scatter grads" : "dp all_reduce grads",
                       rs ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, r.dp_group,
                       grads, std::move(deps), "backward");
  b_.set_dtype(id, b_.grads_dtype());
  return id;
}

OpId Emitter::tp_coll(RankState& r, TpComm c, Bytes bytes, const char* phase) {
  CollectiveKind k = CollectiveKind::kAllReduce;
  const char* name = "tp all_reduce";
  if (c == TpComm::kReduceScatter) {
    k = CollectiveKind::kReduceScatter;
    name = "tp reduce_scatter";
  } else if (c == TpComm::kAllGather) {
    k = CollectiveKind::kAllGather;
    name = "tp all_gather";
  }
  // In line on the compute stream: the next kernel needs its result (Megatron runs them on the
  // default stream).
  const OpId id = coll(r, r.compute, name, k, r.tp_group, bytes, {}, phase);
  r.last_compute = id;
  return id;
}

OpId Emitter::p2p(RankState& r, int peer_rank, bool send, bool forward, Bytes bytes,
                  std::vector<Dep> deps) {
  const int src = send ? r.rank : peer_rank;
  const int dst = send ? peer_rank : r.rank;
  const std::int64_t world = static_cast<std::int64_t>(ranks_.size());
  const std::int64_t key = (static_cast<std::int64_t>(src) * world + dst) * 2 + (forward ? 0 : 1);
  auto it = p2p_groups_.find(key);
  int group = 0;
  if (it == p2p_groups_.end()) {
    group = b_.add_group(
        {ranks_[static_cast<std::size_t>(src)].gpu, ranks_[static_cast<std::size_t>(dst)].gpu},
        std::string("pp ") + (forward ? "activations " : "gradients ") + std::to_string(src) +
            "->" + std::to_string(dst));
    p2p_groups_[key] = group;
  } else {
    group = it->second;
  }
  const int stream =
      send ? (forward ? r.send_next : r.send_prev) : (forward ? r.recv_prev : r.recv_next);
  const std::string name =
      std::string(send ? "send " : "recv ") + (forward ? "activations" : "gradients");
  return coll(r, stream, name, CollectiveKind::kSendRecv, group, bytes, std::move(deps),
              forward ? "forward" : "backward");
}

Bytes Emitter::p2p_bytes(int seg) const {
  // The activation leaving a segment, b * s * h * e; with tp > 1 each TP rank sends its 1/t
  // share (Narayanan et al. 2021, section 4.1, scatter/gather optimisation; with sequence
  // parallelism the tensor is already split).
  const int last = segs_[static_cast<std::size_t>(seg)].end - 1;
  double per_sample = s_.model.layers[static_cast<std::size_t>(last)].output_bytes_per_sample;
  if (ps_.tp > 1) per_sample /= ps_.tp;
  return static_cast<Bytes>(std::llround(per_sample * static_cast<double>(ps_.micro_batch_size)));
}

OpId Emitter::forward_layer(RankState& r, int i, std::vector<Dep> deps, const std::string& prefix,
                            bool recompute) {
  const LayerSpec& l = s_.model.layers[static_cast<std::size_t>(i)];
  const ShardedLayer& sl = sharded_[static_cast<std::size_t>(i)];
  const double bsz = static_cast<double>(ps_.micro_batch_size);
  const Bytes comm = static_cast<Bytes>(std::llround(sl.comm_bytes_per_sample * bsz));
  const char* phase = recompute ? "recompute" : "forward";
  if (sl.fwd_before != TpComm::kNone) tp_coll(r, sl.fwd_before, comm, phase);
  const Bytes traffic =
      static_cast<Bytes>(std::llround(sl.traffic_per_sample * bsz)) + sl.params * pb_.weights;
  const OpId c = b_.compute(Lane{r.thread, r.gpu, r.compute},
                            prefix + l.name + (recompute ? ".recompute" : ".fwd"), l.kind,
                            sl.flops_per_sample * bsz, traffic, l.kernels, !recompute,
                            std::move(deps), phase, ps_.micro_batch_size);
  r.last_compute = c;
  if (sl.fwd_after != TpComm::kNone) tp_coll(r, sl.fwd_after, comm, phase);
  return c;
}

void Emitter::emit_step(RankState& r, int step) {
  b_.set_step(step);
  const int p = ps_.pp, v = ps_.virtual_stages, m = static_cast<int>(ps_.micro_batches);
  const double bsz = static_cast<double>(ps_.micro_batch_size);
  const Lane lane{r.thread, r.gpu, r.compute};
  const auto& layers = s_.model.layers;
  const ModelStateBytes states =
      model_state_bytes(r.params, s_.training, params_sharded_ ? 3 : ps_.zero_stage, ps_.dp);
  const bool reduce = ps_.dp > 1;

  FedBatch in;
  if (r.feed) in = r.feed->next_batch(ps_.micro_batch_size * m, lane);

  bool grads_allocated = false;
  std::vector<Dep> reductions;  // DP gradient collectives the optimizer waits for
  std::vector<Bytes> deferred;  // overlap_grad_reduce false: unit gradients reduced after backward
  std::vector<char> gathered(units_.size(), 0);
  std::vector<OpId> gather_op(units_.size(), kNoOp);
  std::vector<Bytes> act_bytes(static_cast<std::size_t>(segments_) * static_cast<std::size_t>(m),
                               0);
  OpId last_op = kNoOp;
  std::vector<std::pair<std::string, Bytes>> kept_logits;  // del_temporaries false

  auto gather = [&](int u, const char* phase) {
    if (!params_sharded_ || gathered[static_cast<std::size_t>(u)]) return;
    const Bytes bytes = units_[static_cast<std::size_t>(u)].params * pb_.weights;
    gathered[static_cast<std::size_t>(u)] = 1;
    if (bytes == 0) return;
    b_.alloc(r.thread, r.dp, r.gpu, MemCategory::kCommBuffers, bytes, "gathered params");
    std::vector<Dep> deps;
    // Without prefetch the gather starts only once the previous kernel is done (no overlap).
    if (!ps_.prefetch && r.last_compute != kNoOp)
      deps.push_back({r.last_compute, DepKind::kStreamWaits});
    gather_op[static_cast<std::size_t>(u)] =
        coll(r, r.dp, "zero all_gather params", CollectiveKind::kAllGather, r.dp_group, bytes,
             std::move(deps), phase);
    b_.set_dtype(gather_op[static_cast<std::size_t>(u)], b_.weights_dtype());
  };
  auto release_gathered = [&](int u) {
    if (!params_sharded_ || !gathered[static_cast<std::size_t>(u)]) return;
    gathered[static_cast<std::size_t>(u)] = 0;
    const Bytes bytes = units_[static_cast<std::size_t>(u)].params * pb_.weights;
    if (bytes > 0)
      b_.release(r.thread, r.compute, r.gpu, MemCategory::kCommBuffers, bytes, "gathered params");
    gather_op[static_cast<std::size_t>(u)] = kNoOp;
  };
  auto gather_dep = [&](int u, std::vector<Dep>& deps) {
    const OpId g = gather_op[static_cast<std::size_t>(u)];
    if (g != kNoOp) deps.push_back({g, DepKind::kStreamWaits});
  };

  for (const PipeStep& st : pipeline_schedule(ps_.schedule, p, v, m, r.c.pp)) {
    const int seg = st.chunk * p + r.c.pp;
    const Segment sg = segs_[static_cast<std::size_t>(seg)];
    const std::string prefix = m > 1 ? "mb" + std::to_string(st.micro) + " " : std::string();
    Bytes& act = act_bytes[static_cast<std::size_t>(seg) * static_cast<std::size_t>(m) +
                           static_cast<std::size_t>(st.micro)];
    if (st.forward) {
      std::vector<Dep> first;
      if (seg > 0) {
        first.push_back(recv_from_previous_segment(r, seg));
      } else if (in.copy != kNoOp) {
        first.push_back({in.copy, DepKind::kStreamWaits});
      }
      act =
          static_cast<Bytes>(std::llround(stored_per_sample_[static_cast<std::size_t>(seg)] * bsz));
      if (act > 0)
        b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kActivations, act,
                 prefix + "activations");
      for (int i = sg.first; i < sg.end; ++i) {
        const int u = unit_of_layer_[static_cast<std::size_t>(i)];
        std::vector<Dep> deps = i == sg.first ? first : std::vector<Dep>{};
        if (params_sharded_ && i == std::max(units_[static_cast<std::size_t>(u)].first, sg.first)) {
          gather(u, "forward");
          if (ps_.prefetch && u + 1 < static_cast<int>(units_.size()) &&
              units_[static_cast<std::size_t>(u + 1)].first < sg.end) {
            gather(u + 1, "forward");
          }
          gather_dep(u, deps);
        }
        forward_layer(r, i, std::move(deps), prefix, false);
        const bool unit_end = i + 1 == std::min(units_[static_cast<std::size_t>(u)].end, sg.end);
        if (unit_end && reshard_after_forward_) release_gathered(u);
      }
      if (seg + 1 < segments_) {
        last_op = p2p(r, rank_of_segment(r, seg + 1), true, true, p2p_bytes(seg),
                      {{r.last_compute, DepKind::kStreamWaits}});
      } else {
        // Loss on the (vocabulary-split) logits: 5 FLOPs per element, 3 framework ops.
        const Bytes logits =
            static_cast<Bytes>(std::llround(sharded_.back().output_bytes_per_sample * bsz));
        if (logits > 0)
          b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kActivations, logits,
                   prefix + "logits");
        r.last_compute = b_.compute(lane, prefix + "loss", ComputeKind::kElementwise,
                                    5.0 * static_cast<double>(logits) / dtype_bytes(pb_.compute),
                                    logits, 3, true, {}, "loss", ps_.micro_batch_size);
      }
      continue;
    }
    // Backward.
    std::vector<Dep> first;
    if (seg + 1 < segments_) {
      std::vector<Dep> rd;
      if (r.last_compute != kNoOp) rd.push_back({r.last_compute, DepKind::kStreamWaits});
      first.push_back(
          {p2p(r, rank_of_segment(r, seg + 1), false, false, p2p_bytes(seg), std::move(rd)),
           DepKind::kStreamWaits});
    }
    if (!grads_allocated) {
      grads_allocated = true;
      if (states.grads > 0)
        b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kGrads, states.grads, ".grad");
    }
    const bool last_micro = st.micro == m - 1;
    int block_first = -1;  // full recompute: first layer of the block being recomputed
    Bytes block_bytes = 0;
    int core_first = -1;  // selective recompute: first layer of the attention core recomputed
    Bytes core_bytes = 0;
    Bytes bucket = 0;  // ZeRO >= 2: this unit's full gradients before the reduce-scatter
    for (int i = sg.end - 1; i >= sg.first; --i) {
      const LayerSpec& l = layers[static_cast<std::size_t>(i)];
      const ShardedLayer& sl = sharded_[static_cast<std::size_t>(i)];
      const int u = unit_of_layer_[static_cast<std::size_t>(i)];
      const Unit& un = units_[static_cast<std::size_t>(u)];
      std::vector<Dep> deps = i == sg.end - 1 ? first : std::vector<Dep>{};
      const bool unit_last = i == std::min(un.end, sg.end) - 1;
      if (unit_last) {
        if (params_sharded_) {
          gather(u, "backward");
          if (ps_.prefetch && u > 0 && units_[static_cast<std::size_t>(u - 1)].end > sg.first)
            gather(u - 1, "backward");
          gather_dep(u, deps);
        }
        if (ps_.zero_stage >= 2 && reduce) {
          bucket = un.params * pb_.grads;
          if (bucket > 0)
            b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kCommBuffers, bucket, "grad bucket");
        }
      }
      // Full recompute: at a block's last layer, re-run the block's forward (with its TP
      // collectives) holding the block's full activations until its backward is done.
      if (ps_.recompute == RecomputeMode::kFull && l.block >= 0 &&
          (i + 1 == sg.end || layers[static_cast<std::size_t>(i + 1)].block != l.block)) {
        block_first = i;
        while (block_first > sg.first &&
               layers[static_cast<std::size_t>(block_first - 1)].block == l.block)
          --block_first;
        block_bytes = 0;
        for (int k = block_first; k <= i; ++k) {
          block_bytes += static_cast<Bytes>(
              std::llround(sharded_[static_cast<std::size_t>(k)].act_bytes_per_sample * bsz));
        }
        if (block_bytes > 0)
          b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kActivations, block_bytes,
                   prefix + "recomputed block");
        for (int k = block_first; k <= i; ++k) {
          forward_layer(r, k, k == block_first ? deps : std::vector<Dep>{}, prefix, true);
        }
        deps.clear();
      }
      // Selective recompute: at the last layer of a run the model marks (the attention core),
      // re-run the run's forward in order, holding what it recreates (the activations beyond
      // those kept) until the run's backward is done.
      if (ps_.recompute == RecomputeMode::kSelective && l.selective_recompute &&
          (i + 1 == sg.end || !layers[static_cast<std::size_t>(i + 1)].selective_recompute)) {
        core_first = i;
        while (core_first > sg.first &&
               layers[static_cast<std::size_t>(core_first - 1)].selective_recompute)
          --core_first;
        core_bytes = 0;
        for (int k = core_first; k <= i; ++k) {
          const ShardedLayer& sk = sharded_[static_cast<std::size_t>(k)];
          core_bytes += static_cast<Bytes>(
              std::llround((sk.act_bytes_per_sample - sk.selective_act_bytes_per_sample) * bsz));
        }
        if (core_bytes > 0)
          b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kActivations, core_bytes,
                   prefix + "recomputed attention");
        for (int k = core_first; k <= i; ++k)
          forward_layer(r, k, k == core_first ? deps : std::vector<Dep>{}, prefix, true);
        deps.clear();
      }
      const Bytes comm = static_cast<Bytes>(std::llround(sl.comm_bytes_per_sample * bsz));
      if (sl.bwd_before != TpComm::kNone) tp_coll(r, sl.bwd_before, comm, "backward");
      // Backward: 2x the forward FLOPs; the layer's backward traffic, 2x the forward's unless it
      // says otherwise (docs/program.md, "A training step").
      const Bytes traffic =
          backward_traffic_bytes(sl.traffic_per_sample, sl.bwd_traffic_per_sample, bsz) +
          sl.params * (pb_.weights + pb_.grads);
      const OpId c =
          b_.compute(lane, prefix + l.name + ".bwd", l.kind, 2.0 * sl.flops_per_sample * bsz,
                     traffic, 2.0 * l.kernels, s_.model.python_hooks, std::move(deps), "backward",
                     ps_.micro_batch_size);
      r.last_compute = c;
      if (sl.bwd_after != TpComm::kNone) tp_coll(r, sl.bwd_after, comm, "backward");
      if (i == block_first) {
        if (block_bytes > 0)
          b_.release(r.thread, r.compute, r.gpu, MemCategory::kActivations, block_bytes,
                     prefix + "recomputed block");
        block_first = -1;
      }
      if (i == core_first) {
        if (core_bytes > 0)
          b_.release(r.thread, r.compute, r.gpu, MemCategory::kActivations, core_bytes,
                     prefix + "recomputed attention");
        core_first = -1;
      }
      const bool unit_first = i == std::max(un.first, sg.first);
      if (!unit_first) continue;
      if (params_sharded_) release_gathered(u);
      const Bytes grads = un.params * pb_.grads;
      if (!reduce || grads == 0) continue;
      if (ps_.zero_stage >= 2) {
        // ZeRO-2/3, FSDP: reduce-scatter this unit's gradients every micro-batch into the shard.
        const OpId rs =
            coll(r, r.dp, "zero reduce_scatter grads", CollectiveKind::kReduceScatter, r.dp_group,
                 grads, {{r.last_compute, DepKind::kStreamWaits}}, "backward");
        b_.set_dtype(rs, b_.grads_dtype());
        if (bucket > 0)
          b_.release(r.thread, r.dp, r.gpu, MemCategory::kCommBuffers, bucket, "grad bucket");
        reductions.push_back({rs, DepKind::kStreamWaits});
      } else if (last_micro) {
        // At the last micro-batch: reduce this unit's gradients while the rest of backward runs
        // (overlap_grad_reduce), or after the whole backward.
        if (ps_.overlap_grad_reduce) {
          reductions.push_back({reduce_grads(r, grads, {{r.last_compute, DepKind::kStreamWaits}}),
                                DepKind::kStreamWaits});
        } else {
          deferred.push_back(grads);
        }
      }
    }
    if (seg > 0) {
      last_op = p2p(r, rank_of_segment(r, seg - 1), true, false, p2p_bytes(seg - 1),
                    {{r.last_compute, DepKind::kStreamWaits}});
    }
    if (act > 0)
      b_.release(r.thread, r.compute, r.gpu, MemCategory::kActivations, act,
                 prefix + "activations");
    if (seg + 1 == segments_) {
      const Bytes logits =
          static_cast<Bytes>(std::llround(sharded_.back().output_bytes_per_sample * bsz));
      // del_temporaries false: the script holds the step's outputs (docs/memory.md).
      if (logits > 0 && s_.training.del_temporaries) {
        b_.release(r.thread, r.compute, r.gpu, MemCategory::kActivations, logits,
                   prefix + "logits");
      } else if (logits > 0) {
        kept_logits.emplace_back(prefix + "logits", logits);
      }
    }
  }
  // Without overlap the reductions start after the whole backward, in the same unit order.
  for (const Bytes grads : deferred) {
    reductions.push_back(
        {reduce_grads(r, grads, {{r.last_compute, DepKind::kStreamWaits}}), DepKind::kStreamWaits});
  }
  // Optimizer on this rank's parameters (its shard with ZeRO >= 1), then ZeRO-1/2's all-gather of
  // the updated parameters; zero_grad frees the gradients; the step ends when the host has
  // waited for all of it.
  if (step == 1 && states.optimizer > 0) {
    b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kOptimizer, states.optimizer,
             "optimizer state");
  }
  const std::int64_t n = ps_.zero_stage >= 1 ? (r.params + ps_.dp - 1) / ps_.dp : r.params;
  std::int64_t state_per_param = 0;
  if (s_.training.optimizer == OptimizerKind::kAdam) state_per_param = 8;
  if (s_.training.optimizer == OptimizerKind::kSgd && s_.training.sgd_momentum > 0)
    state_per_param = 4;
  // docs/program.md, "A training step": bytes = params x (2w + g + 2 state + 2 master), FLOPs
  // 10/param (Adam) or 3/param (SGD), 5 multi-tensor kernels.
  const Bytes traffic = n * (2 * pb_.weights + pb_.grads + 2 * state_per_param + 2 * pb_.master);
  const double flops =
      static_cast<double>(n) * (s_.training.optimizer == OptimizerKind::kAdam ? 10.0 : 3.0);
  OpId end =
      b_.compute(lane, std::string("optimizer.step (") + to_string(s_.training.optimizer) + ")",
                 ComputeKind::kElementwise, flops, traffic, 5, true, reductions, "optimizer");
  r.last_compute = end;
  if (reduce && !params_sharded_ && (ps_.zero_stage == 1 || ps_.zero_stage == 2) && r.params > 0) {
    end = coll(r, r.dp, "zero all_gather params", CollectiveKind::kAllGather, r.dp_group,
               r.params * pb_.weights, {{end, DepKind::kStreamWaits}}, "optimizer");
    b_.set_dtype(end, b_.weights_dtype());
  }
  if (states.grads > 0)
    b_.release(r.thread, r.compute, r.gpu, MemCategory::kGrads, states.grads, ".grad (zero_grad)");
  if (in.bytes > 0)
    b_.release(r.thread, r.compute, r.gpu, MemCategory::kActivations, in.bytes, "input batch");
  std::vector<Dep> wait{{end, DepKind::kHostWaits}};
  if (last_op != kNoOp) wait.push_back({last_op, DepKind::kHostWaits});
  b_.marker(r.thread, r.gpu, "step end", std::move(wait), "sync");
  for (const auto& [name, bytes] : kept_logits)
    b_.release(r.thread, r.compute, r.gpu, MemCategory::kActivations, bytes, name);
  emit_step_end(r, step);
}

void Emitter::build(const std::string& label) {
  Program& prog = b_.program();
  const auto& ids = s_.strategy.device_ids;
  const auto& layers = s_.model.layers;
  prog.strategy_label = label;
  prog.active_gpus = ids;
  prog.samples_per_step = s_.training.global_batch;
  segments_ = ps_.pp * ps_.virtual_stages;
  segs_ = partition_layers(s_.model, segments_);
  for (int i = 0; i < static_cast<int>(layers.size()); ++i)
    sharded_.push_back(shard_layer(s_.model, i, ps_.tp, ps_.sequence_parallel));
  for (const Segment& sg : segs_) {
    stored_per_sample_.push_back(stored_activation_bytes_per_sample(
        s_.model, sg, ps_.tp, ps_.sequence_parallel, ps_.recompute));
  }
  params_sharded_ = ps_.zero_stage == 3 || s_.strategy.kind == StrategyKind::kFsdp;
  reshard_after_forward_ = ps_.zero_stage == 3;
  // Units: blocks (GPT) or a layer with parameters and the parameter-free layers after it; a
  // unit never crosses a segment boundary.
  std::vector<char> seg_start(layers.size() + 1, 0);
  for (const Segment& sg : segs_) seg_start[static_cast<std::size_t>(sg.first)] = 1;
  for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
    const LayerSpec& l = layers[static_cast<std::size_t>(i)];
    bool fresh = units_.empty() || seg_start[static_cast<std::size_t>(i)];
    if (!fresh) {
      const LayerSpec& prev = layers[static_cast<std::size_t>(i - 1)];
      if (s_.model.transformer.layers > 0) {
        fresh = l.block != prev.block;
      } else {
        fresh = l.params > 0 && units_.back().params > 0;
      }
    }
    if (fresh) units_.push_back(Unit{i, i, 0});
    units_.back().end = i + 1;
    units_.back().params += sharded_[static_cast<std::size_t>(i)].params;
    unit_of_layer_.push_back(static_cast<int>(units_.size()) - 1);
  }

  // Structure: one process and thread per rank, its streams, its groups.
  const int world = grid_.size();
  CSIM_ASSERT(world == static_cast<int>(ids.size()));
  ranks_.resize(static_cast<std::size_t>(world));
  // Stragglers and degraded links make ranks differ: then every rank is simulated.
  symmetric_ = s_.simulation.symmetry && (ps_.dp > 1 || ps_.tp > 1) && s_.cluster.homogeneous();
  if (s_.simulation.symmetry && (ps_.dp > 1 || ps_.tp > 1) && !s_.cluster.homogeneous()) {
    prog.warnings.push_back(
        "rank symmetry off: stragglers or degraded links make ranks differ (every rank simulated)");
  }
  emitted_gpu_.assign(static_cast<std::size_t>(prog.world_gpus), 0);
  for (int rk = 0; rk < world; ++rk) {
    RankState& r = ranks_[static_cast<std::size_t>(rk)];
    r.rank = rk;
    r.gpu = ids[static_cast<std::size_t>(rk)];
    r.node = r.gpu / s_.cluster.gpus_per_node;
    r.c = grid_.coord(rk);
    // Rank symmetry: replicas (dp) and tensor-parallel ranks (tp) run the same ops at the same
    // times; rank (dp 0, tp 0) of each stage stands for the others.
    r.emitted = !symmetric_ || (r.c.dp == 0 && r.c.tp == 0);
    emitted_gpu_[static_cast<std::size_t>(r.gpu)] = r.emitted ? 1 : 0;
    for (int c = 0; c < ps_.virtual_stages; ++c) {
      const Segment& sg = segs_[static_cast<std::size_t>(c * ps_.pp + r.c.pp)];
      for (int i = sg.first; i < sg.end; ++i)
        r.params += sharded_[static_cast<std::size_t>(i)].params;
    }
    if (!r.emitted) continue;
    const int proc = b_.add_process(r.node,
                                    "python rank " + std::to_string(rk) + " (dp " +
                                        std::to_string(r.c.dp) + ", tp " + std::to_string(r.c.tp) +
                                        ", pp " + std::to_string(r.c.pp) + ")",
                                    true);
    r.thread = b_.add_thread(proc, r.gpu, "main");
    r.compute = b_.add_stream(r.gpu, StreamRole::kCompute, "compute");
    r.dp = b_.add_stream(r.gpu, StreamRole::kComm, "dp");
    r.copy = b_.add_stream(r.gpu, StreamRole::kCopy, "copy");
    if (ps_.pp > 1) {
      r.send_next = b_.add_stream(r.gpu, StreamRole::kComm, "pp send next");
      r.recv_prev = b_.add_stream(r.gpu, StreamRole::kComm, "pp recv prev");
      r.send_prev = b_.add_stream(r.gpu, StreamRole::kComm, "pp send prev");
      r.recv_next = b_.add_stream(r.gpu, StreamRole::kComm, "pp recv next");
    }
  }
  if (symmetric_) set_up_symmetry();
  auto gpus_of = [&](const std::vector<int>& rks) {
    std::vector<int> g;
    for (int x : rks) g.push_back(ids[static_cast<std::size_t>(x)]);
    return g;
  };
  for (int d = 0; d < ps_.dp; ++d) {
    for (int st = 0; st < ps_.pp; ++st) {
      const auto rks = grid_.tp_ranks(d, st);
      const int g = ps_.tp > 1 ? b_.add_group(gpus_of(rks), "tp (dp " + std::to_string(d) +
                                                                ", pp " + std::to_string(st) + ")")
                               : -1;
      for (int x : rks) ranks_[static_cast<std::size_t>(x)].tp_group = g;
    }
  }
  for (int t = 0; t < ps_.tp; ++t) {
    for (int st = 0; st < ps_.pp; ++st) {
      const auto rks = grid_.dp_ranks(t, st);
      const int g = ps_.dp > 1 ? b_.add_group(gpus_of(rks), "dp (tp " + std::to_string(t) +
                                                                ", pp " + std::to_string(st) + ")")
                               : -1;
      for (int x : rks) ranks_[static_cast<std::size_t>(x)].dp_group = g;
    }
  }

  // Setup (step 0): parameters (sharded with ZeRO-3 / FSDP) on every rank; data feeds on the
  // first stage.
  b_.set_step(0);
  for (RankState& r : ranks_) {
    if (!r.emitted) continue;
    const ModelStateBytes st =
        model_state_bytes(r.params, s_.training, params_sharded_ ? 3 : ps_.zero_stage, ps_.dp);
    if (st.params > 0)
      b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kParams, st.params, "model parameters");
    if (r.c.pp == 0) {
      r.feed = std::make_unique<DataFeed>(b_, r.node, r.thread, r.gpu, r.copy,
                                          " (rank " + std::to_string(r.rank) + ")");
    }
  }
  // The op list is reserved from the first rank's step (stages differ little: embedding and
  // logits), so millions of ops are not moved again and again as the vector doubles.
  std::vector<Op>& ops = b_.program().ops;
  const auto emitted = static_cast<std::size_t>(
      std::count_if(ranks_.begin(), ranks_.end(), [](const RankState& r) { return r.emitted; }));
  bool reserved = false;
  for (int step = 1; step <= s_.training.steps; ++step) {
    for (RankState& r : ranks_) {
      if (!r.emitted) continue;
      const std::size_t before = ops.size();
      emit_step(r, step);
      if (reserved) continue;
      reserved = true;
      const std::size_t per_rank_step = ops.size() - before;
      ops.reserve(before +
                  per_rank_step * emitted * static_cast<std::size_t>(s_.training.steps) * 11 / 10);
    }
  }
}

void Emitter::set_up_symmetry() {
  // Mirror (kd, kt) shifts every rank's data-parallel index by kd and its tensor-parallel index by
  // kt (mod dp, tp), keeping its stage: the group Z_dp x Z_tp, identity first.
  RankSymmetry& sym = b_.program().symmetry;
  const std::size_t world = static_cast<std::size_t>(b_.program().world_gpus);
  sym.weight_of_gpu.assign(world, 0);
  for (int kd = 0; kd < ps_.dp; ++kd) {
    for (int kt = 0; kt < ps_.tp; ++kt) {
      std::vector<int> img(world, -1);
      for (const RankState& r : ranks_) {
        const RankCoord c{(r.c.dp + kd) % ps_.dp, (r.c.tp + kt) % ps_.tp, r.c.pp};
        img[static_cast<std::size_t>(r.gpu)] = ranks_[static_cast<std::size_t>(grid_.rank(c))].gpu;
      }
      sym.images.push_back(std::move(img));
    }
  }
  for (const RankState& r : ranks_) {
    if (r.emitted) sym.weight_of_gpu[static_cast<std::size_t>(r.gpu)] = ps_.dp * ps_.tp;
  }
}

}  // namespace hybrid

// [SECTION] Entry ---------------------------------------------------------------------------------

Program lower_hybrid(const Scenario& s, const std::string& label) {
  ProgramBuilder b(s);
  hybrid::Emitter e(s, b);
  e.build(label);
  return b.take();
}

Program lower_3d(const Scenario& s) {
  const ParallelSpec& ps = s.strategy.parallel;
  std::string label = "3d (dp " + std::to_string(ps.dp) + " x tp " + std::to_string(ps.tp) +
                      " x pp " + std::to_string(ps.pp);
  label += std::string(", ") + to_string(ps.schedule);
  if (ps.virtual_stages > 1) label += " v " + std::to_string(ps.virtual_stages);
  label += ", m " + std::to_string(ps.micro_batches);
  if (ps.sequence_parallel) label += ", sequence parallel";
  if (ps.zero_stage > 0) label += ", zero " + std::to_string(ps.zero_stage);
  if (ps.recompute != RecomputeMode::kNone)
    label += std::string(", recompute ") + to_string(ps.recompute);
  return lower_hybrid(s, label + ")");
}

}  // namespace csim::core
