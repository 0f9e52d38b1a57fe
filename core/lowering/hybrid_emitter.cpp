// The Emitter (hybrid_emitter.hpp): the rank layout and the walk of each rank's step that the
// parallel pieces hook into (docs/program.md, "Pipeline, tensor, 3D, ZeRO/FSDP").
//
// Per GPU: one Python process with one thread issuing the stage's schedule in order (Megatron
// calls backward from the schedule loop; autograd's device thread issues the kernels while the
// caller waits, so one issuing thread is equivalent); streams: compute (kernels and the
// tensor-parallel collectives, which Megatron runs in line), dp (gradient reduction, ZeRO
// gathers), copy, then the pieces' own (the pipeline's four point-to-point streams).
//
// [SECTION] index: plan, ranks, collectives, passes, step
#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/lowering/activation_offload.hpp"
#include "core/lowering/framework_states.hpp"
#include "core/lowering/hybrid_emitter.hpp"
#include "core/lowering/optimizer_kernels.hpp"
#include "core/lowering/optimizer_memory.hpp"
#include "core/lowering/optimizer_offload.hpp"
#include "core/model/moe_routing.hpp"
#include "core/scenario/scenario_parser.hpp"

namespace csim::core::hybrid {

namespace {

// Whether shifting every rank's coordinate along (size, stride) by one, cyclically, maps each
// group of `g` along each of `dims` onto a whole group (a mirror must: the ranks it stands for
// take part in the same collectives). A group is named by its ranks with the coordinate along
// its dimension zeroed; the shift must send every member of one group to members of one group.
bool shift_maps_groups(int size, int stride, const RankGrid& g,
                       std::initializer_list<ParallelDim> dims) {
  const int world = g.size();
  for (ParallelDim d : dims) {
    if (g.size(d) <= 1) continue;
    std::vector<int> image_of_group(static_cast<std::size_t>(world), -1);
    for (int rk = 0; rk < world; ++rk) {
      const int c = rk / stride % size;
      const int to = rk + ((c + 1) % size - c) * stride;
      const int from_key = rk - g.coord(rk)[d] * g.stride(d);
      const int to_key = to - g.coord(to)[d] * g.stride(d);
      int& seen = image_of_group[static_cast<std::size_t>(from_key)];
      if (seen < 0) seen = to_key;
      if (seen != to_key) return false;
    }
  }
  return true;
}

}  // namespace

// The pieces as the layer loop's per-layer pass: every hook it calls is a LayerPass's (the
// Emitter walks and re-runs LayerPasses only).
class Emitter::PieceHooks : public LayerHook {
 public:
  explicit PieceHooks(Emitter& e) : e_(e) {}
  void enter(LayerVisit& v) override {
    LayerPass& lp = static_cast<LayerPass&>(v);
    if (lp.unit_begins) e_.each_piece([&](ParallelPiece& p) { p.begin_unit(lp); });
  }
  void begin_kernel(LayerVisit& v) override {
    LayerPass& lp = static_cast<LayerPass&>(v);
    for (ParallelPiece* p : e_.layer_pieces_) p->begin_layer(lp);
  }
  void end_kernel(LayerVisit& v) override {
    LayerPass& lp = static_cast<LayerPass&>(v);
    lp.r().last_compute = lp.kernel;
    for (auto it = e_.layer_pieces_.rbegin(); it != e_.layer_pieces_.rend(); ++it)
      (*it)->end_layer(lp);
  }
  void leave(LayerVisit& v) override {
    LayerPass& lp = static_cast<LayerPass&>(v);
    if (lp.unit_ends) e_.each_piece_reversed([&](ParallelPiece& p) { p.end_unit(lp); });
  }

