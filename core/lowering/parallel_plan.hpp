// Parallel plan: the pure pieces the pipeline, tensor-parallel, 3D, ZeRO/FSDP and recompute
// lowerings are made of (docs/program.md, "Pipeline parallel" .. "Activation recompute"). Each is
// a function of the scenario alone, so tests check it without running the simulator.
//
// Index: [SECTION] Rank grid (hybrid_3d.cpp), [SECTION] Pipeline (pipeline.cpp),
//        [SECTION] Tensor parallel (tensor_parallel.cpp), [SECTION] Recompute (recompute.cpp),
//        [SECTION] ZeRO / FSDP (zero_fsdp.cpp), [SECTION] Memory switches (hybrid_leaks.cpp,
//        model_parallel.cpp), [SECTION] Emitter (hybrid_3d.cpp; the pieces that emit the ops
//        are declared in hybrid_emitter.hpp)
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/model/recompute_modules.hpp"
#include "core/program/program.hpp"
#include "core/progress.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core {

// [SECTION] Rank grid (rank_grid.cpp) ------------------------------------------------------------

// One value per parallel dimension, indexed by ParallelDim: a rank's coordinates, its streams and
// groups (hybrid_emitter.hpp, RankState).
template <typename T>
struct DimTable {
  std::array<T, kNumParallelDims> v{};
  DimTable() = default;
  explicit DimTable(T fill) { v.fill(fill); }
  T& operator[](ParallelDim d) { return v[static_cast<std::size_t>(d)]; }
  const T& operator[](ParallelDim d) const { return v[static_cast<std::size_t>(d)]; }
};
using RankCoord = DimTable<int>;  // 0 on every dimension the grid does not have

// rank = sum over dims of coord[dim] * stride[dim], strides growing in rank_order (fastest first;
// Megatron's RankGenerator): with the default tp-cp-ep-dp-pp, rank = tp + t (cp + c (dp + d pp)),
// so a TP group is t consecutive ranks (one node when t <= gpus_per_node), a CP group's ranks are
// t apart and a pipeline's stages t c d apart. A dimension of size 1 changes no rank.
class RankGrid {
 public:
  // The dense layers' grid: tp, cp, dp, pp in ps.rank_order (ep folds into them: size 1 here).
  explicit RankGrid(const ParallelSpec& ps);
  // The expert layers' grid (MoE Parallel Folding, Liu et al. 2025, Megatron-Core's expert
  // RankGenerator): etp, ep, edp, pp over the same ranks, in ps.rank_order with tp read as etp,
  // dp as edp and cp dropped.
  static RankGrid expert(const ParallelSpec& ps);
  int size() const { return world_; }
  int size(ParallelDim d) const { return size_[d]; }
  int stride(ParallelDim d) const { return stride_[d]; }
  int rank(const RankCoord& c) const;
  RankCoord coord(int rank) const;
  // The ranks that share `rank`'s coordinates on every dimension but `dims`, in ascending rank
  // order (the listed dimensions vary fastest in rank_order's order): its TP group for {kTp}, the
  // gradient reduction group of a CP run for {kDp, kCp} (Megatron's data_parallel_group with
  // context parallelism).
  std::vector<int> group(int rank, std::initializer_list<ParallelDim> dims) const;
  // Every group along `dims`, the other dimensions' coordinates counted with the last dimension
  // (in ParallelDim order) fastest: f(ranks of the group, coordinates of its first rank).
  void for_each_group(
      std::initializer_list<ParallelDim> dims,
      const std::function<void(const std::vector<int>&, const RankCoord&)>& f) const;

 private:
  RankGrid() = default;
  void set_strides(const std::vector<ParallelDim>& order);
  int world_ = 1;
  DimTable<int> size_{1};
  DimTable<int> stride_{0};
};

// [SECTION] Pipeline -----------------------------------------------------------------------------

struct PipeStep {
  bool forward = true;
  int chunk = 0;  // model chunk on this stage (0 unless interleaved)
  int micro = 0;  // micro-batch
};

