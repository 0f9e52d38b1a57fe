// Runs a sweep's variants on worker threads (docs/sweep.md, "Running"): each worker takes the
// next pending variant, simulates it (sweep/evaluate.hpp) and stores its row; the calling thread
// reports progress and checkpoints the rows done so far. A cancel request stops the workers
// after their current variant (the simulator also stops mid-run); what finished is kept.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweep/evaluate.hpp"
#include "sweep/variant_space.hpp"

namespace csim::sweep {

struct SweepProgress {
  std::size_t done = 0, total = 0;  // this run's variants (resumed ones not counted)
  std::size_t oom = 0, invalid = 0;
  double elapsed_s = 0;
};

struct SweepRunOptions {
  int threads = 1;
  run::Evaluation evaluation = run::Evaluation::kBlock;  // kOpLevel: simrun sweep --op-level
  const std::atomic<bool>* cancel = nullptr;
  double report_every_s = 0.25;
  // Called on the calling thread every report_every_s and once at the end.
  std::function<void(const SweepProgress&)> on_progress;
  // Called on the calling thread with the rows finished so far, every checkpoint_every_s.
  double checkpoint_every_s = 2.0;
  std::function<void(const std::vector<VariantResult>&)> on_checkpoint;
  // Called on the worker thread that simulated a variant, after its row is stored and outside
  // the runner's lock (the calling thread can report and checkpoint meanwhile); must be
  // thread-safe. A cancel requested here stops every worker before its next variant.
  std::function<void(const VariantResult&)> on_row;
};

struct SweepRunOutcome {
  std::vector<VariantResult> rows;  // the variants simulated, in the order of `variants`
  bool complete = true;             // false when cancelled before every variant ran
  double wall_s = 0;
};

// Simulates every variant of `variants`: the scenario `doc` with `base_sets`, then the variant's
// --set values.
SweepRunOutcome run_variants(const nlohmann::json& doc, const std::string& scenario_name,
                             const std::vector<std::string>& base_sets,
                             const std::vector<Knob>& knobs, const std::vector<Variant>& variants,
                             const SweepRunOptions& options);

// A one-line progress bar: "[#####-----] 51 % 512/1000  48 OOM  3 invalid  1020 variants/s  eta
// 0.5 s".
std::string progress_line(const SweepProgress& p);

}  // namespace csim::sweep