 private:
  Emitter& e_;
};

Emitter::Emitter(const Scenario& s, ProgramBuilder& b)
    : s_(s),
      ps_(s.strategy.parallel),
      b_(b),
      grid_(ps_),
      pb_(b.precision()),
      coll_python_ns_(b.python_ns(1)),
      coll_dispatch_ns_(b.dispatch_ns(1)),
      piece_hooks_(std::make_unique<PieceHooks>(*this)) {
  hooks_[0] = piece_hooks_.get();
}

Bytes Emitter::per_micro_batch(double per_sample) const {
  return static_cast<Bytes>(std::llround(per_sample * static_cast<double>(ps_.micro_batch_size)));
}

// [SECTION] Plan ----------------------------------------------------------------------------------

void Emitter::make_plan() {
  const auto& layers = s_.model.layers;
  plan_.segments = ps_.pp * ps_.virtual_stages;
  plan_.segs = partition_layers(s_.model, plan_.segments, ps_.segment_blocks);
  for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
    plan_.sharded.push_back(shard_layer(s_.model, i, ps_.tp, ps_.sequence_parallel));
    shard_context(plan_.sharded.back(), layers[static_cast<std::size_t>(i)], ps_);
    shard_experts(plan_.sharded.back(), layers[static_cast<std::size_t>(i)], ps_);
  }
  for (const Segment& sg : plan_.segs) {
    plan_.stored_per_sample.push_back(rank_stored_activation_bytes_per_sample(s_.model, sg, ps_));
  }
  // strategy.activation_offload (pp 1, one segment): the blocks' share of segment 0's.
  for (const ActivationOffloadGroup& g :
       activation_offload_groups(s_.model, ps_, plan_.segs.front()))
    plan_.act_blocks_per_micro += per_micro_batch(g.bytes_per_sample);
  plan_.sharding = sharding_plan(ps_, s_.strategy.kind);
  loop_ = std::make_unique<LayerLoop>(b_, sharded_layer_figures(plan_.sharded));
  // Units: blocks (GPT) or a layer with parameters and the parameter-free layers after it; a
  // unit never crosses a segment boundary.
  std::vector<char> seg_start(layers.size() + 1, 0);
  for (const Segment& sg : plan_.segs) seg_start[static_cast<std::size_t>(sg.first)] = 1;
  auto& units = plan_.units;
  for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
    const LayerSpec& l = layers[static_cast<std::size_t>(i)];
    bool fresh = units.empty() || seg_start[static_cast<std::size_t>(i)];
    if (!fresh) {
      const LayerSpec& prev = layers[static_cast<std::size_t>(i - 1)];
      if (s_.model.transformer.layers > 0) {
        fresh = l.block != prev.block;
      } else {
        fresh = l.params > 0 && units.back().params > 0;
      }
    }
    if (fresh) units.push_back(Unit{i, i, 0});
    units.back().end = i + 1;
    units.back().params += plan_.sharded[static_cast<std::size_t>(i)].params;
    if (ps_.ep > 1 && l.expert_role != ExpertRole::kNone)
      units.back().expert_params += plan_.sharded[static_cast<std::size_t>(i)].params;
    plan_.unit_of_layer.push_back(static_cast<int>(units.size()) - 1);
  }
}

// [SECTION] Ranks ---------------------------------------------------------------------------------

