// First-step and steady-state peaks, and the OOM verdict's two figures (docs/memory.md, "First-
// step and steady-state peaks", "OOM verdict"; core/program/memory_timeline.cpp).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/scenario/scenario_parser.hpp"
#include "profiler/summary.hpp"
#include "run/run.hpp"

using namespace csim;

namespace {

// A 4-block GPT (h 1024) on 8 GPUs under 3D (dp 2, tp 4), Adam, micro-batch `mbs`.
core::Scenario gpt(int steps, int mbs, const std::string& gpu = "A100-SXM4-80GB",
                   const std::string& precision = "bf16", int layers = 4, int hidden = 1024,
                   int heads = 16) {
  return core::parse_scenario_string(
      R"({"cluster": {"gpus_per_node": 8, "gpu": ")" + gpu + R"("}, "model": {"gpt": {"layers": )" +
          std::to_string(layers) + R"(, "hidden": )" + std::to_string(hidden) + R"(, "heads": )" +
          std::to_string(heads) +
          R"(, "seq_len": 1024, "vocab": 32000}}, "training": {"global_batch": )" +
          std::to_string(2 * mbs) + R"(, "precision": ")" + precision +
          R"(", "optimizer": "adam", "steps": )" + std::to_string(steps) +
          R"(}, "strategy": {"kind": "3d", "dp": 2, "tp": 4, "pp": 1,
      "micro_batch_size": )" +
          std::to_string(mbs) + R"(, "recompute": "none"}})",
      "peaks.json");
}

}  // namespace

TEST_CASE("memory: a one-step run's projected steady state equals what step 2 simulates",
          "[memory][peaks]") {
  // The projection lifts each point of step 1 by what it lacks of what step 1 leaves resident
  // (Adam's state, allocated at the first step()), which is exactly what is resident during step
  // 2 when step 2 repeats step 1's allocations: the two must agree to the byte.
  const run::RunResult one = run::simulate(gpt(1, 2));
  const run::RunResult two = run::simulate(gpt(2, 2));
  REQUIRE(one.memory.gpus.size() == two.memory.gpus.size());
  for (std::size_t i = 0; i < one.memory.gpus.size(); ++i) {
    const core::GpuMemory& a = one.memory.gpus[i];
    const core::GpuMemory& b = two.memory.gpus[i];
    INFO("GPU " << a.gpu);
    CHECK(a.steady_projected);
    CHECK_FALSE(b.steady_projected);
    CHECK(a.steady_peak_bytes == b.steady_peak_bytes);
    CHECK(a.first_step_peak_bytes == b.first_step_peak_bytes);
    // Step 1 lacks the optimizer state during its forward and backward: it peaks lower.
    CHECK(a.first_step_peak_bytes < a.steady_peak_bytes);
    // The simulated one-step run never reaches the steady state itself.
    CHECK(a.peak_bytes == a.first_step_peak_bytes);
  }
  // The summary reports the steady state as the GPU's peak whatever the step count.
  const prof::Summary s1 = prof::summarize(one.trace), s2 = prof::summarize(two.trace);
  CHECK(s1.per_gpu.front().peak_bytes == s2.per_gpu.front().peak_bytes);
  CHECK(s1.per_gpu.front().first_step_peak_bytes < s1.per_gpu.front().peak_bytes);
}

TEST_CASE("memory: the OOM verdict is the steady state's, with the would-be peak over capacity",
          "[memory][peaks][oom]") {
  // An 8-block GPT (h 4096) at micro-batch 12 on 16 GB V100s: step 1 peaks near 11.8 GiB (no
  // Adam state yet), the steady state near 16.7 GiB, above the 15.4 GiB usable. Without the
  // steady state the one-step run had no verdict; now the one-step and two-step runs give the
  // same GPU and would-be peak, and over_capacity = would_be_peak - capacity by definition.
  const run::RunResult one = run::simulate(gpt(1, 12, "V100-SXM2-16GB", "fp16", 8, 4096, 32));
  const run::RunResult two = run::simulate(gpt(2, 12, "V100-SXM2-16GB", "fp16", 8, 4096, 32));
  for (const core::GpuMemory& g : one.memory.gpus)
    CHECK(g.first_step_peak_bytes < g.capacity_bytes);
  CHECK(one.memory.oom->steady_state);
  REQUIRE(one.memory.oom);
  REQUIRE(two.memory.oom);
  CHECK(one.memory.oom->gpu == two.memory.oom->gpu);
  CHECK(one.memory.oom->would_be_peak_bytes == two.memory.oom->would_be_peak_bytes);
  CHECK(one.memory.oom->over_capacity_bytes ==
        one.memory.oom->would_be_peak_bytes - one.memory.oom->capacity_bytes);
  // The first failing allocation lacks less than the whole step exceeds the GPU by.
  CHECK(two.memory.oom->shortfall_bytes <= two.memory.oom->over_capacity_bytes);
  const prof::Summary s = prof::summarize(one.trace);
  REQUIRE(s.oom);
  CHECK(s.oom->over_capacity_bytes == one.memory.oom->over_capacity_bytes);
}
