// The trace builder counts the events and flows of its op loop before making them and reserves
// each vector once (docs/trace-format.md, "Building speed"). The count is a second copy of the
// loop's branches; these tests keep the two in step: a new event the loop makes but the count
// misses would make the vector grow (moving every event) without changing a byte of the trace.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/scenario/scenario_parser.hpp"
#include "run/run.hpp"
#include "test_support.hpp"

using namespace csim;

namespace {

prof::Trace simulate(const std::string& scenario, const std::vector<std::string>& overrides) {
  return run::simulate(core::parse_scenario_file(test::scenario_path(scenario), overrides)).trace;
}

}  // namespace

// build_trace reserves (op-loop events + ProfilerStep#N spans) events and (ac2g + dependency)
// flows; the spans are the only events added outside the op loop, the flows all come from it.
// std::vector::reserve(n) on an empty vector allocates room for exactly n (libstdc++), and no
// push_back beyond it reallocates, so capacity == size exactly when the count matches what was
// made: a miscount either way leaves them different.
TEST_CASE("trace builder: the events and flows reserved are exactly those made", "[trace]") {
  struct Case {
    const char* scenario;
    std::vector<std::string> overrides;
  };
  // The loop's branches between them: host work and GIL waits (mlp_gil), stream waits and a host
  // wait (ddp), peer copies and collectives with roots (DataParallel's scatter, broadcast and
  // gather), cross-GPU dependency flows (model parallel, pipeline).
  const std::vector<Case> cases = {
      {"mlp_gil_4x1080ti.json", {}},
      {"dp_vs_ddp_4x1080ti.json", {"strategy.kind=ddp", "training.steps=2"}},
      {"dp_vs_ddp_4x1080ti.json", {"training.steps=2"}},
      {"resnet50_model_parallel_2gpu.json", {}},
      {"gpt_pipeline_8xa100.json", {}},
  };
  for (const Case& c : cases) {
    INFO(c.scenario);
    const prof::Trace t = simulate(c.scenario, c.overrides);
    REQUIRE_FALSE(t.events.empty());
    CHECK(t.events.capacity() == t.events.size());
    CHECK(t.flows.capacity() == t.flows.size());
  }
}