void Emitter::lay_out_ranks() {
  Program& prog = b_.program();
  const auto& ids = s_.strategy.device_ids;
  const int world = grid_.size();
  CSIM_ASSERT(world == static_cast<int>(ids.size()));
  ranks_.resize(static_cast<std::size_t>(world));
  // Rank symmetry: the ranks that differ only by their data-, context- or tensor-parallel index
  // run the same ops at the same times (docs/cost-model.md, "Rank symmetry").
  // Under expert parallelism a shift along dp would straddle EP groups: the mirrors shift the
  // expert grid's edp coordinate instead (the ranks of an EP group are all emitted under uneven
  // routing), which maps EP, EDP, the dense gradient group and the pipeline's pairs onto their
  // like; under balanced routing every rank of an EP group does the same work, so the mirrors also
  // swap the cp coordinate and shift the ep one in steps of tp x cp (docs/program.md, "Rank
  // symmetry"). Every such mirror is used only where it maps each dense and expert group onto a
  // group (shift_maps_groups).
  if (ps_.ep > 1) {
    const RankGrid eg = RankGrid::expert(ps_);
    const auto maps_every_group = [&](int n, int stride) {
      return shift_maps_groups(
                 n, stride, grid_,
                 {ParallelDim::kTp, ParallelDim::kCp, ParallelDim::kDp, ParallelDim::kPp}) &&
             shift_maps_groups(n, stride, eg,
                               {ParallelDim::kEtp, ParallelDim::kEp, ParallelDim::kEdp});
    };
    if (eg.size(ParallelDim::kEdp) > 1 &&
        maps_every_group(eg.size(ParallelDim::kEdp), eg.stride(ParallelDim::kEdp)))
      mirror_axes_.push_back({eg.size(ParallelDim::kEdp), eg.stride(ParallelDim::kEdp)});
    if (uniform_expert_load(s_.model.transformer_config.moe)) {
      // The cp swap moves a rank to another member of its EP group (the group folds over
      // tp x cp x dp), alike only when every expert gets the same tokens.
      const int cp_stride = grid_.stride(ParallelDim::kCp);
      if (ps_.cp > 1 && maps_every_group(ps_.cp, cp_stride))
        mirror_axes_.push_back({ps_.cp, cp_stride});
      // The ep shift, in steps of tp x cp so that it leaves the tensor- and context-parallel
      // coordinates (mirrored above) alone: its digits must not overlap the cp swap's.
      const int step = ps_.tp * ps_.cp;
      const int n = eg.size(ParallelDim::kEp) / step;
      const int stride = eg.stride(ParallelDim::kEp) * step;
      const bool disjoint = ps_.cp == 1 || stride >= cp_stride * ps_.cp;
      if (eg.size(ParallelDim::kEp) % step == 0 && n > 1 && disjoint && maps_every_group(n, stride))
        mirror_axes_.push_back({n, stride});
    }
  } else {
    for (ParallelDim d : {ParallelDim::kDp, ParallelDim::kCp, ParallelDim::kTp})
      if (grid_.size(d) > 1) mirror_axes_.push_back({grid_.size(d), grid_.stride(d)});
  }
  // Stragglers and degraded links make ranks differ: then every rank is simulated.
  // HSDP's shard groups are not mapped onto themselves by the data-parallel mirrors (a shift by
  // one rank straddles two groups), so HSDP runs every rank.
  symmetric_ = s_.simulation.symmetry && !mirror_axes_.empty() && s_.cluster.homogeneous() &&
               ps_.fsdp2.replicate <= 1;
  if (s_.simulation.symmetry && !mirror_axes_.empty() && !s_.cluster.homogeneous()) {
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
    // Under rank symmetry the rank at 0 on every mirrored dimension of each stage stands for the
    // others.
    r.emitted = !symmetric_ || std::all_of(mirror_axes_.begin(), mirror_axes_.end(),
                                           [&](const MirrorAxis& a) { return a.coord(rk) == 0; });
    emitted_gpu_[static_cast<std::size_t>(r.gpu)] = r.emitted ? 1 : 0;
    for (int c = 0; c < ps_.virtual_stages; ++c) {
      const Segment& sg =
          plan_.segs[static_cast<std::size_t>(pipeline_segment(ps_, c, r.c[ParallelDim::kPp]))];
      for (int i = sg.first; i < sg.end; ++i) {
        r.params += plan_.sharded[static_cast<std::size_t>(i)].params;
        if (ps_.ep > 1 &&
            s_.model.layers[static_cast<std::size_t>(i)].expert_role != ExpertRole::kNone)
          r.expert_params += plan_.sharded[static_cast<std::size_t>(i)].params;
      }
    }
    if (!r.emitted) continue;
    const int proc = b_.add_process(
        r.node,
        op_names::rank_process(rk, r.c[ParallelDim::kDp], r.c[ParallelDim::kTp],
                               r.c[ParallelDim::kPp], ps_.cp > 1 ? r.c[ParallelDim::kCp] : -1),
        true);
    r.thread = b_.add_thread(proc, r.gpu, "main");
    r.compute = b_.add_stream(r.gpu, StreamRole::kCompute, "compute");
    r.stream[ParallelDim::kDp] = b_.add_stream(r.gpu, StreamRole::kComm, "dp");
    r.stream[ParallelDim::kTp] = r.compute;  // Megatron issues TP collectives in line
    r.copy = b_.add_stream(r.gpu, StreamRole::kCopy, "copy");
    if (ps_.optimizer_offload > 0) {
      r.offload_d2h = b_.add_stream(r.gpu, StreamRole::kCopy, "offload d2h");
      r.offload_h2d = b_.add_stream(r.gpu, StreamRole::kCopy, "offload h2d");
    }
    each_piece_reversed([&](ParallelPiece& p) { p.add_streams(r); });
  }
  if (symmetric_) set_up_symmetry();
}

