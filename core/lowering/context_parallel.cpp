// Context parallelism (docs/program.md, "Context parallel"): the sequence of every sample split
// over the cp ranks of a CP group in 2 cp chunks, rank i holding chunks i and 2cp - 1 - i
// (Megatron / Transformer Engine's load-balanced layout), so every layer runs on s / cp tokens and
// causal attention costs each rank the same 1/cp of the whole (TE's table in
// AttnFuncWithCPAndKVP2P: every one of the cp ring steps covers 2 (s / 2cp)^2 query-key pairs).
// Around each fused attention core the ranks exchange keys and values (strategy.cp_comm, as
// Transformer Engine's cp_comm_type, transformer_engine/pytorch/attention/dot_product_attention/
// context_parallel.py):
//   p2p         ring attention: the attention core runs as cp kernels, one per K/V block; the
//               block for step i + 1 travels (a send/recv around the CP ring on the "cp" stream)
//               while step i computes. Backward: the ring reversed, K/V then K/V + dK/dV, and a
//               last hop bringing each rank's dK/dV home: 2 (cp - 1) |KV| per rank in all.
//   all_gather  K and V all-gathered before the kernel (exposed; Llama 3, section 3.3.2); the
//               backward gathers them again and reduce-scatters dK/dV.
//   a2a         DeepSpeed-Ulysses: one all-to-all of Q, K, V (sequence- to head-sharded) before
//               the kernel and one of O after it; backward dO before, dQ, dK, dV after.
//   a2a+p2p     Megatron's hierarchical CP: a2a inside groups of cp_a2a consecutive CP ranks,
//               then the ring over the cp / cp_a2a groups.
// |KV| = 2 (s / cp) (g / tp) d e per sample on one rank (g key/value heads, head dim d, e bytes per
// element); |Q| = |O| = (s / cp) (a / tp) d e.
#include <algorithm>

#include "core/error.hpp"
#include "core/lowering/hybrid_emitter.hpp"
#include "core/model/attention_kernels.hpp"

namespace csim::core {

int cp_ring_steps(const ParallelSpec& ps) {
  switch (ps.cp_comm) {
    case CpComm::kP2p:
      return ps.cp;
    case CpComm::kA2aP2p:
      return ps.cp / ps.cp_a2a;
    case CpComm::kAllGather:
    case CpComm::kA2a:
      return 1;
  }
  return 1;
}

void shard_context(ShardedLayer& sl, const LayerSpec& l, const ParallelSpec& ps) {
  if (ps.cp <= 1) return;
  const double c = ps.cp;
  // Every per-token quantity on s / cp tokens; a fused attention core's work is 1/cp of the
  // whole too (the balanced split); the parameters are whole on every CP rank.
  sl.split_tokens(c);
  sl.comm_bytes_per_sample /= c;
  // Ring attention runs the core as one kernel per ring step, each 1/steps of the rank's work.
  if (is_fused_attention_core(l)) {
    const double steps = cp_ring_steps(ps);
    sl.flops_per_sample /= steps;
    sl.traffic_per_sample /= steps;
    if (sl.bwd_flops_per_sample > 0) sl.bwd_flops_per_sample /= steps;
    if (sl.bwd_traffic_per_sample > 0) sl.bwd_traffic_per_sample /= steps;
  }
}

CpBlockBytes cp_block_bytes(const ModelSpec& m, const LayerSpec& core, const ParallelSpec& ps) {
  const double s = static_cast<double>(core.fused_attention.seq_len);
  const double d = static_cast<double>(core.fused_attention.head_dim);
  const double dv = core.fused_attention.v_head_dim > 0
                        ? static_cast<double>(core.fused_attention.v_head_dim)
                        : d;  // MLA: v narrower than q and k
  const double a = m.transformer.heads;
  const double g = m.transformer.kv_heads > 0 ? m.transformer.kv_heads : m.transformer.heads;
  // e from the core's output O = s a d_v e per sample (core/model/attention_kernels.cpp,
  // fused_layers).
  const double e = core.output_bytes_per_sample / (s * a * dv);
  const double tokens = s / ps.cp, t = ps.tp;
  // K (d per head) and V (d_v): 2 d when d_v = d.
  return CpBlockBytes{tokens * (g / t) * (d + dv) * e, tokens * (a / t) * d * e};
}

namespace hybrid {
namespace {

class ContextParallelPiece final : public ParallelPiece {
 public:
  explicit ContextParallelPiece(Emitter& e)
      : e_(e), b_(e.builder()), ps_(e.spec()), steps_(cp_ring_steps(ps_)) {}

