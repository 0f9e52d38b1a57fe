// Pipeline parallel (docs/program.md, "Pipeline parallel"): GPipe, 1F1B and interleaved 1F1B
// schedules over m micro-batches, the model split into pp * v contiguous segments, point-to-point
// sends between consecutive segments.
//
// pipeline_schedule orders each stage's segment passes (the Emitter walks it); the PipelinePiece
// (hybrid_emitter.hpp) adds the stage's side of each pass: the receive of its input (activations
// forward, their gradient backward), the segment's saved activations, the send of its output, and
// on the last segment the loss on the (vocabulary-split) logits.
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/error.hpp"
#include "core/lowering/hybrid_emitter.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"

namespace csim::core {

std::vector<PipeStep> pipeline_schedule(PipelineSchedule schedule, int stages, int chunks,
                                        int micro, int stage) {
  CSIM_ASSERT(stages >= 1 && chunks >= 1 && micro >= 1 && stage >= 0 && stage < stages);
  std::vector<PipeStep> out;
  if (schedule == PipelineSchedule::kGpipe) {
    // GPipe (Huang et al. 2019): every forward, then every backward. Backward in micro-batch
    // order: with uniform stages the flush takes (m + p - 1)(t_f + t_b) either way.
    for (int j = 0; j < micro; ++j) out.push_back({true, 0, j});
    for (int j = 0; j < micro; ++j) out.push_back({false, 0, j});
    return out;
  }
  if (schedule == PipelineSchedule::kDualPipeV) {
    // DualPipeV (pipeline_dualpipev.cpp), its overlapped pairs as the forward then the backward
    // (dualpipev.py's _forward_backward_compute_chunk without overlapped_forward_backward).
    CSIM_ASSERT(chunks == 2);
    for (const DualPipeStep& d : dualpipev_schedule(stages, micro, stage)) {
      out.push_back(d.a);
      if (d.paired) out.push_back(d.b);
    }
    return out;
  }
  if (schedule == PipelineSchedule::k1f1b) {
    // PipeDream-flush (Narayanan et al. 2021, section 2.2.1; Megatron's
    // forward_backward_pipelining_without_interleaving): warm-up p - stage - 1 forwards, steady
    // 1F1B, cool-down backwards. At most p - stage micro-batches are in flight on a stage.
    const int warm = std::min(stages - stage - 1, micro);
    for (int j = 0; j < warm; ++j) out.push_back({true, 0, j});
    for (int i = 0; i < micro - warm; ++i) {
      out.push_back({true, 0, warm + i});
      out.push_back({false, 0, i});
    }
    for (int i = micro - warm; i < micro; ++i) out.push_back({false, 0, i});
    return out;
  }
  // Interleaved 1F1B (Narayanan et al. 2021, section 2.2.2; Megatron's
  // forward_backward_pipelining_with_interleaving), m a multiple of p.
  const int total = micro * chunks;
  int warm = (stages - stage - 1) * 2 + (chunks - 1) * stages;
  if (micro == stages) warm = total;
  warm = std::min(warm, total);
  const int group = stages * chunks;
  auto fwd_step = [&](int k) {
    const int chunk = (k % group) / stages;
    const int mb = (k / group) * stages + k % stages;
    return PipeStep{true, chunk, mb};
  };
  auto bwd_step = [&](int k) {
    const int chunk = chunks - 1 - (k % group) / stages;
    const int mb = (k / group) * stages + k % stages;
    return PipeStep{false, chunk, mb};
  };
  for (int k = 0; k < warm; ++k) out.push_back(fwd_step(k));
  for (int i = 0; i < total - warm; ++i) {
    out.push_back(fwd_step(warm + i));
    out.push_back(bwd_step(i));
  }
  for (int i = total - warm; i < total; ++i) out.push_back(bwd_step(i));
  return out;
}

std::vector<Segment> partition_layers(const ModelSpec& m, int segments,
                                      const std::vector<int>& segment_blocks) {
  CSIM_ASSERT(segments >= 1);
  const int n = static_cast<int>(m.layers.size());
  std::vector<Segment> out(static_cast<std::size_t>(segments));
  if (m.transformer.layers > 0) {
    // Transformers: segment g holds blocks [start_g, start_g + blocks_g), evenly blocks / segments
    // each (the parser checks divisibility) unless segment_blocks says otherwise
    // (core/model/pipeline_stages.hpp); the first segment also takes the layers before block 0
    // (embedding), the last the layers after the last block (final norm, LM head).
    CSIM_ASSERT(segment_blocks.empty() || static_cast<int>(segment_blocks.size()) == segments);
    std::vector<int> start(static_cast<std::size_t>(segments) + 1, 0);
    for (int g = 0; g < segments; ++g) {
      const int blocks = segment_blocks.empty() ? m.transformer.layers / segments
                                                : segment_blocks[static_cast<std::size_t>(g)];
      start[static_cast<std::size_t>(g) + 1] = start[static_cast<std::size_t>(g)] + blocks;
    }
    CSIM_ASSERT(start.back() == m.transformer.layers);
    // Blocks numbered past the main model's (multi-token-prediction depths, core/model/
    // mtp_layers.hpp) follow the final norm and stay with it on the last segment, as Megatron-Core
    // places them without a custom layout (mtp_on_this_rank).
    std::vector<int> first_of_block(static_cast<std::size_t>(m.transformer.layers), -1);
    for (int i = n - 1; i >= 0; --i) {
      const int b = m.layers[static_cast<std::size_t>(i)].block;
      if (b >= 0 && b < m.transformer.layers) first_of_block[static_cast<std::size_t>(b)] = i;
    }
    for (int g = 0; g < segments; ++g) {
      const std::size_t gi = static_cast<std::size_t>(g);
      out[gi].first = g == 0 ? 0 : first_of_block[static_cast<std::size_t>(start[gi])];
      out[gi].end = g + 1 == segments ? n : first_of_block[static_cast<std::size_t>(start[gi + 1])];
    }
    return out;
  }
  // Other models: boundary g at the first layer where the cumulative forward FLOPs reach
  // g / segments of the total, keeping at least one layer per segment.
  double total = 0;
  for (const LayerSpec& l : m.layers) total += l.fwd_flops_per_sample;
  int start = 0;
  double acc = 0;
  int i = 0;
  for (int g = 0; g < segments; ++g) {
    out[g].first = start;
    if (g + 1 == segments) {
      out[g].end = n;
      break;
    }
    const double target = total * (g + 1) / segments;
    i = start;
    acc += m.layers[i].fwd_flops_per_sample;
    ++i;  // at least one layer
    while (i < n - (segments - g - 1) && acc + m.layers[i].fwd_flops_per_sample <= target) {
      acc += m.layers[i].fwd_flops_per_sample;
      ++i;
    }
    out[g].end = i;
    start = i;
  }
  return out;
}

std::int64_t max_stage_params(const ModelSpec& m, const ParallelSpec& ps) {
  const int segments = ps.pp * ps.virtual_stages;
  const std::vector<Segment> segs = partition_layers(m, segments, ps.segment_blocks);
  std::vector<std::int64_t> per_stage(static_cast<std::size_t>(ps.pp), 0);
  for (int g = 0; g < segments; ++g) {
    const Segment& sg = segs[static_cast<std::size_t>(g)];
    for (int i = sg.first; i < sg.end; ++i)
      per_stage[static_cast<std::size_t>(pipeline_stage_of_segment(ps, g))] +=
          m.layers[static_cast<std::size_t>(i)].params;
  }
  return *std::max_element(per_stage.begin(), per_stage.end());
}

namespace hybrid {
namespace {

class PipelinePiece final : public ParallelPiece {
 public:
  bool layer_hooks() const override { return false; }  // no begin_layer / end_layer
  explicit PipelinePiece(Emitter& e) : e_(e), b_(e.builder()) {}