void Emitter::set_up_symmetry() {
  // A mirror shifts every rank's index along each mirrored dimension d by k_d (mod its size),
  // keeping its stage: the group Z_dp x Z_cp x Z_tp, counted with the last dimension fastest,
  // identity first. RankGrid::rank is linear in the coordinates (rank_grid.cpp), so the image of
  // rank r is r + sum over d of ((c_d + k_d) mod n_d - c_d) x stride_d, taken from per-shift
  // tables instead of a rank() call per rank and mirror.
  RankSymmetry& sym = b_.program().symmetry;
  const std::size_t world = static_cast<std::size_t>(b_.program().world_gpus);
  sym.weight_of_gpu.assign(world, 0);
  const std::size_t nd = mirror_axes_.size();
  int mirrors = 1;
  for (const MirrorAxis& a : mirror_axes_) mirrors *= a.size;
  // shift[c]: the rank offset of coordinate c along the current axis under its shift k.
  // Each rank's coordinates and GPU are read once, not once per mirror, and an image is built
  // axis by axis over flat arrays (to[j] = rank j's image rank), which the compiler keeps in
  // registers: 2 x 64 images of 1,024 GPUs per GPT-3 evaluation (docs/block-eval.md, "Speed").
  const std::size_t nr = ranks_.size();
  std::vector<int> coord(nd * nr), gpu_of(nr), rank_of(nr), to(nr), shift;
  for (std::size_t j = 0; j < nr; ++j) {
    gpu_of[j] = ranks_[j].gpu;
    rank_of[j] = ranks_[j].rank;
    for (std::size_t i = 0; i < nd; ++i) coord[i * nr + j] = mirror_axes_[i].coord(ranks_[j].rank);
  }
  sym.images.reserve(static_cast<std::size_t>(mirrors));
  for (int m = 0; m < mirrors; ++m) {
    std::copy(rank_of.begin(), rank_of.end(), to.begin());
    int rest = m;
    for (std::size_t i = nd; i-- > 0;) {
      const MirrorAxis& a = mirror_axes_[i];
      const int n = a.size;
      const int k = rest % n;
      rest /= n;
      shift.resize(static_cast<std::size_t>(n));
      for (int c = 0; c < n; ++c) shift[static_cast<std::size_t>(c)] = ((c + k) % n - c) * a.stride;
      const int* const ci = coord.data() + i * nr;
      for (std::size_t j = 0; j < nr; ++j) to[j] += shift[static_cast<std::size_t>(ci[j])];
    }
    std::vector<int>& img = sym.images.emplace_back(world, -1);
    for (std::size_t j = 0; j < nr; ++j)
      img[static_cast<std::size_t>(gpu_of[j])] = gpu_of[static_cast<std::size_t>(to[j])];
  }
  for (const RankState& r : ranks_) {
    if (r.emitted) sym.weight_of_gpu[static_cast<std::size_t>(r.gpu)] = mirrors;
  }
}

std::string Emitter::group_name(const char* label, const RankCoord& at,
                                std::initializer_list<ParallelDim> dims) const {
  std::string name = std::string(label) + " (";
  bool first = true;
  for (int i = 0; i < kNumParallelDims; ++i) {
    const auto d = static_cast<ParallelDim>(i);
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) continue;
    const bool always = d == ParallelDim::kTp || d == ParallelDim::kDp || d == ParallelDim::kPp;
    if (!always && grid_.size(d) <= 1) continue;
    name += (first ? "" : ", ") + std::string(to_string(d)) + " " + std::to_string(at[d]);
    first = false;
  }
  return name + ")";
}

int Emitter::add_group(const std::vector<int>& rks, const std::string& name) {
  std::vector<int> gpus;
  for (int x : rks) gpus.push_back(ranks_[static_cast<std::size_t>(x)].gpu);
  return b_.add_group(std::move(gpus), name);
}

// [SECTION] Collectives ---------------------------------------------------------------------------