  void add_groups() override {
    // The CP group of every (tp, dp, pp) position; a2a+p2p splits it into all-to-all groups of
    // cp_a2a consecutive CP ranks and rings of the ranks cp_a2a apart (Megatron's
    // create_hierarchical_groups: level 0 contiguous, the next strided).
    const bool hier = ps_.cp_comm == CpComm::kA2aP2p;
    const int a = hier ? ps_.cp_a2a : 1;
    ring_group_.assign(e_.ranks().size(), -1);
    a2a_group_.assign(e_.ranks().size(), -1);
    e_.grid().for_each_group(
        {ParallelDim::kCp}, [&](const std::vector<int>& rks, const RankCoord& at) {
          const std::string name = e_.group_name("cp", at, {ParallelDim::kCp});
          const int g = e_.add_group(rks, name);
          for (int x : rks) e_.ranks()[static_cast<std::size_t>(x)].group[ParallelDim::kCp] = g;
          if (!hier) {
            for (int x : rks) (ps_.cp_comm == CpComm::kA2a ? a2a_group_ : ring_group_)[idx(x)] = g;
            return;
          }
          const int rings = static_cast<int>(rks.size()) / a;
          for (int k = 0; k < rings; ++k) {
            const std::vector<int> sub(rks.begin() + k * a, rks.begin() + (k + 1) * a);
            const int id = e_.add_group(sub, name + " a2a " + std::to_string(k));
            for (int x : sub) a2a_group_[idx(x)] = id;
          }
          for (int j = 0; j < a; ++j) {
            std::vector<int> ring;
            for (int k = 0; k < rings; ++k)
              ring.push_back(rks[static_cast<std::size_t>(k * a + j)]);
            const int id = e_.add_group(ring, name + " ring " + std::to_string(j));
            for (int x : ring) ring_group_[idx(x)] = id;
          }
        });
  }

  void add_streams(RankState& r) override {
    if (steps_ > 1) r.stream[ParallelDim::kCp] = b_.add_stream(r.gpu, StreamRole::kComm, "cp");
  }

  void begin_layer(LayerPass& lp) override {
    RankState& r = lp.r();
    if (!pending_.empty()) {  // the last dK/dV hop of the attention backward before this layer
      for (OpId id : pending_) lp.deps.push_back({id, DepKind::kStreamWaits});
      pending_.clear();
    }
    if (!is_core(lp.layer)) return;
    const CpBlockBytes bb = cp_block_bytes(e_.scenario().model, layer(lp.layer), ps_);
    kv_ = e_.per_micro_batch(bb.kv);
    q_ = e_.per_micro_batch(bb.q);
    const Bytes kv = kv_, q = q_;
    std::vector<Dep> after;
    if (r.last_compute != kNoOp) after.push_back({r.last_compute, DepKind::kStreamWaits});
    // Transient buffers, freed when the core is done (docs/memory.md, "Context parallel"): p2p
    // keeps every received block until the forward returns (TE's p2p_comm_buffers list) and two
    // (K/V, dK/dV) buffers in backward; all_gather holds the gathered K/V, and in backward the
    // whole-sequence dK/dV as well; a2a's are the re-sharded Q, K, V.
    buffer_ = transient_bytes(lp, kv, q);
    if (buffer_ > 0)
      b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kActivations, buffer_, "cp kv buffers");
    const bool fwd = lp.forward();
    const int a2a = a2a_group_[idx(r.rank)];
    if (a2a >= 0) {
      // Before the core: Q, K, V forward; dO backward (the a2a of the group's size moves
      // (n - 1) / n of it).
      const OpId id = e_.coll(r, r.compute, name(fwd ? "a2a qkv" : "a2a dout"),
                              CollectiveKind::kAllToAll, a2a, fwd ? q + kv : q, after, lp.phase);
      lp.deps.push_back({id, DepKind::kStreamWaits});
      after = {{id, DepKind::kStreamWaits}};
    }
    if (ps_.cp_comm == CpComm::kAllGather) {
      const int g = r.group[ParallelDim::kCp];
      const OpId id = e_.coll(r, r.compute, name("all-gather kv"), CollectiveKind::kAllGather, g,
                              kv * ps_.cp, after, lp.phase);
      lp.deps.push_back({id, DepKind::kStreamWaits});
    }
    ring_.clear();
    if (steps_ > 1) {
      // Step 1's block leaves as soon as K/V exist (backward: as the step begins).
      ring_.push_back(e_.coll(r, r.stream[ParallelDim::kCp], name(fwd ? "ring kv" : "ring kv bwd"),
                              CollectiveKind::kSendRecv, ring_group_[idx(r.rank)], kv, after,
                              lp.phase));
    }
  }

