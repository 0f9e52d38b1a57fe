// The EP all-to-all overlap of Megatron-Core's combined 1F1B schedule (strategy.moe_a2a_overlap
// 1f1b; docs/program.md, "MoE all-to-all overlap").
//
// Megatron-Core 0.14+ (--overlap-moe-expert-parallel-comm; megatron/core/pipeline_parallel/
// combined_1f1b.py, schedules.py, megatron/core/models/common/model_chunk_schedule_plan.py)
// merges, in the steady phase, one micro-batch's forward with another's backward layer by layer
// and runs the EP dispatch / combine of each on a communication stream while the other's
// attention and expert GEMMs use the compute stream. Per layer pair (forward block i, backward
// block j), as model_chunk_schedule_plan.py lays it out:
//   comm stream:    combine_bwd(j) | dispatch_fwd(i), dispatch_bwd(j) | combine_fwd(i)
//   compute stream: attn_fwd(i)    | mlp_bwd(j), mlp_fwd(i)          | attn_bwd(j)
// Here each pass is cut into chunks at every MoE block's first expert layer and after its last
// (overlap_boundaries) and the chunks alternate, backward first: B0 F0 B1 F1 ... Each chunk
// ends with the all-to-all its own pass needs next (the expert piece issues it on the "ep a2a"
// stream when the pass pauses, expert_parallel.cpp), so that exchange runs while the other
// pass's next chunk computes, and the chunk after it waits for it only through an event:
//   B0 = the post-expert layers' backward, then combine_bwd(j)   (comm: under F0)
//   F0 = attention (and router) of block i, then dispatch_fwd(i)  (comm: under B1)
//   B1 = the experts' backward of block j, then dispatch_bwd(j)   (comm: under F1)
//   F1 = the experts of block i, then combine_fwd(i)              (comm: under B2)
// A merged pair then takes about max(compute, communication) per chunk pair instead of their
// sum: the step gets shorter by the hidden all-to-alls, never below the compute alone. The
// all-to-all kernels still take their SMs (core::comm_kernel_sms; DeepEP's deepep_sms) while
// they overlap, through the engine's shared-resource contract. Warm-up and cool-down passes,
// which have no partner, keep their all-to-alls in line.
//
// The DeepSeek-V3 report's DualPipe (section 3.2.1) pairs chunks the same way inside a
// bidirectional pipeline: under strategy.schedule dualpipev the pairs are DualPipeV's own
// (pipeline_dualpipev.cpp), merged here the same way (docs/program.md, "DualPipeV").
#include "core/lowering/moe_a2a_overlap.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/lowering/hybrid_emitter.hpp"

