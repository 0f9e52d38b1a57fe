// simrun tune (docs/sweep.md, "Tune"): the fastest parallel layout of a scenario that fits in
// memory. Candidates: dp x tp x pp over the GPUs, micro-batch size (and so the micro-batch count),
// pipeline schedule, ZeRO stage, activation recompute and, for plain data parallelism, DDP's
// bucket size; opt-in (TuneSpace): attention kernel, precision, compile, sharding family,
// sequence parallelism, recompute policies, rank order, uneven pipeline stages, optimizer offload,
// TP communication overlap.
// Each candidate is checked by the scenario parser, then two bounds prune before any simulation:
//   cannot fit:  the fullest stage's model states (ZeRO / FSDP2-sharded), FP8 weight copies and
//                the saved activations its pipeline schedule holds at once in the backward phase
//                exceed the usable memory (memory_bound: a lower bound of the peak);
//   cannot be fast: the compute lower bound
//                LB = hardware FLOPs / (GPUs x peak x max GEMM efficiency) x (m + (pp-1)/v) / m
//                is not below the best simulated step time (checked with a 10 % margin).
// A candidate whose strategy is the same as an earlier one's once Megatron's distributed optimizer
// is written as what it is (kind 3d: zero_stage 1) is a duplicate, not simulated.
// The rest are simulated in order of LB, best first, until the bound stops the search.
#pragma once

#include <atomic>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/scenario/scenario.hpp"
#include "sweep/evaluate.hpp"