  void end_layer(LayerPass& lp) override {
    if (!is_core(lp.layer)) return;
    RankState& r = lp.r();
    const bool fwd = lp.forward();
    const Bytes kv = kv_, q = q_;  // this core's, from begin_layer
    // Each ring step's kernel attends one block: (s / cp) / 2 keys per query on average, 1/steps
    // of the core's (its efficiency from that shape; docs/attention.md, "Efficiency").
    set_efficiency(lp.kernel, lp);
    OpId last = lp.kernel;
    for (int i = 1; i < steps_; ++i) {
      // The next block travels while this one computes: forward K/V; backward K/V with the dK/dV
      // summed so far (2 |KV|). Issued after the previous step's kernel, PyTorch's NCCL stream
      // waits for it (ProcessGroupNCCL syncs with the current stream), which also orders the
      // dK/dV it carries.
      if (i + 1 < steps_) {
        ring_.push_back(e_.coll(r, r.stream[ParallelDim::kCp],
                                name(fwd ? "ring kv" : "ring kv dkv"), CollectiveKind::kSendRecv,
                                ring_group_[idx(r.rank)], fwd ? kv : 2 * kv,
                                {{last, DepKind::kStreamWaits}}, lp.phase));
      }
      last =
          e_.repeat_kernel(lp, {{ring_[static_cast<std::size_t>(i - 1)], DepKind::kStreamWaits}});
    }
    if (steps_ > 1 && !fwd) {
      // The last hop: each rank's own dK/dV comes home before the QKV projection's backward.
      pending_.push_back(e_.coll(r, r.stream[ParallelDim::kCp], name("ring dkv"),
                                 CollectiveKind::kSendRecv, ring_group_[idx(r.rank)], kv,
                                 {{last, DepKind::kStreamWaits}}, lp.phase));
    }
    r.last_compute = last;
    lp.kernel = last;
    if (ps_.cp_comm == CpComm::kAllGather && !fwd) {
      r.last_compute =
          e_.coll(r, r.compute, name("reduce-scatter dkv"), CollectiveKind::kReduceScatter,
                  r.group[ParallelDim::kCp], kv * ps_.cp, {}, lp.phase);
    }
    const int a2a = a2a_group_[idx(r.rank)];
    if (a2a >= 0) {
      // After the core: O back to sequence sharding forward; dQ, dK, dV backward.
      r.last_compute = e_.coll(r, r.compute, name(fwd ? "a2a out" : "a2a dqkv"),
                               CollectiveKind::kAllToAll, a2a, fwd ? q : q + kv, {}, lp.phase);
    }
    if (buffer_ > 0) {
      b_.release(r.thread, r.compute, r.gpu, MemCategory::kActivations, buffer_, "cp kv buffers");
      buffer_ = 0;
    }
  }

  void end_segment(SegmentPass& /*sp*/) override {
    // The attention core is never a segment's first layer (a block's norm and QKV projection
    // precede it), so its last dK/dV hop always has a later layer in the pass to wait for it.
    CSIM_ASSERT(pending_.empty());
  }

 private:
  Emitter& e_;
  ProgramBuilder& b_;
  const ParallelSpec& ps_;
  const int steps_;
  std::vector<int> ring_group_, a2a_group_;  // per rank (-1: none)
  std::vector<OpId> ring_;                   // this core's ring transfers, in step order
  std::vector<OpId> pending_;                // dK/dV hops the next layer waits for
  Bytes buffer_ = 0;
  Bytes kv_ = 0, q_ = 0;  // the core in hand's |KV| and |Q| for one micro-batch

  static std::size_t idx(int rank) { return static_cast<std::size_t>(rank); }
  const LayerSpec& layer(int i) const {
    return e_.scenario().model.layers[static_cast<std::size_t>(i)];
  }
  bool is_core(int i) const { return is_fused_attention_core(layer(i)); }
  static NameRef name(const char* what) { return NameRef::cat({"cp ", what}); }
  Bytes transient_bytes(const LayerPass& lp, Bytes kv, Bytes q) const {
    switch (ps_.cp_comm) {
      case CpComm::kP2p:
      case CpComm::kA2aP2p:
        return lp.forward() ? (steps_ - 1) * kv : 4 * kv;
      case CpComm::kAllGather:
        return lp.forward() ? ps_.cp * kv : 2 * ps_.cp * kv;
      case CpComm::kA2a:
        return q + kv;
    }
    return 0;
  }
  void set_efficiency(OpId id, const LayerPass& lp) {
    if (steps_ <= 1) return;
    FusedAttentionShape shape = layer(lp.layer).fused_attention;
    // Per step: 2 (s / 2n)^2 pairs over the s / n queries of a rank of the n-rank ring.
    shape.keys_per_query /= steps_;
    shape.seq_len /= steps_;
    shape.causal = false;  // only the diagonal step is causal; the others are dense blocks
    b_.program().ops[static_cast<std::size_t>(id)].max_efficiency = fused_attention_max_efficiency(
        e_.scenario().cluster.gpu, shape, lp.phase == StepPhase::kBackward);
  }
};

}  // namespace

std::unique_ptr<ParallelPiece> make_context_parallel_piece(Emitter& e) {
  return std::make_unique<ContextParallelPiece>(e);
}

}  // namespace hybrid
}  // namespace csim::core