namespace csim::core::hybrid {

std::vector<OverlapStep> overlap_schedule(PipelineSchedule schedule, int stages, int chunks,
                                          int micro, int stage) {
  // The base order is warm forwards, then forward/backward alternating, then backwards
  // (pipeline.cpp); its forwards and backwards each keep their order. The warm-up here:
  //  - interleaved: the base's leading forwards, its warm-up plus one (Megatron's schedules.py
  //    adds 1 under overlap_moe_expert_parallel_comm);
  //  - 1F1B: 2 (p - s - 1) + 1 forwards on stage s. A merged pair sends its forward's output
  //    and its backward's input gradient only when it ends, so stage s's pair i, which needs
  //    B(i) from stage s + 1's pair i, which needs stage s's F(w_{s+1} + i), starts at least
  //    2T (T one pair) after stage s's pair i - (w_s - w_{s+1}). With w_s - w_{s+1} = 1 (one
  //    more warm-up forward, as the interleaved schedule has) the steady phase would run one
  //    pair per 2T; with 2 it runs one per T, as base 1F1B does. Megatron-Core offers the
  //    overlap with pipelining only on the interleaved schedule, whose warm-up already has the
  //    factor 2; this is that warm-up with one chunk. Stage s then holds up to 2 (p - s) - 1
  //    micro-batches' activations instead of p - s (docs/program.md, "MoE all-to-all overlap").
  //  - pp 1: one forward (combined_1f1b_schedule_for_no_pipelining: F(i + 1) with B(i)).
  // Either way no pair holds a micro-batch's forward and its own backward (on the last stage the
  // base 1F1B order would pair F(i) with B(i), which needs F(i)'s loss).
  //  - DualPipeV: its own pairs (dualpipev.py's _forward_backward_chunk, pipeline_dualpipev.cpp),
  //    a forward and a backward of different micro-batches and chunks, as they stand.
  if (schedule == PipelineSchedule::kDualPipeV) {
    std::vector<OverlapStep> v;
    for (const DualPipeStep& d : dualpipev_schedule(stages, micro, stage))
      v.push_back({d.a, d.b, d.paired});
    return v;
  }
  const std::vector<PipeStep> base = pipeline_schedule(schedule, stages, chunks, micro, stage);
  std::vector<PipeStep> fwd, bwd;
  std::size_t lead = 0;
  bool leading = true;
  for (const PipeStep& s : base) {
    if (!s.forward) leading = false;
    if (leading) ++lead;
    (s.forward ? fwd : bwd).push_back(s);
  }
  if (schedule == PipelineSchedule::k1f1b)
    lead = static_cast<std::size_t>(std::min(2 * (stages - stage - 1) + 1, micro));
  CSIM_ASSERT(fwd.size() == bwd.size() && lead <= fwd.size());
  std::vector<OverlapStep> out;
  for (std::size_t i = 0; i < lead; ++i) out.push_back({fwd[i], {}, false});
  std::size_t b = 0;
  for (std::size_t f = lead; f < fwd.size(); ++f, ++b) out.push_back({fwd[f], bwd[b], true});
  for (; b < bwd.size(); ++b) out.push_back({bwd[b], {}, false});
  return out;
}

std::vector<int> overlap_boundaries(const ModelSpec& m, int first, int end) {
  std::vector<int> out;
  for (int i = first + 1; i < end; ++i) {
    const ExpertRole role = m.layers[static_cast<std::size_t>(i)].expert_role;
    const ExpertRole before = m.layers[static_cast<std::size_t>(i) - 1].expert_role;
    if (role == ExpertRole::kFirst || before == ExpertRole::kLast) out.push_back(i);
  }
  return out;
}

void Emitter::emit_overlapped_passes(StepState& st) {
  const int p = ps_.pp, v = ps_.virtual_stages, m = static_cast<int>(ps_.micro_batches);
  for (const OverlapStep& os : overlap_schedule(ps_.schedule, p, v, m, st.r.c[ParallelDim::kPp])) {
    SegmentPass a = pass_of(st, os.a);
    if (os.paired) {
      SegmentPass b = pass_of(st, os.b);
      emit_pair(a, b);
    } else if (os.a.forward) {
      emit_forward(a);
    } else {
      emit_backward(a);
    }
  }
}

void Emitter::emit_pair(SegmentPass& fwd, SegmentPass& bwd) {
  CSIM_ASSERT(fwd.forward && !bwd.forward);
  RankState& r = fwd.st.r;
  fwd.paired = bwd.paired = true;
  // Each pass keeps its own last op: a pass's collectives and sends wait for its own kernels,
  // not the other micro-batch's (the compute stream orders the kernels anyway).
  const OpId before = r.last_compute;
  open_pass(fwd);
  OpId last_f = r.last_compute;
  r.last_compute = before;
  open_pass(bwd);
  OpId last_b = r.last_compute;

  // The chunks: [c_k, c_k+1) over the boundaries, forward ascending, backward descending.
  auto cuts = [&](const SegmentPass& sp) {
    std::vector<int> c{sp.sg.first};
    for (int x : overlap_boundaries(s_.model, sp.sg.first, sp.sg.end)) c.push_back(x);
    c.push_back(sp.sg.end);
    return c;
  };
  const std::vector<int> cf = cuts(fwd), cb = cuts(bwd);
  const std::size_t nf = cf.size() - 1, nb = cb.size() - 1;
  auto run = [&](SegmentPass& sp, const std::vector<int>& c, std::size_t n, std::size_t k,
                 OpId& last) {
    r.last_compute = last;
    const bool f = sp.forward;
    const int lo = f ? c[k] : c[n - 1 - k], hi = f ? c[k + 1] : c[n - k];
    walk_range(sp, f, lo, hi);
    if (k + 1 < n) {
      const int next = f ? hi : lo - 1;
      each_piece([&](ParallelPiece& pc) { pc.pause_pass(sp, next); });
    }
    last = r.last_compute;
    if (k + 1 == n) close_pass(sp);
    last = r.last_compute;
  };
  // Backward first: its combine_bwd then runs under the forward's first chunk (above).
  for (std::size_t k = 0; k < std::max(nf, nb); ++k) {
    if (k < nb) run(bwd, cb, nb, k, last_b);
    if (k < nf) run(fwd, cf, nf, k, last_f);
  }
  // What comes after the pair waits for the pass that ended last.
  r.last_compute = nf >= nb ? last_f : last_b;
}

}  // namespace csim::core::hybrid