// The order in which stage `stage` of `stages` runs forward and backward passes of `micro`
// micro-batches over `chunks` model chunks (docs/program.md, "Pipeline schedules"):
//   GPipe: all forwards, then all backwards;
//   1F1B (PipeDream-flush): min(p - stage - 1, m) warm-up forwards, then one forward one
//        backward, then the remaining backwards;
//   interleaved 1F1B (Megatron): warm-up (p - stage - 1) * 2 + (v - 1) * p forward chunks (all
//        m*v when m == p), the k-th forward chunk is chunk (k mod pv) / p of micro-batch
//        (k / pv) * p + k mod p; backwards run chunks in reverse.
//   DualPipeV: dualpipev_schedule's steps in order, a pair's forward before its backward.
std::vector<PipeStep> pipeline_schedule(PipelineSchedule schedule, int stages, int chunks,
                                        int micro, int stage);

// One compute call of DeepSeek's DualPipeV step() (dualpipe/dualpipev.py): a chunk pass alone
// (_forward_chunk, _backward_chunk) or a forward and a backward of different micro-batches run
// as one overlapped call (_forward_backward_chunk, `paired`). pipeline_dualpipev.cpp; docs/
// program.md, "DualPipeV".
struct DualPipeStep {
  PipeStep a;  // the pass alone, or the pair's forward
  PipeStep b;  // the pair's backward (paired only)
  bool paired = false;
};
// Rank `stage` of `stages` (p) over `micro` (m >= 2p) micro-batches, chunk 0 the descending arm
// of the V (segment = stage), chunk 1 the returning arm (segment = 2p - 1 - stage).
std::vector<DualPipeStep> dualpipev_schedule(int stages, int micro, int stage);

// Where model segment g (in model order, 0 .. pp * v - 1) runs: its pipeline stage and its chunk
// there. Chunk-major (stage g mod pp, chunk g / pp) for GPipe, 1F1B and interleaved; the V of
// DualPipeV (v = 2) otherwise: stage g for g < pp, 2 pp - 1 - g after, so that stage 0 holds the
// first and the last segment (embedding, LM head and loss) and stage pp - 1 the two middle ones.
int pipeline_stage_of_segment(const ParallelSpec& ps, int seg);
int pipeline_chunk_of_segment(const ParallelSpec& ps, int seg);
// The inverse: the segment that is chunk `chunk` of stage `stage`.
int pipeline_segment(const ParallelSpec& ps, int chunk, int stage);

// Model segment g (pipeline_segment(chunk, stage)) holds layers [first, end). GPT: the blocks split
// evenly, or segment_blocks[g] blocks each when given (ParallelSpec::segment_blocks, uneven stages:
// core/model/pipeline_stages.hpp), the embedding joins segment 0 and ln_f + lm_head the last one;
// other models: contiguous layers balanced by forward FLOPs (each segment non-empty).
struct Segment {
  int first = 0;
  int end = 0;
};
std::vector<Segment> partition_layers(const ModelSpec& m, int segments,
                                      const std::vector<int>& segment_blocks = {});
// Parameters (before the tensor-parallel split) of the pipeline stage holding the most: over
// stages, the sum of its v segments' layers' parameters (uneven stages make it more than
// total / pp; memory bounds use it).
std::int64_t max_stage_params(const ModelSpec& m, const ParallelSpec& ps);

// [SECTION] Tensor parallel ----------------------------------------------------------------------

enum class TpComm : std::uint8_t { kNone, kAllReduce, kReduceScatter, kAllGather };

