// Determinism: the same scenario simulated twice gives byte-identical traces (event ties are
// broken by insertion order; times are rounded to integer ns in one place).
#include <catch2/catch.hpp>

#include <sstream>

#include "core/scenario/scenario_parser.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "run/run.hpp"
#include "tests/test_support.hpp"

using namespace csim;

TEST_CASE("the same scenario twice gives identical trace bytes", "[determinism]") {
  for (const char* kind : {"data_parallel", "ddp"}) {
    const core::Scenario s =
        core::parse_scenario_file(test::scenario_path("dp_vs_ddp_4x1080ti.json"),
                                  {std::string("strategy.kind=") + kind, "training.steps=2"});
    std::ostringstream a, b;
    prof::write_chrome_trace(run::simulate(s).trace, a);
    prof::write_chrome_trace(run::simulate(s).trace, b);
    REQUIRE(a.str().size() > 1000);
    CHECK(a.str() == b.str());
  }
}
