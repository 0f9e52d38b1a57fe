// Activation offload (activation_offload.hpp, which cites the sources; docs/program.md,
// "Activation offload"): the groups, TE's window map, and the ActivationOffloadPiece that emits
// the copies, frees and reallocations around the layer loop's blocks.
#include "core/lowering/activation_offload.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "core/lowering/hybrid_emitter.hpp"

namespace csim::core {

std::vector<int> offload_window_map(int groups, int layers) {
  // TE's AsyncDoubleBufferGroupOffloadHandler.__init__: the first L mod K windows one layer
  // longer, so the K settle points spread over the L layers and the last is layer L - 1.
  std::vector<int> w(static_cast<std::size_t>(std::max(0, groups)));
  if (groups <= 0) return w;
  const int per = layers / groups, extra = layers % groups;
  for (int i = 0; i < groups; ++i)
    w[static_cast<std::size_t>(i)] = per * (i + 1) - 1 + std::min(i + 1, extra);
  return w;
}

std::vector<ActivationOffloadGroup> activation_offload_groups(const ModelSpec& m,
                                                              const ParallelSpec& ps, Segment seg) {
  std::vector<ActivationOffloadGroup> out;
  const int k = ps.activation_offload;
  if (k <= 0) return out;
  std::vector<ActivationOffloadGroup> blocks;  // every block of the segment, in order
  for (int i = seg.first; i < seg.end; ++i) {
    const int b = m.layers[static_cast<std::size_t>(i)].block;
    if (b < 0) continue;
    if (blocks.empty() || blocks.back().block != b) blocks.push_back({b, i, i + 1, 0, false, -1});
    blocks.back().end = i + 1;
  }
  const int l = static_cast<int>(blocks.size());
  if (k >= l) return out;  // the parser refuses K >= L (Megatron's check)
  const std::vector<int> w = offload_window_map(k, l);
  for (int i = 0; i < l; ++i) {
    ActivationOffloadGroup g = blocks[static_cast<std::size_t>(i)];
    // Recompute is refused with offload, so this is the block's whole saved activation (tp, sp,
    // cp and etp as the segment's total counts them).
    g.bytes_per_sample = rank_stored_activation_bytes_per_sample(m, Segment{g.first, g.end}, ps);
    g.offloaded = i < k;
    g.window = g.offloaded ? w[static_cast<std::size_t>(i)] : -1;
    out.push_back(g);
  }
  return out;
}

double offloaded_activation_bytes_per_sample(const ModelSpec& m, const ParallelSpec& ps,
                                             Segment seg) {
  double sum = 0;
  for (const ActivationOffloadGroup& g : activation_offload_groups(m, ps, seg))
    if (g.offloaded) sum += g.bytes_per_sample;
  return sum;
}

namespace hybrid {
namespace {

class ActivationOffloadPiece final : public ParallelPiece {
 public:
  explicit ActivationOffloadPiece(Emitter& e) : e_(e), b_(e.builder()) {}

  void add_streams(RankState& r) override {
    plan_groups();
    r.act_offload_d2h = b_.add_stream(r.gpu, StreamRole::kCopy, "act offload d2h");
    r.act_offload_h2d = b_.add_stream(r.gpu, StreamRole::kCopy, "act offload h2d");
  }

  void begin_segment(SegmentPass& sp) override {
    if (sp.eval) return;
    Pass& p = passes_[sp.micro];
    if (sp.forward) p = Pass{};
    p.d2h.assign(groups_.size(), kNoOp);
  }

  void begin_layer(LayerPass& lp) override {
    if (groups_.empty() || lp.sp.eval || lp.phase == StepPhase::kRecompute) return;
    const int block = block_of(lp.layer);
    if (block < 0) return;
    RankState& r = lp.r();
    Pass& p = passes_[lp.sp.micro];
    if (lp.phase == StepPhase::kForward) {
      // A block's saved activations, allocated as its forward starts (the segment's allocation
      // holds the layers outside the blocks: pipeline.cpp).
      const int g = group_of(block);
      if (g >= 0 && lp.layer == groups_[static_cast<std::size_t>(g)].first && bytes_of(g) > 0)
        b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kActivations, bytes_of(g), name(lp, g));
      return;
    }
    // The backward commit of `block`, before its backward kernels (on_group_commit_backward).
    if (!last_layer_of_block(lp.layer, block)) return;
    if (p.count >= 1 && groups_[static_cast<std::size_t>(p.count - 1)].window == block &&
        !p.reloaded) {
      const int g = p.count - 1;
      // The compute stream waits for the H2D issued before (wait_stream(h2d_stream)).
      if (p.last_h2d != kNoOp) lp.deps.push_back({p.last_h2d, DepKind::kStreamWaits});
      // The H2D stream waits for the compute stream (wait_stream(current_stream)); the reload
      // allocates group g again (SynchronizedGroupOffloadHandler.reload: torch.empty on the
      // device) and copies it back.
      const OpId a = b_.alloc(r.thread, r.act_offload_h2d, r.gpu, MemCategory::kActivations,
                              bytes_of(g), name(lp, g));
      if (r.last_compute != kNoOp)
        b_.program().ops[static_cast<std::size_t>(a)].deps.push_back(
            {r.last_compute, DepKind::kStreamWaits});
      p.last_h2d = b_.copy(r.thread, r.act_offload_h2d, r.gpu, "activation offload H2D",
                           CopyKind::kH2DPinned, bytes_of(g), -1, {}, StepPhase::kBackward, 0,
                           b_.dispatch_ns(1));
      if (g == 0) p.reloaded = true;  // the count stays at 1 (offloaded_group_count > 1)
      if (p.count > 1) --p.count;
    }
    // The last group's backward waits for every reload (current_group == 0).
    if (block == groups_.front().block && p.last_h2d != kNoOp)
      lp.deps.push_back({p.last_h2d, DepKind::kStreamWaits});
  }