// One layer as run by one tensor-parallel rank (docs/program.md, "Tensor parallel").
struct ShardedLayer {
  double flops_per_sample = 0;                // forward FLOPs on this rank
  double traffic_per_sample = 0;              // forward memory traffic, excluding weights
  double bwd_flops_per_sample = -1;           // backward FLOPs on this rank; < 0: 2x fwd
  double bwd_traffic_per_sample = -1;         // backward traffic, excluding weights; < 0: 2x fwd
  std::int64_t params = 0;                    // parameters held by this rank
  std::int64_t second_tensor_params = 0;      // of params: a second tensor's (LayerSpec's)
  double act_bytes_per_sample = 0;            // saved for backward (no recompute)
  double selective_act_bytes_per_sample = 0;  // saved under selective recompute
  double output_bytes_per_sample = 0;         // this rank's share of the output
  TpComm fwd_before = TpComm::kNone;          // collective before the forward kernel
  TpComm fwd_after = TpComm::kNone;           // after the forward kernel
  TpComm bwd_before = TpComm::kNone;          // before the backward kernel
  TpComm bwd_after = TpComm::kNone;           // after the backward kernel
  double comm_bytes_per_sample = 0;  // s * h * e: the full (unsharded) activation each moves
  // The layer on 1/n of the tokens (context parallelism; experts under tensor parallelism with
  // sequence parallelism): the work, the traffic, the saved activations and the output divided by
  // n, the weights not.
  void split_tokens(double n) {
    flops_per_sample /= n;
    traffic_per_sample /= n;
    if (bwd_flops_per_sample > 0) bwd_flops_per_sample /= n;
    if (bwd_traffic_per_sample > 0) bwd_traffic_per_sample /= n;
    act_bytes_per_sample /= n;
    selective_act_bytes_per_sample /= n;
    output_bytes_per_sample /= n;
  }
};
ShardedLayer shard_layer(const ModelSpec& m, int index, int tp, bool sequence_parallel);

// [SECTION] Context parallel (context_parallel.cpp) ----------------------------------------------

// One layer on a rank of a CP group (docs/program.md, "Context parallel"): every per-sample
// quantity on s / cp tokens (a fused attention core: 1/cp of its work, the balanced split); under
// ring attention (p2p, a2a+p2p) the core's kernel is one of cp_ring_steps, each 1/steps of it.
void shard_context(ShardedLayer& sl, const LayerSpec& l, const ParallelSpec& ps);
// The ring's steps: cp (p2p), cp / cp_a2a (a2a+p2p), 1 (all_gather, a2a: no ring).
int cp_ring_steps(const ParallelSpec& ps);
// Per sample on one rank: |KV| = 2 (s / cp) (g / tp) d e, |Q| = |O| = (s / cp) (a / tp) d e.
struct CpBlockBytes {
  double kv = 0;
  double q = 0;
};
CpBlockBytes cp_block_bytes(const ModelSpec& m, const LayerSpec& core, const ParallelSpec& ps);

// [SECTION] Expert parallel (expert_parallel.cpp) ------------------------------------------------

// A routed-expert layer on one rank of its EP group (docs/program.md, "Expert parallel"): E / ep
// of its experts' parameters; under balanced routing its per-sample work is unchanged (the rank's
// experts get the whole group's copies for them: (s k / E) ep tokens each).
void shard_experts(ShardedLayer& sl, const LayerSpec& l, const ParallelSpec& ps);

// [SECTION] Expert tensor parallel (expert_tensor_parallel.cpp) ----------------------------------

// A routed-expert layer on one rank of its expert TP group (docs/program.md, "Expert tensor
// parallel"; shard_experts calls it): 1/etp of the experts' weights (experts.proj's bias whole),
// the same FLOPs per rank on etp times the tokens, etp times experts.fc's input (read and saved)
// and experts.proj's output (written before the reduce-scatter).
void shard_expert_tensor(ShardedLayer& sl, const LayerSpec& l, int etp);
// The saved bytes per sample that etp adds in layers [seg.first, seg.end) to
// stored_activation_bytes_per_sample (experts.fc's gathered input, where the recompute policy
// keeps it; before the 1/cp of rank_stored_activation_bytes_per_sample): 0 with etp 1.
double etp_extra_stored_bytes_per_sample(const ModelSpec& m, Segment seg, const ParallelSpec& ps);

// [SECTION] Recompute ----------------------------------------------------------------------------

