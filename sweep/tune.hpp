// simrun tune (docs/sweep.md, "Tune"): the fastest parallel layout of a scenario that fits in
// memory. Candidates: dp x tp x pp over the GPUs, micro-batch size (and so the micro-batch count),
// pipeline schedule, ZeRO stage, activation recompute and, for plain data parallelism, DDP's
// bucket size. Each candidate is checked by the scenario parser, then two bounds prune before any
// simulation:
//   cannot fit:  model states per GPU (weights, gradients, optimizer; ZeRO-sharded) over the
//                mean stage's parameters exceed the usable memory (a lower bound of the peak);
//   cannot be fast: the compute lower bound
//                LB = hardware FLOPs / (GPUs x peak x max GEMM efficiency) x (m + (pp-1)/v) / m
//                is not below the best simulated step time (checked with a 10 % margin).
// The rest are simulated in order of LB, best first, until the bound stops the search.
#pragma once

#include <atomic>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/scenario.hpp"
#include "sweep/evaluate.hpp"

namespace csim::sweep {

enum class TuneVerdict {
  kFits,        // simulated, fits
  kOom,         // simulated, runs out of memory
  kInvalid,     // the parser refuses the combination (divisibility, schedule rules)
  kCannotFit,   // model states alone exceed usable memory (not simulated)
  kPruned,      // its lower bound is not below the best step time (not simulated)
  kNotReached,  // the search was interrupted first
};
const char* to_string(TuneVerdict v);

struct TuneCandidate {
  std::size_t index = 0;          // enumeration order
  std::vector<std::string> sets;  // the simrun --set values that make it
  std::string label;              // "dp 16 tp 8 pp 8 mbs 1 interleaved zero 1 rc full"
  double lb_step_s = 0;           // the compute lower bound
  double model_states_gib = 0;    // the memory lower bound
  double usable_gib = 0;
  TuneVerdict verdict = TuneVerdict::kNotReached;
  std::string reason;    // why it was rejected
  VariantResult result;  // when simulated
};

struct TuneOptions {
  int gpus = 0;  // 0: every GPU of the cluster
  int threads = 1;
  run::Evaluation evaluation = run::Evaluation::kBlock;  // kOpLevel: simrun tune --op-level
  double prune_margin = 0.9;  // prune when margin x LB >= best step time
  std::vector<std::int64_t> micro_batch_sizes{1, 2, 4, 8, 16};
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

// `doc` is the scenario file (its model must be a GPT for tp and pp; other models search data
// parallelism only), `base_sets` the command line's --set values.
TuneResult tune(const nlohmann::json& doc, const std::string& name,
                const std::vector<std::string>& base_sets, const TuneOptions& options);

// The report: counts, the top fitting layouts, the best one's --set line, the most promising
// rejected layouts with their reasons.
void print_tune_report(const TuneResult& r, int top, int rejected, std::ostream& out);

}  // namespace csim::sweep
