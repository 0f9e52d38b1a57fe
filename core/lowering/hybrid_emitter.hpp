// The composable lowering of the parallel strategies (pipeline, tensor_parallel, 3d, zero, fsdp;
// docs/program.md, "Pipeline, tensor, 3D, ZeRO/FSDP" and "Adding a parallel dimension").
// Internal to core/lowering.
//
// The Emitter (hybrid_emitter.cpp) lays out the ranks (one process, thread and set of streams per
// GPU), walks each rank's step — the pipeline schedule's segment passes, the layers of each pass
// (through the one layer loop, layer_loop.hpp, with the pieces as its per-layer pass), the
// optimizer — and at every point calls the ParallelPieces it is composed of, one per parallel
// dimension, each in its own file:
//   PipelinePiece       pipeline.cpp            receives, sends, activations, the loss
//   DataParallelPiece   dp_grad_reduction.cpp   DP groups, gradient all-reduce (ZeRO-1:
//                                               reduce-scatter)
//   ShardingPiece       zero_fsdp.cpp           ZeRO-2/3, FSDP gathers and reduce-scatters (on
//                                               the data-parallel piece's groups)
//   Fsdp2Piece          fsdp2.cpp               in its place for FSDP2 / Megatron-FSDP: per
//                                               block and root unit, HSDP's replica groups
//   Zero3Piece          zero3_fetch.cpp         in its place for DeepSpeed's ZeRO-3: per-module
//                                               fetches and gradient buckets (inside recompute)
//   RecomputePiece      recompute.cpp           forward re-runs before the backward (and
//                                               recompute_modules.cpp: Megatron's modules)
//   TensorParallelPiece tensor_parallel.cpp     the collectives around each layer
//   ContextParallelPiece context_parallel.cpp   the K/V exchange around each attention core
//                                               (cp > 1 only), its CP groups and stream
//   ExpertParallelPiece expert_parallel.cpp     the token dispatch and combine around each MoE
//                                               block's experts (ep > 1 only), EP/EDP groups
//   ActivationOffloadPiece activation_offload.cpp  the saved activations' D2H after a block's
//                                               forward and H2D before its backward
//                                               (strategy.activation_offload only)
// The pieces nest around the layer kernel like wrappers, outermost first: begin_* hooks run in
// piece order, end_* hooks (and the structure hooks) in reverse. hybrid_3d.cpp composes them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/lowering/layer_loop.hpp"
#include "core/lowering/op_names.hpp"
#include "core/lowering/optimizer_offload.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/lowering/program_builder.hpp"