// Bytes one micro-batch sample keeps saved in layers [seg.first, seg.end) between its forward and
// its backward (docs/program.md, "Activation recompute"; Korthikanti et al. 2022, table 2):
//   none       every layer's saved tensors: per block sh(34 + 5as/h) / parallel split
//   selective  the attention core keeps Q, K, V only: sh * 34 (/t with SP; 10 + 24/t without)
//   full       only each block's input: 2sh (/t with SP); layers outside blocks as "none"
//   full, every k  blocks not checkpointed (block_checkpointed) keep everything
//   selective_op   a block keeps its input and the outputs sac_op_output_saved names (the 1st and
//                  3rd linear layers' of a GPT block: sh(2 + 6 + 2f/h) with 2-byte elements)
//   selective with recompute_modules beyond core_attn: module_stored_bytes below
double stored_activation_bytes_per_sample(const ModelSpec& m, Segment seg, int tp, bool sp,
                                          RecomputeMode mode, int every = 1,
                                          std::uint8_t modules = recompute_module::kCoreAttn);

// What one micro-batch sample keeps saved on one rank of the strategy: the above at its tp,
// sequence parallelism and recompute policy, over cp (context parallelism keeps 1/cp of every
// saved tensor, all per token with fused attention). The lowering and tune's memory bound both
// read it (docs/memory.md).
double rank_stored_activation_bytes_per_sample(const ModelSpec& m, Segment seg,
                                               const ParallelSpec& ps);

// torchtitan's policies (recompute_policy.cpp; docs/program.md, "Activation recompute"):
// full every k-th block checkpoints 0-based block b iff (b + 1) mod k = 0; selective_op keeps the
// outputs of every other linear layer of a block (the 1st, 3rd, ...) and of fused attention
// kernels, recomputing the rest.
bool block_checkpointed(int block, int every);
bool sac_op_output_saved(const ModelSpec& m, int layer);

// Megatron-Core's recompute modules (recompute_modules.cpp; docs/program.md, "Recompute
// modules"): per layer of `seg` the bytes one sample keeps saved under recompute selective with
// `modules`, from the layers' figures `sl` (sl[0] is layer seg.first; `input_bytes` is the output
// of layer seg.first - 1, < 0 for none), and per group
// (core/model/recompute_modules.hpp) what its re-run recreates and holds until the backward of
// its first member is done.
struct ModuleGroupBytes {
  RecomputeGroup group;
  double recreated = 0;  // bytes per sample
};
struct ModuleStored {
  std::vector<double> layer;  // per layer of the segment, bytes per sample
  std::vector<ModuleGroupBytes> groups;
};
ModuleStored module_stored_bytes(const ModelSpec& m, Segment seg, std::uint8_t modules,
                                 const std::vector<ShardedLayer>& sl, double input_bytes);
// The strategy label's recompute: the mode, with the modules when they are not the default
// ("selective (layernorm, mla_up_proj, moe_act)").
std::string recompute_label(const ParallelSpec& ps);
// Their sum with shard_layer's figures at (tp, sp).
double module_stored_activation_bytes_per_sample(const ModelSpec& m, Segment seg, int tp, bool sp,
                                                 std::uint8_t modules);

// [SECTION] ZeRO / FSDP --------------------------------------------------------------------------

// Per-GPU model-state bytes for `params` parameters replicated over `dp` ranks (Rajbhandari et
// al. 2020, "ZeRO", section 5 / figure 1, with W, G, K bytes per parameter for weights,
// gradients and optimizer state; fp16 + Adam: W = G = 2, K = 12):
//   stage 0: (W + G + K) Psi                 16 Psi
//   stage 1: (W + G) Psi + K Psi / N          4 Psi + 12 Psi / N
//   stage 2: W Psi + (G + K) Psi / N          2 Psi + 14 Psi / N
//   stage 3: (W + G + K) Psi / N             16 Psi / N
// A shard is ceil(Psi / N) parameters.
struct ModelStateBytes {
  Bytes params = 0;     // weights held at rest
  Bytes grads = 0;      // gradients held between backward and the optimizer
  Bytes optimizer = 0;  // optimizer state incl. the fp32 master copy
  // When the framework allocates them (framework_states.hpp; docs/memory.md, "Model-state bytes
  // by framework"). The defaults are PyTorch's: gradients from the step's first backward until
  // zero_grad, the whole optimizer state at the first step() (Adam's lazy state).
  Bytes optimizer_at_setup = 0;  // of `optimizer`, built when the optimizer is constructed
  bool grads_at_setup = false;   // a gradient buffer allocated at construction and kept
  Bytes step_main_grads = 0;     // made inside every step(), freed by the next zero_grad
  // strategy.optimizer_offload (optimizer_offload.hpp): the parameters whose optimizer state is
  // on the host (not in `optimizer`), and the pinned host bytes they take.
  std::int64_t offloaded_params = 0;
  Bytes host_bytes = 0;
};
int optimizer_bytes_per_param(const TrainingSpec& t);  // K
ModelStateBytes model_state_bytes(std::int64_t params, const TrainingSpec& t, int zero_stage,
                                  int dp);

