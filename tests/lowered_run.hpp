// A scenario lowered and simulated op by op, shared by the tests that check a lowering's Program
// and its simulated timeline together (test_strategies, test_pipeline_dualpipev).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <initializer_list>
#include <utility>
#include <vector>

#include "backends/sim/sim_executor.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/scenario/scenario.hpp"
#include "core/units.hpp"

namespace csim::test {

struct Run {
  core::Scenario s;
  core::Program p;
  core::ExecutionResult r;
};

// Lowers `s`, requires a valid Program, simulates it and requires every op to have run (no send
// or receive left waiting: no deadlock).
inline Run simulate(core::Scenario s) {
  Run run{std::move(s), {}, {}};
  run.p = core::lower(run.s);
  REQUIRE(core::validate_program(run.p).empty());
  sim::SimExecutor ex(run.s);
  run.r = ex.run(run.p, core::RunControl{});
  REQUIRE(run.r.complete);
  return run;
}

// The largest sum of `cats` over the memory samples of GPU `gpu` in the run's memory timeline.
inline Bytes peak_in(const Run& run, int gpu, std::initializer_list<core::MemCategory> cats) {
  const core::MemoryReport rep = core::memory_timeline(run.p, run.r.timings, run.s.cluster);
  Bytes peak = 0;
  for (const core::GpuMemory& g : rep.gpus) {
    if (g.gpu != gpu) continue;
    for (const core::MemorySample& smp : g.samples) {
      Bytes v = 0;
      for (core::MemCategory c : cats) v += smp.by_category[static_cast<std::size_t>(c)];
      peak = std::max(peak, v);
    }
  }
  return peak;
}

// The most micro-batches a stage's schedule holds between a forward and its backward.
inline int max_in_flight(const std::vector<core::PipeStep>& steps) {
  int now = 0, peak = 0;
  for (const core::PipeStep& st : steps) {
    now += st.forward ? 1 : -1;
    peak = std::max(peak, now);
  }
  return peak;
}

}  // namespace csim::test