  void end_layer(LayerPass& lp) override {
    if (groups_.empty() || lp.sp.eval || lp.phase == StepPhase::kRecompute) return;
    const int block = block_of(lp.layer);
    if (block < 0) return;
    RankState& r = lp.r();
    Pass& p = passes_[lp.sp.micro];
    if (lp.phase == StepPhase::kBackward) {
      // A block's saved activations (reloaded or kept) are freed after its backward (the first
      // layer, walked last): autograd drops the saved tensors of a node once it has run.
      const int g = group_of(block);
      if (g >= 0 && lp.layer == groups_[static_cast<std::size_t>(g)].first && bytes_of(g) > 0)
        b_.release(r.thread, r.compute, r.gpu, MemCategory::kActivations, bytes_of(g), name(lp, g));
      return;
    }
    if (!last_layer_of_block(lp.layer, block)) return;
    // The forward commit of `block` (synchronize_on_group_commit_forward).
    const OpId after = r.last_compute;  // the block's last op on the compute stream
    const int k = offloaded_;
    if (block == groups_.front().block) p.d2h[0] = d2h(r, 0, after);
    if (p.count < k && groups_[static_cast<std::size_t>(p.count)].window == block) {
      const int g = p.count;
      // The compute stream waits for group g's D2H (wait_stream(d2h_stream)), and g's GPU copy
      // is dropped there: a free on the compute stream that waits for the copy.
      if (bytes_of(g) > 0) {
        const OpId f = b_.release(r.thread, r.compute, r.gpu, MemCategory::kActivations,
                                  bytes_of(g), name(lp, g));
        b_.program().ops[static_cast<std::size_t>(f)].deps.push_back(
            {p.d2h[static_cast<std::size_t>(g)], DepKind::kStreamWaits});
      }
      if (g + 1 < k) p.d2h[static_cast<std::size_t>(g + 1)] = d2h(r, g + 1, after);
      ++p.count;
    }
  }

 private:
  struct Pass {
    int count = 0;  // the handler's offloaded_group_count
    bool reloaded = false;
    std::vector<OpId> d2h;  // per group
    OpId last_h2d = kNoOp;
  };
  Emitter& e_;
  ProgramBuilder& b_;
  bool planned_ = false;
  int offloaded_ = 0;  // K: groups_[0..K) are offloaded
  std::vector<ActivationOffloadGroup> groups_;
  std::vector<Bytes> bytes_;         // per group, one micro-batch: llround(b x a_i)
  std::vector<std::string> labels_;  // per group: its memory ops' name after the pass prefix
  std::unordered_map<int, int> group_of_block_;
  std::unordered_map<int, Pass> passes_;  // by micro-batch (pp 1: F then B of each)

  // The groups, once the Emitter's plan exists (pp 1, the parser's rule: one segment, every
  // block).
  void plan_groups() {
    if (planned_) return;
    planned_ = true;
    groups_ = activation_offload_groups(e_.scenario().model, e_.spec(), e_.plan().segs.front());
    for (std::size_t i = 0; i < groups_.size(); ++i) {
      group_of_block_[groups_[i].block] = static_cast<int>(i);
      bytes_.push_back(e_.per_micro_batch(groups_[i].bytes_per_sample));
      if (groups_[i].offloaded) ++offloaded_;
      labels_.push_back("block " + std::to_string(groups_[i].block) + " offloaded activations");
    }
  }

  int block_of(int layer) const {
    return e_.scenario().model.layers[static_cast<std::size_t>(layer)].block;
  }
  int group_of(int block) const {
    const auto it = group_of_block_.find(block);
    return it == group_of_block_.end() ? -1 : it->second;
  }
  Bytes bytes_of(int g) const { return bytes_[static_cast<std::size_t>(g)]; }
  bool last_layer_of_block(int layer, int block) const {
    const auto& layers = e_.scenario().model.layers;
    return layer + 1 == static_cast<int>(layers.size()) ||
           layers[static_cast<std::size_t>(layer + 1)].block != block;
  }
  NameRef name(const LayerPass& lp, int g) const {
    return NameRef::cat({lp.sp.prefix, labels_[static_cast<std::size_t>(g)]}, lp.sp.micro);
  }
  // Group g's D2H on the handler's d2h_stream, after the compute stream's `after`
  // (d2h_stream.wait_stream(current_stream)).
  OpId d2h(RankState& r, int g, OpId after) {
    std::vector<Dep> deps;
    if (after != kNoOp) deps.push_back({after, DepKind::kStreamWaits});
    return b_.copy(r.thread, r.act_offload_d2h, r.gpu, "activation offload D2H", CopyKind::kD2H,
                   bytes_of(g), -1, std::move(deps), StepPhase::kForward, 0, b_.dispatch_ns(1));
  }
};

}  // namespace

std::unique_ptr<ParallelPiece> make_activation_offload_piece(Emitter& e) {
  return std::make_unique<ActivationOffloadPiece>(e);
}

}  // namespace hybrid
}  // namespace csim::core