int Emitter::instance_for(int rank, int group) {
  // Every member issues the same sequence of collectives on a group, so the k-th op of each
  // member on the group belongs to the k-th instance.
  const auto g = static_cast<std::size_t>(group);
  if (g >= issuing_members_.size()) {
    issuing_members_.resize(b_.program().groups.size(), -1);
    next_index_.resize(b_.program().groups.size());
  }
  int& members = issuing_members_[g];
  if (members < 0) {
    // Members that issue ops: all of them, or under rank symmetry the representatives only.
    members = 0;
    for (int gpu : b_.program().groups[g].gpus)
      members += emitted_gpu_[static_cast<std::size_t>(gpu)] ? 1 : 0;
  }
  std::vector<std::pair<int, int>>& next = next_index_[g];
  auto at = std::find_if(next.begin(), next.end(), [&](const auto& e) { return e.first == rank; });
  if (at == next.end()) at = next.insert(next.end(), {rank, 0});
  const int k = at->second++;
  // A group with one issuing member: every op is an instance of its own.
  if (members <= 1) return b_.new_instance();
  const std::int64_t key = (static_cast<std::int64_t>(group) << 32) | static_cast<std::uint32_t>(k);
  auto it = open_.find(key);
  if (it == open_.end()) {
    const int inst = b_.new_instance();
    open_[key] = {inst, members - 1};
    return inst;
  }
  const int inst = it->second.first;
  if (--it->second.second == 0) open_.erase(it);
  return inst;
}

OpId Emitter::coll(RankState& r, int stream, const NameRef& name, CollectiveKind k, int group,
                   Bytes bytes, std::vector<Dep> deps, StepPhase phase) {
  const int inst = instance_for(r.rank, group);
  const bool fwd = phase == StepPhase::kForward;
  return b_.collective(r.thread, stream, r.gpu, name, k, group, -1, inst, bytes, std::move(deps),
                       phase, fwd ? coll_python_ns_ : 0, coll_dispatch_ns_);
}

// [SECTION] Passes --------------------------------------------------------------------------------

LayerPass::LayerPass(SegmentPass& pass, int layer_index, int unit_index, StepPhase p)
    : sp(pass), unit(unit_index) {
  layer = layer_index;
  phase = p;
  prefix = pass.prefix;
  micro = pass.micro;
  const RankState& rk = pass.st.r;
  lane = Lane{rk.thread, rk.gpu, rk.compute};
}

Emitter::~Emitter() = default;

OpId Emitter::emit_layer(LayerPass& lp) {
  lp.batch = ps_.micro_batch_size;
  return loop_->emit(lp, hooks_);
}

OpId Emitter::repeat_kernel(LayerPass& lp, std::vector<Dep> deps) {
  std::vector<Op>& ops = b_.program().ops;
  const auto c = static_cast<OpId>(ops.size());
  Op& op = ops.emplace_back(ops[static_cast<std::size_t>(lp.kernel)]);
  op.id = c;
  op.deps = std::move(deps);
  lp.r().last_compute = c;
  return c;
}

void Emitter::walk(SegmentPass& sp, bool forward) {
  walk_range(sp, forward, sp.sg.first, sp.sg.end);
}

void Emitter::walk_range(SegmentPass& sp, bool forward, int lo, int hi) {
  // The segment's layers through the one layer loop, forward in order, backward in reverse; the
  // pass's first kernel waits for what the pass waits for.
  const int pass_first = forward ? sp.sg.first : sp.sg.end - 1;
  loop_->walk(lo, hi, forward, hooks_, [&](int i, bool /*first_of_range*/) {
    const int u = plan_.unit_of_layer[static_cast<std::size_t>(i)];
    const Unit& un = plan_.units[static_cast<std::size_t>(u)];
    const int unit_first = std::max(un.first, sp.sg.first),
              unit_last = std::min(un.end, sp.sg.end) - 1;
    LayerPass lp{sp, i, u, forward ? StepPhase::kForward : StepPhase::kBackward};
    lp.batch = ps_.micro_batch_size;
    lp.unit_begins = i == (forward ? unit_first : unit_last);
    lp.unit_ends = i == (forward ? unit_last : unit_first);
    if (i == pass_first) lp.deps = sp.first;
    return lp;
  });
}

void Emitter::open_pass(SegmentPass& sp) {
  if (sp.forward) {
    if (!sp.eval && sp.seg == 0 && sp.st.in.copy != kNoOp)
      sp.first.push_back({sp.st.in.copy, DepKind::kStreamWaits});
    each_piece([&](ParallelPiece& p) { p.begin_segment(sp); });
    return;
  }
  RankState& r = sp.st.r;
  each_piece([&](ParallelPiece& p) { p.begin_segment(sp); });
  if (!sp.st.grads_allocated) {
    sp.st.grads_allocated = true;
    // PyTorch's .grad appears at the first backward; Megatron's grad buffer exists from setup.
    const ModelStateBytes states = model_states(r);
    if (states.grads > 0 && !states.grads_at_setup)
      b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kGrads, states.grads, ".grad");
  }
}

