// A scenario lowered and simulated op by op, shared by the tests that check a lowering's Program
// and its simulated timeline together (test_strategies, test_pipeline_dualpipev).
#pragma once

#include <catch2/catch.hpp>

#include <utility>

#include "backends/sim/sim_executor.hpp"
#include "core/lowering/lowering.hpp"
#include "core/scenario/scenario.hpp"

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

}  // namespace csim::test