namespace csim::core::hybrid {

struct RankState {
  int rank = 0, gpu = 0, node = 0;
  bool emitted = true;  // false: a mirror image of a representative (rank symmetry)
  RankCoord c;
  int thread = 0;
  int compute = 0, copy = 0, send_next = 0, recv_prev = 0, send_prev = 0, recv_next = 0;
  // DualPipeV's returning arm (chunk 1: forward to the previous stage, backward to the next), one
  // stream per direction as for chunk 0 (pipeline.cpp); -1 under the other schedules.
  int v_send_prev = -1, v_recv_next = -1, v_send_next = -1, v_recv_prev = -1;
  // strategy.optimizer_offload: Megatron's _d2h_stream and _h2d_stream (optimizer_offload.hpp)
  int offload_d2h = -1, offload_h2d = -1;
  // strategy.activation_offload: TE's offload handler's d2h_stream and h2d_stream
  // (activation_offload.hpp)
  int act_offload_d2h = -1, act_offload_h2d = -1;
  // Per dimension: the stream its collectives are issued on (-1: none; dp's "dp" stream carries
  // the gradient reduction and the ZeRO/FSDP gathers, cp's the context-parallel exchange; TP's
  // run in line on `compute`) and the rank's group along it (-1: none). The data-parallel
  // piece's group spans dp x cp (Megatron's data_parallel_group with context parallelism).
  DimTable<int> stream{-1};
  DimTable<int> group{-1};
  OpId last_compute = kNoOp;       // last op issued on the compute stream
  std::int64_t params = 0;         // parameters of its segments after the TP split
  std::int64_t expert_params = 0;  // of params: routed experts' (split over ep; reduced over edp)
  std::unique_ptr<DataFeed> feed;  // first stage only
};

// A unit: the layers whose gradients are reduced (and, with sharded parameters, gathered)
// together: a transformer block, the embedding, the head; other models one layer with
// parameters plus the parameter-free layers after it. A unit never crosses a segment boundary.
struct Unit {
  int first = 0, end = 0;
  std::int64_t params = 0;         // after the TP split
  std::int64_t expert_params = 0;  // of params: routed experts' under ep > 1 (over edp)
};

// What the pieces share, computed once from the scenario (Emitter::build).
struct Plan {
  int segments = 1;                       // pp * virtual_stages
  std::vector<Segment> segs;              // partition_layers (pipeline.cpp)
  std::vector<ShardedLayer> sharded;      // per layer, shard_layer (tensor_parallel.cpp)
  std::vector<double> stored_per_sample;  // per segment (recompute.cpp)
  std::vector<Unit> units;                // in layer order
  std::vector<int> unit_of_layer;         // per layer
  ShardingPlan sharding;                  // sharding_plan (zero_fsdp.cpp)
  // strategy.activation_offload (pp 1): of segment 0's saved activations per micro-batch, the
  // transformer blocks' (per block llround(b x a_i), activation_offload.cpp), which the
  // ActivationOffloadPiece allocates and frees block by block (and copies, for the offloaded
  // ones); 0 without.
  Bytes act_blocks_per_micro = 0;
};

// One rank's step while it is emitted.
struct StepState {
  RankState& r;
  int step = 0;
  FedBatch in;                       // the step's batch (first stage)
  bool grads_allocated = false;      // .grad exists (from the step's first backward)
  std::vector<Dep> optimizer_waits;  // gradient collectives the optimizer waits for
};

// One micro-batch's pass through one segment: a forward, a backward, or an evaluation forward
// (training.leaks.keep_outputs, hybrid_leaks.cpp).
struct SegmentPass {
  StepState& st;
  int seg = 0;  // pipeline_segment(chunk, stage)
  Segment sg;
  int micro = 0;
  bool forward = true;
  bool eval = false;
  bool last_micro = false;
  // Merged layer by layer with another micro-batch's pass (strategy.moe_a2a_overlap 1f1b,
  // moe_a2a_overlap.cpp): its all-to-alls go on the EP comm stream.
  bool paired = false;
  // op_names::micro_prefix's pattern, "eval (grad on): " first for eval; its field is `micro`
  // (NameRef::cat({sp.prefix, ...}, sp.micro)).
  std::string prefix;
  std::vector<Dep> first;  // what the pass's first kernel waits for
};

// One layer kernel of a pass, as the layer loop visits it (layer_loop.hpp: the layer, its phase,
// batch, name prefix, lane, the deps its kernel will wait for, which a hook may extend, and the
// kernel once emitted), with the pass and unit it is in. Unit hooks run where the pass enters and
// leaves a unit (in pass order: the unit's first layer forward, its last backward).
struct LayerPass : LayerVisit {
  LayerPass(SegmentPass& pass, int layer_index, int unit_index, StepPhase p);
  SegmentPass& sp;
  int unit = 0;
  bool unit_begins = false, unit_ends = false;
  RankState& r() const { return sp.st.r; }
};

// One parallel dimension's part of the lowering. Every hook defaults to nothing.
class ParallelPiece {
 public:
  virtual ~ParallelPiece() = default;
  // Structure (reverse piece order, innermost dimension first, as ranks vary fastest).
  virtual void add_streams(RankState& /*r*/) {}  // after compute, dp, copy
  virtual void add_groups() {}
  // A step of one rank.
  virtual void begin_step(StepState& /*st*/) {}
  virtual void begin_segment(SegmentPass& /*sp*/) {}
  virtual void begin_unit(LayerPass& /*lp*/) {}
  virtual void begin_layer(LayerPass& /*lp*/) {}
  virtual void end_layer(LayerPass& /*lp*/) {}
  // False only for a piece whose begin_layer and end_layer are the no-ops above: the layer loop
  // then skips it around every kernel (docs/block-eval.md, "Speed": a virtual call per piece and
  // kernel). True by default, so a piece that adds layer hooks is called without saying so.
  virtual bool layer_hooks() const { return true; }
  virtual void end_unit(LayerPass& /*lp*/) {}
  virtual void end_segment(SegmentPass& /*sp*/) {}
  // A paired pass pauses before layer `next_layer` (in its walk order) while the other pass runs
  // (moe_a2a_overlap.cpp): what the next layer needs can be issued now.
  virtual void pause_pass(SegmentPass& /*sp*/, int /*next_layer*/) {}
  virtual void end_backward(StepState& /*st*/) {}                   // the schedule is done
  virtual void end_optimizer(StepState& /*st*/, OpId& /*last*/) {}  // last: the step's last op
  virtual void add_step_end_waits(StepState& /*st*/, std::vector<Dep>& /*waits*/) {}
  virtual void after_step_end(StepState& /*st*/) {}
};

class Emitter {
 public:
  Emitter(const Scenario& s, ProgramBuilder& b);
  ~Emitter();
  // The pieces, outermost first (hybrid_3d.cpp).
  void add_piece(std::unique_ptr<ParallelPiece> piece) {
    if (piece->layer_hooks()) layer_pieces_.push_back(piece.get());
    pieces_.push_back(std::move(piece));
  }
  void build(const std::string& label);