void Emitter::close_pass(SegmentPass& sp) {
  each_piece_reversed([&](ParallelPiece& p) { p.end_segment(sp); });
}

namespace {
// Piece k of `total` split into `pieces` near-equal parts (the first total % pieces one larger).
std::int64_t piece(std::int64_t total, int pieces, int k) {
  return total / pieces + (k < total % pieces ? 1 : 0);
}
}  // namespace

void Emitter::emit_forward(SegmentPass& sp) {
  open_pass(sp);
  walk(sp, true);
  close_pass(sp);
}

void Emitter::emit_backward(SegmentPass& sp) {
  open_pass(sp);
  walk(sp, false);
  close_pass(sp);
}

// [SECTION] Step ----------------------------------------------------------------------------------

ModelStateBytes Emitter::model_states(const RankState& r) const {
  // What the rank's framework holds, and when (framework_states.hpp; docs/memory.md, "Model-state
  // bytes by framework").
  if (r.expert_params == 0) return rank_model_states(s_, plan_.sharding, r.params);
  return rank_model_states(s_, plan_.sharding, r.params - r.expert_params) +
         rank_model_states(s_, plan_.sharding, r.expert_params, ps_.size(ParallelDim::kEdp));
}

std::int64_t Emitter::optimizer_share(const RankState& r) const {
  if (!plan_.sharding.optimizer_sharded) return r.params;
  const auto share = [](std::int64_t n, int over) { return (n + over - 1) / over; };
  const int shard = plan_.sharding.shard_ranks;
  if (r.expert_params == 0) return share(r.params, shard);
  return share(r.params - r.expert_params, shard) +
         share(r.expert_params, ps_.size(ParallelDim::kEdp));
}

SegmentPass Emitter::pass_of(StepState& st, const PipeStep& step) {
  const int seg = pipeline_segment(ps_, step.chunk, st.r.c[ParallelDim::kPp]);
  SegmentPass sp{st, seg, plan_.segs[static_cast<std::size_t>(seg)], step.micro, step.forward};
  sp.last_micro = step.micro == static_cast<int>(ps_.micro_batches) - 1;
  sp.prefix = op_names::micro_prefix(static_cast<int>(ps_.micro_batches));
  return sp;
}

void Emitter::emit_step(RankState& r, int step) {
  b_.set_step(step);
  const int p = ps_.pp, v = ps_.virtual_stages, m = static_cast<int>(ps_.micro_batches);
  StepState st{r, step};
  if (r.feed)
    st.in = r.feed->next_batch(ps_.micro_batch_size * m, Lane{r.thread, r.gpu, r.compute});
  each_piece([&](ParallelPiece& pc) { pc.begin_step(st); });
  // The pipeline schedule (pipeline.cpp) orders the step's segment passes; under
  // strategy.moe_a2a_overlap the steady phase's pairs are merged (moe_a2a_overlap.cpp).
  if (ps_.moe_a2a_overlap != MoeA2aOverlap::kNone && ps_.ep > 1) {
    emit_overlapped_passes(st);
  } else {
    for (const PipeStep& ps : pipeline_schedule(ps_.schedule, p, v, m, r.c[ParallelDim::kPp])) {
      SegmentPass sp = pass_of(st, ps);
      if (ps.forward) {
        emit_forward(sp);
      } else {
        emit_backward(sp);
      }
    }
  }
  each_piece_reversed([&](ParallelPiece& pc) { pc.end_backward(st); });
  emit_optimizer(st);
  emit_step_end(st);
}