  void add_streams(RankState& r) override {
    if (e_.spec().pp <= 1) return;
    r.send_next = b_.add_stream(r.gpu, StreamRole::kComm, "pp send next");
    r.recv_prev = b_.add_stream(r.gpu, StreamRole::kComm, "pp recv prev");
    r.send_prev = b_.add_stream(r.gpu, StreamRole::kComm, "pp send prev");
    r.recv_next = b_.add_stream(r.gpu, StreamRole::kComm, "pp recv next");
    if (e_.spec().schedule == PipelineSchedule::kDualPipeV) {
      // The V's returning arm gets streams of its own: a stream's sends (receives) complete in
      // order, and each stream then carries one pair group's transfers in micro-batch order on
      // both sides, as the arm of chunk 0 does.
      r.v_send_prev = b_.add_stream(r.gpu, StreamRole::kComm, "pp v send prev");
      r.v_recv_next = b_.add_stream(r.gpu, StreamRole::kComm, "pp v recv next");
      r.v_send_next = b_.add_stream(r.gpu, StreamRole::kComm, "pp v send next");
      r.v_recv_prev = b_.add_stream(r.gpu, StreamRole::kComm, "pp v recv prev");
    }
  }

  void begin_step(StepState& /*st*/) override {
    act_.assign(static_cast<std::size_t>(e_.plan().segments) *
                    static_cast<std::size_t>(e_.spec().micro_batches),
                0);
    last_send_ = kNoOp;
    kept_logits_.clear();
  }