  // [SECTION] Services for the pieces
  const Scenario& scenario() const { return s_; }
  const ParallelSpec& spec() const { return ps_; }
  ProgramBuilder& builder() { return b_; }
  const PrecisionBytes& precision() const { return pb_; }
  const Plan& plan() const { return plan_; }
  const RankGrid& grid() const { return grid_; }
  std::vector<RankState>& ranks() { return ranks_; }
  int rank_of_segment(const RankState& r, int seg) const {
    RankCoord c = r.c;
    c[ParallelDim::kPp] = pipeline_stage_of_segment(ps_, seg);
    return grid_.rank(c);
  }
  // A collective of `group` on `stream`; instances are matched by order (the k-th op of every
  // member on a group is the k-th instance). Forward collectives cost one framework op of Python.
  OpId coll(RankState& r, int stream, const NameRef& name, CollectiveKind k, int group, Bytes bytes,
            std::vector<Dep> deps, StepPhase phase);
  // Group `rks` (ranks) as GPUs.
  int add_group(const std::vector<int>& rks, const std::string& name);
  // "<label> (tp 0, pp 1)": the coordinates of the group's other dimensions (tp, dp and pp always,
  // the others where the grid has them; docs/program.md, "Names").
  std::string group_name(const char* label, const RankCoord& at,
                         std::initializer_list<ParallelDim> dims) const;
  // One layer's kernel with the pieces' layer hooks around it (recompute re-runs call it too).
  OpId emit_layer(LayerPass& lp);
  // The layer kernel `lp.kernel` issued once more with `deps` (ring attention runs the core as
  // one kernel per K/V block; context_parallel.cpp); it becomes the rank's last compute op.
  OpId repeat_kernel(LayerPass& lp, std::vector<Dep> deps);
  // A forward pass through a segment with every piece's hooks (training or evaluation).
  void emit_forward(SegmentPass& sp);
  Bytes per_micro_batch(double per_sample) const;  // llround(per_sample * micro_batch_size)
  // The rank's model-state bytes (parameters, gradients, optimizer state) under its sharding:
  // the dense parameters' over dp x cp, the routed experts' (ep > 1) over edp.
  ModelStateBytes model_states(const RankState& r) const;
  // The parameters the rank's optimizer updates: all of them, or with a sharded optimizer its
  // shard of the dense ones (over dp x cp) and of the experts (over edp).
  std::int64_t optimizer_share(const RankState& r) const;