// strategy.optimizer_offload (optimizer_offload.hpp; docs/program.md, "Optimizer offload"):
// Megatron's HybridDeviceOptimizer.step() first enqueues every offloaded gradient's D2H on its
// _d2h_stream (after the current stream: the gradients are final), one per pipeline piece here.
std::vector<OpId> Emitter::emit_offload_d2h(RankState& r, const OffloadStep& off,
                                            const std::vector<Dep>& grads_ready) {
  std::vector<OpId> out;
  std::vector<Dep> deps = grads_ready;
  if (r.last_compute != kNoOp) deps.push_back({r.last_compute, DepKind::kStreamWaits});
  for (int k = 0; k < off.chunks; ++k) {
    out.push_back(b_.copy(r.thread, r.offload_d2h, r.gpu, "offload grads D2H", CopyKind::kD2H,
                          piece(off.d2h_bytes, off.chunks, k), -1,
                          k == 0 ? deps : std::vector<Dep>{}, StepPhase::kOptimizer, 0,
                          b_.dispatch_ns(1)));
  }
  return out;
}

// Then, after the GPU part is launched, per piece: the host waits for its D2H
// (event.synchronize()), runs the CPU Adam step, and enqueues the H2D of the updated parameters
// on the _h2d_stream. The current stream waits for the H2D stream (param_copy_back_gpu_hook's
// record_event().wait): the last H2D also waits for the GPU part, so its end is the step's.
OpId Emitter::emit_offload_host_steps(RankState& r, const OffloadStep& off,
                                      const std::vector<OpId>& d2h, OpId gpu_part) {
  OpId last = kNoOp;
  const TimeNs adam_ns = static_cast<TimeNs>(std::llround(off.host_adam_s * 1e9));
  for (int k = 0; k < off.chunks; ++k) {
    b_.host_work(r.thread, r.gpu, "cpu adam step", 0, piece(adam_ns, off.chunks, k),
                 {{d2h[static_cast<std::size_t>(k)], DepKind::kHostWaits}}, StepPhase::kOptimizer);
    std::vector<Dep> deps;
    if (k == off.chunks - 1 && gpu_part != kNoOp) deps.push_back({gpu_part, DepKind::kStreamWaits});
    last = b_.copy(r.thread, r.offload_h2d, r.gpu, "offload params H2D", CopyKind::kH2DPinned,
                   piece(off.h2d_bytes, off.chunks, k), -1, std::move(deps), StepPhase::kOptimizer,
                   0, b_.dispatch_ns(1));
  }
  return last;
}

void Emitter::emit_optimizer(StepState& st) {
  // Optimizer on this rank's parameters (its shard with ZeRO >= 1), then the pieces' work after it
  // (ZeRO-1/2's all-gather of the updated parameters); zero_grad frees the gradients; the step
  // ends when the host has waited for all of it.
  RankState& r = st.r;
  const Lane lane{r.thread, r.gpu, r.compute};
  const ModelStateBytes states = model_states(r);
  // What the optimizer did not build at construction (Adam's moments) appears at the first step().
  const Bytes lazy_state = states.optimizer - states.optimizer_at_setup;
  if (st.step == 1 && lazy_state > 0)
    b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kOptimizer, lazy_state, "optimizer state");
  // Megatron fp16: step()'s fp32 copy of the gradients (prepare_grads), dropped by the next
  // optimizer.zero_grad() at the start of the next train_step; nothing is allocated between this
  // step's end and that call, so it is released here (framework_states.hpp).
  if (states.step_main_grads > 0)
    b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kOptimizer, states.step_main_grads,
             "fp32 main grads");
  const std::int64_t share = optimizer_share(r);
  // strategy.optimizer_offload: the host updates n_off of the share (optimizer_offload.hpp).
  const OffloadStep off = offload_step(s_, share);
  const std::int64_t n = share - off.params;
  st.optimizer_waits = b_.fp8().before_optimizer(b_, lane, std::move(st.optimizer_waits));
  std::vector<OpId> d2h;
  if (off.params > 0) d2h = emit_offload_d2h(r, off, st.optimizer_waits);
  // docs/memory.md, "Optimizer step temporaries".
  const OptimizerTemporary tmp = optimizer_step_temporary(s_, n);
  if (tmp.bytes > 0)
    b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kOptimizer, tmp.bytes, tmp.name);
  OpId end = kNoOp;
  if (n > 0 || off.params == 0) {  // F = 1: Megatron builds no GPU optimizer
    // docs/program.md, "Optimizer and clipping kernels": foreach's 5 launches, or a for-loop's
    // kernels per tensor of the rank's share (torch.optim before 2.0; one op here).
    const OptimizerLaunch cost = optimizer_launch(
        s_.training, pb_, n, parameter_tensors_of_share(s_.model, n), runs_torch_optim(s_));
    end = b_.compute(lane, op_names::optimizer_step(s_.training.optimizer),
                     ComputeKind::kElementwise, cost.flops, cost.traffic, cost.kernels, true,
                     st.optimizer_waits, StepPhase::kOptimizer);
    r.last_compute = end;
  }
  if (tmp.bytes > 0)
    b_.release(r.thread, r.compute, r.gpu, MemCategory::kOptimizer, tmp.bytes, tmp.name);
  if (off.params > 0) end = emit_offload_host_steps(r, off, d2h, end);
  each_piece_reversed([&](ParallelPiece& p) { p.end_optimizer(st, end); });
  if (states.step_main_grads > 0)
    b_.release(r.thread, r.compute, r.gpu, MemCategory::kOptimizer, states.step_main_grads,
               "fp32 main grads");
  if (states.grads > 0 && !states.grads_at_setup)
    b_.release(r.thread, r.compute, r.gpu, MemCategory::kGrads, states.grads, ".grad (zero_grad)");
  if (st.in.bytes > 0)
    b_.release(r.thread, r.compute, r.gpu, MemCategory::kActivations, st.in.bytes, "input batch");
  std::vector<Dep> wait{{end, DepKind::kHostWaits}};
  each_piece([&](ParallelPiece& p) { p.add_step_end_waits(st, wait); });
  b_.marker(r.thread, r.gpu, "step end", std::move(wait), StepPhase::kSync);
  each_piece_reversed([&](ParallelPiece& p) { p.after_step_end(st); });
}