  void begin_segment(SegmentPass& sp) override {
    RankState& r = sp.st.r;
    if (!sp.forward) {
      // The output gradient from the next segment's rank, posted after this rank's last kernel.
      // DualPipeV's middle segments share the last rank: the compute stream orders them.
      if (sp.seg + 1 < e_.plan().segments && !local(r, sp.seg + 1))
        sp.first.push_back(
            {receive(r, sp.seg, sp.seg + 1, false, p2p_bytes(sp.seg)), DepKind::kStreamWaits});
      return;
    }
    if (sp.seg > 0 && !local(r, sp.seg - 1))
      sp.first.push_back(
          {receive(r, sp.seg, sp.seg - 1, true, p2p_bytes(sp.seg - 1)), DepKind::kStreamWaits});
    // The segment's saved activations, one block until its backward (an evaluation forward
    // keeps them).
    // Under strategy.activation_offload the transformer blocks' are the ActivationOffloadPiece's
    // (activation_offload.cpp); an evaluation forward offloads nothing.
    const Bytes act =
        e_.per_micro_batch(e_.plan().stored_per_sample[static_cast<std::size_t>(sp.seg)]) -
        (sp.eval ? 0 : e_.plan().act_blocks_per_micro);
    if (!sp.eval) act_[act_index(sp)] = act;
    if (act > 0)
      b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kActivations, act,
               NameRef::cat({sp.prefix, "activations"}, sp.micro));
  }

  void end_segment(SegmentPass& sp) override {
    RankState& r = sp.st.r;
    const bool last_segment = sp.seg + 1 == e_.plan().segments;
    const Bytes logits = e_.per_micro_batch(e_.plan().sharded.back().output_bytes_per_sample);
    if (sp.forward) {
      if (!last_segment) {
        if (!local(r, sp.seg + 1)) {
          const OpId send = p2p(r, sp.seg, e_.rank_of_segment(r, sp.seg + 1), true, true,
                                p2p_bytes(sp.seg), {{r.last_compute, DepKind::kStreamWaits}});
          if (!sp.eval) last_send_ = send;
        }
      } else if (sp.eval) {
        if (logits > 0)
          b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kActivations, logits,
                   "eval output (kept in a list)");
      } else {
        // Loss on the (vocabulary-split) logits: 5 FLOPs per element, 3 framework ops.
        if (logits > 0)
          b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kActivations, logits,
                   NameRef::cat({sp.prefix, "logits"}, sp.micro));
        r.last_compute = b_.compute(
            Lane{r.thread, r.gpu, r.compute}, NameRef::cat({sp.prefix, "loss"}, sp.micro),
            ComputeKind::kElementwise,
            5.0 * static_cast<double>(logits) / dtype_bytes(e_.precision().compute),
            loss_traffic_bytes(e_.scenario().model, logits), e_.scenario().model.loss_kernels, true,
            {}, StepPhase::kLoss, e_.spec().micro_batch_size);
      }
      return;
    }
    if (sp.seg > 0 && !local(r, sp.seg - 1)) {
      last_send_ = p2p(r, sp.seg, e_.rank_of_segment(r, sp.seg - 1), true, false,
                       p2p_bytes(sp.seg - 1), {{r.last_compute, DepKind::kStreamWaits}});
    }
    const Bytes act = act_[act_index(sp)];
    if (act > 0)
      b_.release(r.thread, r.compute, r.gpu, MemCategory::kActivations, act,
                 NameRef::cat({sp.prefix, "activations"}, sp.micro));
    if (last_segment && logits > 0) {
      // del_temporaries false: the script holds the step's outputs (docs/memory.md).
      if (e_.scenario().training.del_temporaries) {
        b_.release(r.thread, r.compute, r.gpu, MemCategory::kActivations, logits,
                   NameRef::cat({sp.prefix, "logits"}, sp.micro));
      } else {
        kept_logits_.emplace_back(NameRef::cat({sp.prefix, "logits"}, sp.micro).intern(b_.names()),
                                  logits);
      }
    }
  }

  void add_step_end_waits(StepState& /*st*/, std::vector<Dep>& waits) override {
    if (last_send_ != kNoOp) waits.push_back({last_send_, DepKind::kHostWaits});
  }

  void after_step_end(StepState& st) override {
    RankState& r = st.r;
    for (const auto& [name, bytes] : kept_logits_)
      b_.release(r.thread, r.compute, r.gpu, MemCategory::kActivations, bytes, name);
  }

