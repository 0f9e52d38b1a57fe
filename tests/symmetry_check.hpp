// A check shared by the expert-parallel tests (test_expert_parallel.cpp, test_fsdp2_experts.cpp,
// test_expert_tensor_parallel.cpp): rank symmetry changes no figure, and the block path agrees.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <string>

#include "backends/block/block_eval.hpp"
#include "core/lowering/lowering.hpp"
#include "core/scenario/scenario_parser.hpp"

namespace csim::test {

// Lowers the scenario `text` with rank symmetry off and on: the symmetric Program has `images`
// mirrors, and its op-level step time and exposed communication equal those of every rank
// simulated; the block path on it agrees within 1 % without falling back.
inline void check_symmetry_matches_every_rank(const std::string& text, std::size_t images) {
  core::Scenario off = core::parse_scenario_string(text, "s.json");
  off.simulation.symmetry = false;
  core::Scenario on = off;
  on.simulation.symmetry = true;
  const core::Program po = core::lower(off), pn = core::lower(on);
  REQUIRE(core::validate_program(pn).empty());
  CHECK(pn.symmetry.images.size() == images);
  const block::EvalResult ro = block::evaluate_op_level(off, po);
  const block::EvalResult rn = block::evaluate_op_level(on, pn);
  CHECK(rn.step_time_ns == ro.step_time_ns);
  CHECK(rn.exposed_comm_ns == ro.exposed_comm_ns);
  const block::EvalResult fast = block::evaluate(on, pn);
  CHECK(fast.fallback_reason.empty());
  CHECK(static_cast<double>(fast.step_time_ns) ==
        Approx(static_cast<double>(rn.step_time_ns)).epsilon(0.01));
}

}  // namespace csim::test