void Emitter::build(const std::string& label) {
  Program& prog = b_.program();
  prog.strategy_label = label;
  prog.active_gpus = s_.strategy.device_ids;
  prog.samples_per_step = s_.training.global_batch;
  make_plan();
  lay_out_ranks();
  each_piece_reversed([&](ParallelPiece& p) { p.add_groups(); });

  // Setup (step 0): parameters (sharded with ZeRO-3 / FSDP) on every rank; data feeds on the
  // first stage.
  b_.set_step(0);
  for (RankState& r : ranks_) {
    if (!r.emitted) continue;
    const ModelStateBytes st = model_states(r);
    if (st.params > 0)
      b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kParams, st.params, "model parameters");
    // Built with the model and the optimizer (framework_states.hpp): Megatron's grad buffer, the
    // fp32 main parameters of Megatron and DeepSpeed.
    if (st.grads_at_setup && st.grads > 0)
      b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kGrads, st.grads, "grad buffer");
    if (st.optimizer_at_setup > 0)
      b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kOptimizer, st.optimizer_at_setup,
               "fp32 main params");
    if (r.c[ParallelDim::kPp] == pipeline_stage_of_segment(ps_, 0)) {
      r.feed = std::make_unique<DataFeed>(b_, r.node, r.thread, r.gpu, r.copy,
                                          " (rank " + std::to_string(r.rank) + ")");
    }
  }
  // The op list is reserved from the first rank's step (stages differ little: embedding and
  // logits), so millions of ops are not moved again and again as the vector doubles. (Reserving
  // from a guess before that step was measured 35 % slower in a sweep evaluation: a block above
  // glibc's mmap threshold is mapped afresh, page faults included, on every evaluation, where the
  // doubling vector's blocks come back from the heap.)
  std::vector<Op>& ops = b_.program().ops;
  const auto emitted = static_cast<std::size_t>(
      std::count_if(ranks_.begin(), ranks_.end(), [](const RankState& r) { return r.emitted; }));
  b_.count_rank_steps(static_cast<std::int64_t>(emitted));  // emit_step's set_step counts them
  bool reserved = false;
  for (int step = 1; step <= s_.training.steps; ++step) {
    for (RankState& r : ranks_) {
      if (!r.emitted) continue;
      const std::size_t before = ops.size();
      emit_step(r, step);
      if (reserved) continue;
      reserved = true;
      const std::size_t per_rank_step = ops.size() - before;
      check_program_memory(s_,
                           static_cast<double>(before) + static_cast<double>(per_rank_step) *
                                                             static_cast<double>(emitted) *
                                                             s_.training.steps,
                           static_cast<int>(emitted));
      ops.reserve(before +
                  per_rank_step * emitted * static_cast<std::size_t>(s_.training.steps) * 11 / 10);
    }
  }
}

}  // namespace csim::core::hybrid