namespace csim::sweep {

enum class TuneVerdict {
  kFits,        // simulated, fits
  kOom,         // simulated, runs out of memory
  kInvalid,     // the parser refuses the combination (divisibility, schedule rules)
  kCannotFit,   // model states alone exceed usable memory (not simulated)
  kPruned,      // its lower bound is not below the best step time (not simulated)
  kNotReached,  // the search was interrupted first
  kDuplicate,   // the same strategy as an earlier candidate (not simulated; docs/sweep.md, "Tune")
};
const char* to_string(TuneVerdict v);

struct TuneCandidate {
  std::size_t index = 0;          // enumeration order
  std::vector<std::string> sets;  // the simrun --set values that make it
  std::string label;              // "dp 16 tp 8 pp 8 mbs 1 interleaved zero 1 rc full"
  nlohmann::json knobs;           // the knobs as key path -> value (strategy, model, training)
  double lb_step_s = 0;           // the compute lower bound
  double model_states_gib = 0;    // the memory lower bound
  double states_alone_gib = 0;    // the same with no activations (MemoryBound::without_activations)
  double usable_gib = 0;
  TuneVerdict verdict = TuneVerdict::kNotReached;
  std::string reason;    // why it was rejected
  VariantResult result;  // when simulated
};

// The knobs beyond dp x tp x pp, micro-batch, schedule, ZeRO and recompute (docs/sweep.md, "Tune:
// the other knobs"). Every default reproduces the original search space, so a scenario tuned
// without these options finds the same optimum as before.
struct TuneSpace {
  // Attention kernels (eager, flash2, flash3, cudnn, or "all": those the GPU runs); empty: the
  // scenario's. Needs model.transformer or model.hf_config.
  std::vector<std::string> attention;
  // Precisions: "bf16", "fp8" (the scenario's training.fp8.recipe, else delayed) or "fp8:RECIPE";
  // empty: the scenario's. FP8 changes numerics: only searched when asked.
  std::vector<std::string> precisions;
  std::vector<int> compile;  // training.compile values (0, 1); empty: the scenario's
  // Sharding families: zero (ZeRO 0-3, the parser's rules), distopt (Megatron's distributed
  // optimizer), megatron_fsdp, fsdp1 (full_shard, shard_grad_op; dp only), fsdp2 (tp, pp, HSDP).
  std::vector<std::string> sharding{"zero"};
  bool sequence_parallel = false;  // also try sequence_parallel where tp > 1
  // Recompute policies: none, selective, selective_op, full, full:K (every K-th block).
  std::vector<std::string> recompute{"none", "selective", "full"};
  std::vector<std::string> rank_orders;  // empty: the scenario's default (tp-cp-ep-dp-pp)
  // Context-parallel sizes (each dividing the GPUs, and the sequence into 2 cp chunks; 1: none)
  // and the K/V exchanges tried for each cp > 1: p2p, all_gather, a2a, "a2a+p2p:A" (cp_a2a A).
  std::vector<int> cp{1};
  std::vector<std::string> cp_comm{"p2p"};
  bool uneven_stages = false;  // pp not dividing the blocks: Megatron's first/last stage split
  // Expert-parallel sizes for a mixture of experts (each dividing the experts and tp x cp x dp;
  // docs/sweep.md, "Tune: the other knobs"); empty: 1 and every such divisor. Ignored for dense
  // models.
  std::vector<int> ep;
  // MoE token dispatchers tried where ep > 1 (alltoall, allgather, deepep; docs/program.md, "MoE
  // token dispatchers"); empty: the scenario's.
  std::vector<std::string> moe_dispatchers;
  // Megatron's optimizer offload fractions (strategy.optimizer_offload, docs/program.md,
  // "Optimizer offload") tried with each Megatron sharding (kind 3d, ZeRO 0 / 1 or distopt);
  // empty: none searched (the candidates' strategy objects carry no offload). 0: without.
  std::vector<double> optimizer_offload;
  // Megatron's async TP all-reduce (strategy.tp_comm_overlap, docs/program.md, "TP communication
  // overlap") values tried (0 off, 1 on) where it changes the Program: tp > 1 without sequence
  // parallelism; empty: none searched (the candidates' strategy objects carry no overlap).
  std::vector<int> tp_comm_overlap;
  // Megatron-Core's activation offload (strategy.activation_offload K, docs/program.md,
  // "Activation offload") block counts tried where the parser accepts it: transformer models,
  // pp 1, recompute none, K below the blocks; empty: none searched. 0: without.
  std::vector<int> activation_offload;
};

struct TuneOptions {
  int gpus = 0;  // 0: every GPU of the cluster
  int threads = 1;
  run::Evaluation evaluation = run::Evaluation::kBlock;  // kOpLevel: simrun tune --op-level
  double prune_margin = 0.9;                             // prune when margin x LB >= best step time
  std::vector<std::int64_t> micro_batch_sizes{1, 2, 4, 8, 16};
  TuneSpace space;
  const std::atomic<bool>* cancel = nullptr;
  std::function<void(std::size_t simulated, std::size_t to_simulate, double best_s)> on_progress;
};

struct TuneResult {
  std::vector<TuneCandidate> candidates;  // enumeration order
  std::vector<std::string> gpu_sets;      // the --set values that give the cluster --gpus GPUs
  std::size_t simulated = 0;
  bool complete = true;
  double wall_s = 0;
  // Fitting candidates, fastest first (indices into candidates).
  std::vector<std::size_t> ranking() const;
  // Rejected candidates, most promising first (by LB): the ones a user would ask about.
  std::vector<std::size_t> rejected() const;
};

// The memory bound of a parsed candidate (docs/sweep.md, "Tune", "Bounds"): for each pipeline
// stage, its parameters after the TP split (core::shard_layer), their model states
// (core::model_state_bytes at the sharding plan's stage; FSDP2 / HSDP / Megatron-FSDP:
// core::fsdp2_state_bytes over the shard ranks), the FP8 weight copies of its FP8 layers
// (core::fp8_weight_copy_bytes) and the saved activations of the forward passes it holds at one
// moment of its backward phase (held_chunk_passes, sweep/in_flight.hpp: min(p - s, m) passes
// under 1F1B, m under GPipe, Megatron's warm-up + 1 under interleaving, 2p + 1 under DualPipeV),
// each core::rank_stored_activation_bytes_per_sample of its segment x the micro-batch (recompute
// policy, every k, sequence parallelism, cp) and, on the stage of the last segment, those passes'
// logits (L);
//   need = max(W + G + K + K_s + C,  W + G + C + A + L + K)
// (the optimizer step, and that moment of the backward; one-step runs: the steady-state
// projection, docs/memory.md, puts K there too), the fullest stage's. Other models:
// the model states of ceil(P / (tp pp)) parameters.
struct MemoryBound {
  double states = 0;               // W + G + K of the fullest stage, bytes
  double fp8_copies = 0;           // C
  double activations = 0;          // A
  double logits = 0;               // L: the last segment's logits held with its passes
  double bytes = 0;                // need
  double without_activations = 0;  // need with A = L = 0, the fullest stage's (bytes)
  int stage = 0;
};
MemoryBound memory_bound(const core::Scenario& candidate, int gpus);

// `doc` is the scenario file (its model must be a GPT for tp and pp; other models search data
// parallelism only), `base_sets` the command line's --set values.
TuneResult tune(const nlohmann::json& doc, const std::string& name,
                const std::vector<std::string>& base_sets, const TuneOptions& options);

// The report: counts, the top fitting layouts, the best one's --set line, the most promising
// rejected layouts with their reasons.
void print_tune_report(const TuneResult& r, int top, int rejected, std::ostream& out);
// The same as JSON (simrun tune -o FILE.json): counts, and each fitting layout (best first, at
// most `top`) with its label, knobs, --set values and figures.
nlohmann::json tune_report_json(const TuneResult& r, int top);

}  // namespace csim::sweep