// What is sharded over the data-parallel ranks (docs/program.md, "ZeRO and FSDP"):
//   zero 1           optimizer state                      (state stage 1)
//   zero 2           + gradients, reduce-scattered        (2)
//   zero 3           + parameters, gathered per unit      (3), resharded after each forward
//   fsdp full_shard  as zero 3
//   fsdp shard_grad_op  parameters sharded at rest (3), gathered ones kept from forward to backward
struct ShardingPlan {
  int state_stage = 0;                  // the stage model_state_bytes is evaluated at
  bool optimizer_sharded = false;       // the optimizer updates a 1/dp shard
  bool grads_reduce_scattered = false;  // a reduce-scatter per unit every micro-batch (stage >= 2)
  bool params_sharded = false;          // parameters gathered before use
  bool reshard_after_forward = false;   // ... and freed after each forward (stage 3)
  int shard_ranks = 1;                  // ranks a shard is taken over: dp (HSDP: dp / replicate)
};
ShardingPlan sharding_plan(const ParallelSpec& ps, StrategyKind kind);

// FSDP2 (fsdp2.cpp; docs/program.md, "FSDP2"): the sharded parameters, kept in their original
// dtype, are the optimizer's master copy (PyTorch's MixedPrecisionPolicy: "FSDP does not require
// any extra memory to keep a high-precision copy of the parameters"), S = shard_ranks:
//   params = ceil(Psi/S) P,  grads = ceil(Psi/S) P,  optimizer = ceil(Psi/S) (K - master)
// with P = the recipe's master bytes (fp32) where it keeps one, else its weight bytes; bf16 +
// Adam: 16 Psi / S (ZeRO-3's bf16 recipe: 18 Psi / S, a bf16 copy besides the fp32 master).
// Megatron-FSDP keeps Megatron's bf16 weights beside the distributed optimizer's fp32 main
// parameters: model_state_bytes at stage 3.
ModelStateBytes fsdp2_state_bytes(std::int64_t params, const TrainingSpec& t, int shard_ranks,
                                  bool megatron);

// [SECTION] Memory switches (hybrid_leaks.cpp, model_parallel.cpp) -------------------------------

// docs/memory.md, "Scenario switches": the autograd nodes training.leaks.loss_as_tensor keeps per
// step (kAutogradNodeBytes each, core/lowering/program_builder.hpp).
// Megatron's TP mapping functions in layers [seg.first, seg.end): one per column- or row-parallel
// layer when tp > 1, else 0.
std::int64_t tp_mapping_nodes(const ModelSpec& m, Segment seg, int tp);
// On the last pipeline stage, per step: m x (sum of the last segment's kernels + its TP mapping
// nodes + 3 (loss) + 1 (+=)).
std::int64_t hybrid_loss_graph_nodes(const Scenario& s);
// model_parallel, on the last device: sum of all kernels + one ToCopyBackward per device change
// + 3 (loss) + 1 (+=).
std::int64_t model_parallel_graph_nodes(const Scenario& s);

// [SECTION] Emitter ------------------------------------------------------------------------------

// Lowers pipeline, tensor_parallel, 3d, zero and fsdp scenarios (hybrid_3d.cpp): the emitter of
// hybrid_emitter.hpp composed of one piece per parallel dimension.
Program lower_hybrid(const Scenario& s, const std::string& label, Progress* progress);

}  // namespace csim::core
