// Activation recompute (docs/program.md, "Activation recompute"; Korthikanti et al. 2022,
// "Reducing Activation Recomputation in Large Transformer Models", sections 4 and 5).
//
// Activations per transformer block per sample, in bytes with 2-byte elements (table 2):
//   no parallelism                 sh(34 + 5as/h)
//   tensor parallel (t)            sh(10 + 24/t + 5as/(ht))
//   tensor + sequence parallel     sh(34/t + 5as/(ht))
//   selective recompute            drops the 5as/h term (scores, softmax, dropout recomputed)
//   full recompute                 2sh (the block input; /t with sequence parallelism)
// The per-layer split of the 34 (see core/model/model_builders.cpp) and shard_layer give all of
// them. The RecomputePiece (hybrid_emitter.hpp) re-runs the recomputed forward work right before
// the backward that needs it: selective recompute the attention core's forward, full recompute the
// whole block's forward (with its tensor-parallel collectives: the re-run goes through every
// piece's layer hooks), holding what it recreates until the backward of the recomputed layers is
// done.
#include <algorithm>
#include <cmath>

#include "core/lowering/hybrid_emitter.hpp"
#include "core/lowering/parallel_plan.hpp"

namespace csim::core {

namespace {

// The block input a checkpoint keeps: what ln_1 saves as one kernel (its input and statistics).
// An eager framework's norm saves more while the block runs (an fp32 copy,
// core/model/eager_kernels.hpp), not in the checkpoint.
double checkpoint_bytes(const LayerSpec& l, const ShardedLayer& sl) {
  if (l.fused_activation_bytes_per_sample < 0 || l.activation_bytes_per_sample <= 0)
    return sl.act_bytes_per_sample;
  return sl.act_bytes_per_sample * l.fused_activation_bytes_per_sample /
         l.activation_bytes_per_sample;
}

}  // namespace

double stored_activation_bytes_per_sample(const ModelSpec& m, Segment seg, int tp, bool sp,
                                          RecomputeMode mode, int every, std::uint8_t modules) {
  if (mode == RecomputeMode::kSelective && modules != recompute_module::kCoreAttn)
    return module_stored_activation_bytes_per_sample(m, seg, tp, sp, modules);
  double bytes = 0;
  for (int i = seg.first; i < seg.end; ++i) {
    const LayerSpec& l = m.layers[static_cast<std::size_t>(i)];
    const ShardedLayer sl = shard_layer(m, i, tp, sp);
    const bool first_of_block =
        i == 0 || m.layers[static_cast<std::size_t>(i - 1)].block != l.block;
    if (mode == RecomputeMode::kNone || l.block < 0 ||
        (mode == RecomputeMode::kFull && !block_checkpointed(l.block, every))) {
      bytes += sl.act_bytes_per_sample;
    } else if (mode == RecomputeMode::kSelective) {
      bytes += sl.selective_act_bytes_per_sample;
    } else if (mode == RecomputeMode::kSelectiveOp) {
      // The checkpoint's input (what ln_1 saves) and the outputs the op policy keeps.
      if (first_of_block) bytes += checkpoint_bytes(l, sl);
      if (sac_op_output_saved(m, i)) bytes += sl.output_bytes_per_sample;
    } else {
      // Full: a block keeps only its input, which its first layer (ln_1) saves.
      if (first_of_block) bytes += checkpoint_bytes(l, sl);
    }
  }
  return bytes;
}

double rank_stored_activation_bytes_per_sample(const ModelSpec& m, Segment seg,
                                               const ParallelSpec& ps) {
  // x / 1 and x + 0 are x exactly: without context or expert tensor parallelism nothing changes.
  return (stored_activation_bytes_per_sample(m, seg, ps.tp, ps.sequence_parallel, ps.recompute,
                                             ps.recompute_every, ps.recompute_modules) +
          etp_extra_stored_bytes_per_sample(m, seg, ps)) /
         ps.cp;
}

namespace hybrid {
namespace {

class RecomputePiece final : public ParallelPiece {
 public:
  explicit RecomputePiece(Emitter& e) : e_(e) {}

  void begin_segment(SegmentPass& /*sp*/) override {
    block_first_ = -1;
    core_first_ = -1;
  }