 private:
  Emitter& e_;
  ProgramBuilder& b_;
  std::unordered_map<std::int64_t, int> groups_;  // (src, dst, direction) -> 2-GPU group
  std::vector<Bytes> act_;  // per (segment, micro-batch): saved activations of the step
  OpId last_send_ = kNoOp;  // the host waits for it at the step's end
  std::vector<std::pair<NameId, Bytes>> kept_logits_;  // del_temporaries false

  std::size_t act_index(const SegmentPass& sp) const {
    return static_cast<std::size_t>(sp.seg) * static_cast<std::size_t>(e_.spec().micro_batches) +
           static_cast<std::size_t>(sp.micro);
  }

  Bytes p2p_bytes(int seg) const {
    // The activation leaving a segment, b * s * h * e; with tp > 1 each TP rank sends its 1/t
    // share (Narayanan et al. 2021, section 4.1, scatter/gather optimisation; with sequence
    // parallelism the tensor is already split).
    const int last = e_.plan().segs[static_cast<std::size_t>(seg)].end - 1;
    double per_sample =
        e_.scenario().model.layers[static_cast<std::size_t>(last)].output_bytes_per_sample;
    if (e_.spec().tp > 1) per_sample /= e_.spec().tp;
    per_sample /= e_.spec().cp;  // each CP rank passes its s / cp tokens on
    return e_.per_micro_batch(per_sample);
  }

  // Segment `seg` runs on this rank too (DualPipeV's last rank: its two middle segments).
  bool local(const RankState& r, int seg) const { return e_.rank_of_segment(r, seg) == r.rank; }

  // The receive of segment `seg` from segment `from`'s rank, posted after this rank's last kernel
  // (Megatron's blocking receive).
  OpId receive(RankState& r, int seg, int from, bool forward, Bytes bytes) {
    std::vector<Dep> deps;
    if (r.last_compute != kNoOp) deps.push_back({r.last_compute, DepKind::kStreamWaits});
    return p2p(r, seg, e_.rank_of_segment(r, from), false, forward, bytes, std::move(deps));
  }

  // A send or receive of this rank's segment `seg` with `peer_rank`. The stream: forward sends
  // to the next stage and receives from the previous, backward the other way, except on
  // DualPipeV's returning arm (chunk 1), where the directions swap and the arm's own streams
  // carry them.
  OpId p2p(RankState& r, int seg, int peer_rank, bool send, bool forward, Bytes bytes,
           std::vector<Dep> deps) {
    const int src = send ? r.rank : peer_rank;
    const int dst = send ? peer_rank : r.rank;
    const std::int64_t world = static_cast<std::int64_t>(e_.ranks().size());
    const std::int64_t key = (static_cast<std::int64_t>(src) * world + dst) * 2 + (forward ? 0 : 1);
    auto it = groups_.find(key);
    int group = 0;
    if (it == groups_.end()) {
      group = e_.add_group({src, dst}, op_names::p2p_group(forward, src, dst));
      groups_[key] = group;
    } else {
      group = it->second;
    }
    const bool v_arm = e_.spec().schedule == PipelineSchedule::kDualPipeV &&
                       pipeline_chunk_of_segment(e_.spec(), seg) == 1;
    const int stream = v_arm ? (send ? (forward ? r.v_send_prev : r.v_send_next)
                                     : (forward ? r.v_recv_next : r.v_recv_prev))
                             : (send ? (forward ? r.send_next : r.send_prev)
                                     : (forward ? r.recv_prev : r.recv_next));
    return e_.coll(r, stream, op_names::p2p(send, forward), CollectiveKind::kSendRecv, group, bytes,
                   std::move(deps), forward ? StepPhase::kForward : StepPhase::kBackward);
  }
};

}  // namespace

std::unique_ptr<ParallelPiece> make_pipeline_piece(Emitter& e) {
  return std::make_unique<PipelinePiece>(e);
}

}  // namespace hybrid

Program lower_pipeline(const Scenario& s, Progress* progress) {
  const ParallelSpec& ps = s.strategy.parallel;
  std::string label =
      std::string("pipeline ") + to_string(ps.schedule) + " (pp " + std::to_string(ps.pp);
  if (ps.virtual_stages > 1) label += " x " + std::to_string(ps.virtual_stages) + " chunks";
  label += ", m " + std::to_string(ps.micro_batches);
  if (ps.dp > 1) label += ", dp " + std::to_string(ps.dp);
  return lower_hybrid(s, label + ")", progress);
}

}  // namespace csim::core
