// The scenario panel's model: the main knobs of a scenario, turned into `--set` overrides
// (docs/scenario.md, "Overrides") and simulated through csim::run::simulate. Also the three
// launch / GIL variants the compare view shows side by side. Plain C++, tested headless.
#pragma once

#include <string>
#include <vector>

#include "core/scenario/scenario.hpp"
#include "profiler/trace.hpp"

namespace csim::gui {

inline constexpr const char* kStrategyKinds[] = {"single", "data_parallel", "ddp"};
inline constexpr int kStrategyKindCount = 3;

struct ScenarioKnobs {
  int strategy = 1;            // index into kStrategyKinds
  int gpus = 1;                // devices used: strategy.device_ids = [0, gpus)
  int max_gpus = 1;            // GPUs in the cluster (the slider's limit)
  long long global_batch = 1;  // training.global_batch
  int micro_batches = 1;       // training.gradient_accumulation
  float bucket_cap_mb = 25;    // strategy.ddp.bucket_cap_mb (DDP only)
  bool gil = true;             // host.gil (false: free-threaded Python)
  bool ddp_threads = false;    // strategy.ddp.launcher = thread (a labelled what-if)
};

// The knobs as the parsed scenario sets them.
ScenarioKnobs knobs_from(const core::Scenario& s);

// Overrides reproducing `k`; DDP-only keys are emitted only for strategy ddp (the parser would
// warn about them otherwise). Example: DataParallel on 2 GPUs, batch 64, GIL off →
// {"strategy.kind=data_parallel", "strategy.device_ids=[0,1]", "training.global_batch=64",
//  "training.gradient_accumulation=1", "host.gil=false"}.
std::vector<std::string> knob_overrides(const ScenarioKnobs& k);

// The GIL checkbox's label, saying the state it shows: ticked "GIL on (threads take turns)",
// unticked "GIL off (free-threaded Python)"; the "###gil" suffix keeps one ImGui id for both.
const char* gil_checkbox_label(bool gil);

struct SimResult {
  bool ok = false;
  std::string error;  // the parser's or simulator's one-line message when !ok
  prof::Trace trace;
  double seconds = 0;  // parse + simulate wall time
};

// Parses `path` with `overrides` applied and simulates it; never throws.
SimResult run_scenario(const std::string& path, const std::vector<std::string>& overrides);

struct Variant {
  std::string label;                   // "DataParallel, threads + GIL"
  std::vector<std::string> overrides;  // applied after the knobs' own overrides
};

// DataParallel with the GIL (threads take turns), DataParallel with free-threaded Python
// (host.gil=false), DDP with one process per GPU.
std::vector<Variant> launch_variants();

}  // namespace csim::gui