 private:
  const Scenario& s_;
  const ParallelSpec& ps_;
  ProgramBuilder& b_;
  RankGrid grid_;
  PrecisionBytes pb_;
  Plan plan_;
  std::vector<std::unique_ptr<ParallelPiece>> pieces_;
  std::vector<ParallelPiece*> layer_pieces_;  // those of pieces_ with layer_hooks(), in order
  std::vector<RankState> ranks_;
  // instance_for's state, by group id: the members that issue ops (-1 until counted; groups do
  // not change once added) and, per issuing rank, its next index on the group ((rank, index)
  // pairs: a group has few issuing ranks, one per group under rank symmetry).
  std::vector<int> issuing_members_;
  std::vector<std::vector<std::pair<int, int>>> next_index_;
  TimeNs coll_python_ns_ = 0, coll_dispatch_ns_ = 0;  // one framework op (coll)
  std::unordered_map<std::int64_t, std::pair<int, int>>
      open_;                // (group, index) -> instance, ops left
  bool symmetric_ = false;  // rank symmetry (docs/program.md)
  // The axes along which ranks mirror each other under rank symmetry, outermost first: the dense
  // grid's dp, cp, tp, or under expert parallelism the expert grid's edp. A rank's coordinate on
  // an axis is rank / stride mod size (both grids are mixed-radix over the same ranks).
  struct MirrorAxis {
    int size = 1, stride = 1;
    int coord(int rank) const { return rank / stride % size; }
  };
  std::vector<MirrorAxis> mirror_axes_;
  std::vector<char> emitted_gpu_;  // per world GPU
  // The one layer loop over this rank's share of each layer (layer_loop.hpp), and the pieces as
  // its per-layer pass: unit hooks on entering and leaving a layer, layer hooks around its kernel.
  std::unique_ptr<LayerLoop> loop_;
  class PieceHooks;
  std::unique_ptr<PieceHooks> piece_hooks_;
  LayerHook* hooks_[1] = {nullptr};
  void walk(SegmentPass& sp, bool forward);
  // Layers [lo, hi) of the pass (a part of its segment), in its walk order.
  void walk_range(SegmentPass& sp, bool forward, int lo, int hi);
  SegmentPass pass_of(StepState& st, const PipeStep& step);
  void open_pass(SegmentPass& sp);   // begin_segment hooks (and .grad at the first backward)
  void close_pass(SegmentPass& sp);  // end_segment hooks
  // moe_a2a_overlap.cpp: the step under strategy.moe_a2a_overlap 1f1b, and one merged pair.
  void emit_overlapped_passes(StepState& st);
  void emit_pair(SegmentPass& fwd, SegmentPass& bwd);

  void make_plan();
  void lay_out_ranks();
  void set_up_symmetry();
  int instance_for(int rank, int group);
  void emit_backward(SegmentPass& sp);
  void emit_step(RankState& r, int step);
  void emit_optimizer(StepState& st);
  // strategy.optimizer_offload's D2H pieces, then its host Adam and H2D pieces (returns the last
  // H2D, which also waits for `gpu_part`).
  std::vector<OpId> emit_offload_d2h(RankState& r, const OffloadStep& off,
                                     const std::vector<Dep>& grads_ready);
  OpId emit_offload_host_steps(RankState& r, const OffloadStep& off, const std::vector<OpId>& d2h,
                               OpId gpu_part);
  // hybrid_leaks.cpp: what the training script does after the step ends (docs/memory.md,
  // "Scenario switches", "Under pipeline, tensor, 3D, ZeRO and FSDP").
  void emit_step_end(StepState& st);
  void eval_forward(StepState& st);  // keep_outputs: a forward without no_grad, kept

  template <typename F>
  void each_piece(F f) {
    for (auto& p : pieces_) f(*p);
  }
  template <typename F>
  void each_piece_reversed(F f) {
    for (auto it = pieces_.rbegin(); it != pieces_.rend(); ++it) f(**it);
  }
};

// The pieces (each in its dimension's file).
std::unique_ptr<ParallelPiece> make_pipeline_piece(Emitter& e);          // pipeline.cpp
std::unique_ptr<ParallelPiece> make_data_parallel_piece(Emitter& e);     // dp_grad_reduction.cpp
std::unique_ptr<ParallelPiece> make_sharding_piece(Emitter& e);          // zero_fsdp.cpp
std::unique_ptr<ParallelPiece> make_fsdp2_piece(Emitter& e);             // fsdp2.cpp
std::unique_ptr<ParallelPiece> make_zero3_piece(Emitter& e);             // zero3_fetch.cpp
std::unique_ptr<ParallelPiece> make_recompute_piece(Emitter& e);         // recompute.cpp
std::unique_ptr<ParallelPiece> make_tensor_parallel_piece(Emitter& e);   // tensor_parallel.cpp
std::unique_ptr<ParallelPiece> make_context_parallel_piece(Emitter& e);  // context_parallel.cpp
std::unique_ptr<ParallelPiece> make_expert_parallel_piece(Emitter& e);   // expert_parallel.cpp

// strategy.activation_offload's copies, frees and reallocations (activation_offload.cpp).
std::unique_ptr<ParallelPiece> make_activation_offload_piece(Emitter& e);

// Megatron-Core's recompute modules' re-runs (recompute_modules.cpp), beside the RecomputePiece.
std::unique_ptr<ParallelPiece> make_recompute_modules_piece(Emitter& e);

}  // namespace csim::core::hybrid