  void begin_layer(LayerPass& lp) override {
    if (lp.phase != StepPhase::kBackward) return;
    const RecomputeMode mode = e_.spec().recompute;
    const auto& layers = e_.scenario().model.layers;
    const auto& sharded = e_.plan().sharded;
    const int i = lp.layer;
    const Segment sg = lp.sp.sg;
    const LayerSpec& l = layers[static_cast<std::size_t>(i)];
    RankState& r = lp.r();
    ProgramBuilder& b = e_.builder();
    const double bsz = static_cast<double>(e_.spec().micro_batch_size);
    // Full recompute: at a block's last layer, re-run the block's forward (with its TP
    // collectives) holding the block's full activations until its backward is done.
    const bool block_ends =
        l.block >= 0 &&
        (i + 1 == sg.end || layers[static_cast<std::size_t>(i + 1)].block != l.block);
    if (mode == RecomputeMode::kSelectiveOp && block_ends) {
      rerun_unsaved(lp);
      return;
    }
    if (mode == RecomputeMode::kFull && block_ends &&
        block_checkpointed(l.block, e_.spec().recompute_every)) {
      block_first_ = i;
      while (block_first_ > sg.first &&
             layers[static_cast<std::size_t>(block_first_ - 1)].block == l.block)
        --block_first_;
      block_bytes_ = 0;
      for (int k = block_first_; k <= i; ++k) {
        block_bytes_ += static_cast<Bytes>(
            std::llround(sharded[static_cast<std::size_t>(k)].act_bytes_per_sample * bsz));
      }
      if (block_bytes_ > 0)
        b.alloc(r.thread, r.compute, r.gpu, MemCategory::kActivations, block_bytes_,
                NameRef::cat({lp.sp.prefix, "recomputed block"}, lp.sp.micro));
      rerun(lp, block_first_, i);
    }
    // Selective recompute: at the last layer of a run the model marks (the attention core),
    // re-run the run's forward in order, holding what it recreates (the activations beyond
    // those kept) until the run's backward is done.
    if (mode == RecomputeMode::kSelective &&
        (e_.spec().recompute_modules & recompute_module::kCoreAttn) && l.selective_recompute &&
        (i + 1 == sg.end || !layers[static_cast<std::size_t>(i + 1)].selective_recompute)) {
      core_first_ = i;
      while (core_first_ > sg.first &&
             layers[static_cast<std::size_t>(core_first_ - 1)].selective_recompute)
        --core_first_;
      core_bytes_ = 0;
      for (int k = core_first_; k <= i; ++k) {
        const ShardedLayer& sk = sharded[static_cast<std::size_t>(k)];
        core_bytes_ += static_cast<Bytes>(
            std::llround((sk.act_bytes_per_sample - sk.selective_act_bytes_per_sample) * bsz));
      }
      if (core_bytes_ > 0)
        b.alloc(r.thread, r.compute, r.gpu, MemCategory::kActivations, core_bytes_,
                NameRef::cat({lp.sp.prefix, "recomputed attention"}, lp.sp.micro));
      rerun(lp, core_first_, i);
    }
  }

  void end_layer(LayerPass& lp) override {
    if (lp.phase != StepPhase::kBackward) return;
    RankState& r = lp.r();
    ProgramBuilder& b = e_.builder();
    if (lp.layer == block_first_) {
      if (block_bytes_ > 0)
        b.release(r.thread, r.compute, r.gpu, MemCategory::kActivations, block_bytes_,
                  NameRef::cat({lp.sp.prefix, "recomputed block"}, lp.sp.micro));
      block_first_ = -1;
    }
    if (lp.layer == core_first_) {
      if (core_bytes_ > 0)
        b.release(r.thread, r.compute, r.gpu, MemCategory::kActivations, core_bytes_,
                  NameRef::cat({lp.sp.prefix, "recomputed attention"}, lp.sp.micro));
      core_first_ = -1;
    }
  }

 private:
  Emitter& e_;
  int block_first_ = -1;  // full: first layer of the block being recomputed
  Bytes block_bytes_ = 0;
  int core_first_ = -1;  // selective: first layer of the attention core being recomputed
  Bytes core_bytes_ = 0;

  // selective_op (recompute_policy.cpp): at a block's last layer, re-run the layers whose
  // outputs the policy does not keep, holding what the block's backward needs beyond what was
  // kept (its full activations less the kept bytes) until the block's backward is done.
  void rerun_unsaved(LayerPass& lp) {
    const auto& layers = e_.scenario().model.layers;
    const auto& sharded = e_.plan().sharded;
    const int i = lp.layer;
    const int block = layers[static_cast<std::size_t>(i)].block;
    block_first_ = i;
    while (block_first_ > lp.sp.sg.first &&
           layers[static_cast<std::size_t>(block_first_ - 1)].block == block)
      --block_first_;
    const double bsz = static_cast<double>(e_.spec().micro_batch_size);
    double full = 0;
    for (int k = block_first_; k <= i; ++k)
      full += sharded[static_cast<std::size_t>(k)].act_bytes_per_sample;
    const ParallelSpec& ps = e_.spec();
    const double kept =
        stored_activation_bytes_per_sample(e_.scenario().model, Segment{block_first_, i + 1}, ps.tp,
                                           ps.sequence_parallel, RecomputeMode::kSelectiveOp);
    block_bytes_ = static_cast<Bytes>(std::llround(std::max(0.0, full - kept) * bsz));
    RankState& r = lp.r();
    if (block_bytes_ > 0)
      e_.builder().alloc(r.thread, r.compute, r.gpu, MemCategory::kActivations, block_bytes_,
                         NameRef::cat({lp.sp.prefix, "recomputed block"}, lp.sp.micro));
    bool first = true;
    for (int k = block_first_; k <= i; ++k) {
      if (sac_op_output_saved(e_.scenario().model, k)) continue;
      LayerPass rp{lp.sp, k, e_.plan().unit_of_layer[static_cast<std::size_t>(k)],
                   StepPhase::kRecompute};
      if (first) rp.deps = lp.deps;
      first = false;
      e_.emit_layer(rp);
    }
    if (!first) lp.deps.clear();
  }

  // Layers [first, last] forward again (phase recompute); the first re-run waits for what the
  // backward kernel would have waited for, the backward kernel then for the re-run.
  void rerun(LayerPass& lp, int first, int last) {
    for (int k = first; k <= last; ++k) {
      LayerPass rp{lp.sp, k, e_.plan().unit_of_layer[static_cast<std::size_t>(k)],
                   StepPhase::kRecompute};
      if (k == first) rp.deps = lp.deps;
      e_.emit_layer(rp);
    }
    lp.deps.clear();
  }
};

}  // namespace

std::unique_ptr<ParallelPiece> make_recompute_piece(Emitter& e) {
  return std::make_unique<RecomputePiece>(e);
}

}  // namespace hybrid
}  // namespace csim::core
