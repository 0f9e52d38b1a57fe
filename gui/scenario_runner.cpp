// Scenario knobs → overrides → simulated trace (scenario_runner.hpp).
#include "gui/scenario_runner.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>

#include "core/scenario/scenario_parser.hpp"
#include "run/run.hpp"
#include "run/scenario_loader.hpp"

namespace csim::gui {

ScenarioKnobs knobs_from(const core::Scenario& s) {
  ScenarioKnobs k;
  const char* kind = core::to_string(s.strategy.kind);
  k.strategy = 0;
  for (int i = 0; i < kStrategyKindCount; ++i) {
    if (std::strcmp(kind, kStrategyKinds[i]) == 0) k.strategy = i;
  }
  k.max_gpus = std::max(1, s.cluster.world_gpus());
  k.gpus = std::clamp(static_cast<int>(s.strategy.device_ids.size()), 1, k.max_gpus);
  k.global_batch = s.training.global_batch;
  k.micro_batches = s.training.gradient_accumulation;
  k.bucket_cap_mb = static_cast<float>(s.strategy.ddp.bucket_cap_mb);
  k.gil = s.host.gil;
  k.ddp_threads = s.strategy.ddp.launcher == core::DdpLauncher::kThread;
  return k;
}

const char* gil_checkbox_label(bool gil) {
  return gil ? "GIL on (threads take turns)###gil" : "GIL off (free-threaded Python)###gil";
}

std::vector<std::string> knob_overrides(const ScenarioKnobs& k) {
  std::vector<std::string> o;
  const int kind = std::clamp(k.strategy, 0, kStrategyKindCount - 1);
  o.push_back(std::string("strategy.kind=") + kStrategyKinds[kind]);
  std::string ids = "strategy.device_ids=[";
  for (int i = 0; i < std::max(k.gpus, 1); ++i) {
    if (i > 0) ids += ',';
    ids += std::to_string(i);
  }
  o.push_back(ids + "]");
  o.push_back("training.global_batch=" + std::to_string(k.global_batch));
  o.push_back("training.gradient_accumulation=" + std::to_string(std::max(k.micro_batches, 1)));
  o.push_back(std::string("host.gil=") + (k.gil ? "true" : "false"));
  if (std::strcmp(kStrategyKinds[kind], "ddp") == 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "strategy.ddp.bucket_cap_mb=%g",
                  static_cast<double>(k.bucket_cap_mb));
    o.push_back(buf);
    o.push_back(std::string("strategy.ddp.launcher=") + (k.ddp_threads ? "thread" : "process"));
  }
  return o;
}

SimResult run_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  SimResult r;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    const core::Scenario s = run::load_scenario(path, {}, overrides);
    core::check_trace_limit(s);  // simview always builds the trace
    r.trace = run::simulate(s).trace;
    r.ok = true;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::vector<Variant> launch_variants() {
  return {
      {"DataParallel, threads + GIL", {"strategy.kind=data_parallel", "host.gil=true"}},
      {"DataParallel, GIL-free threads", {"strategy.kind=data_parallel", "host.gil=false"}},
      {"DDP, processes", {"strategy.kind=ddp", "host.gil=true", "strategy.ddp.launcher=process"}},
  };
}

}  // namespace csim::gui
