// One rank of a Program run alone (core/program/program_slice.hpp): simrun --ranks R.
#include <catch2/catch.hpp>

#include "backends/sim/sim_executor.hpp"
#include "core/lowering/lowering.hpp"
#include "core/program/program_slice.hpp"
#include "core/scenario/scenario_parser.hpp"

using namespace csim;
using core::Op;
using core::OpKind;

namespace {

// 3D dp 2 x tp 2 x pp 2 on 8 A100s (one node), no Python: rank symmetry on, so only the dp 0 /
// tp 0 ranks of each stage have ops.
core::Scenario scenario_3d(const std::vector<std::string>& sets = {}) {
  return core::parse_scenario_string(
      "{\"cluster\":{\"gpus_per_node\":8,\"gpu\":\"A100-SXM4-80GB\"},\"host\":{\"python\":false},"
      "\"model\":{\"gpt\":{\"layers\":4,\"hidden\":1024,\"heads\":16,\"seq_len\":512,"
      "\"vocab\":32000}},\"training\":{\"global_batch\":16,\"precision\":\"bf16\",\"steps\":2},"
      "\"strategy\":{\"kind\":\"3d\",\"dp\":2,\"tp\":2,\"pp\":2,\"micro_batch_size\":2}}",
      "t.json", sets);
}

}  // namespace

TEST_CASE("a mirrored GPU's ops are its representative's", "[slice]") {
  const core::Program p = core::lower(scenario_3d());
  REQUIRE(p.symmetry.enabled());
  for (int g : p.active_gpus) {
    const int rep = core::representative_of(p, g);
    REQUIRE(rep >= 0);
    CHECK(p.symmetry.weight_of_gpu[static_cast<std::size_t>(rep)] > 0);
  }
  CHECK(core::representative_of(p, 100) == -1);  // not a GPU of the program
}

TEST_CASE("a rank alone, its collectives as simulated delays, keeps its simulated timeline",
          "[slice]") {
  // The rank's own ops depend on the others only through collectives (TP all-reduces, pipeline
  // send/recv, DP gradient reduction), whose simulated durations include the waiting for them.
  // With those as fixed delays the slice, simulated alone, must reproduce the rank's timeline
  // exactly: same ops, same starts and ends, to the nanosecond. Stage 1 (no data feed, so no
  // host link shared with the node's other GPUs) is the one taken. HBM sharing is off: a fixed
  // delay carries no HBM traffic, so the collectives' traffic beside the rank's kernels
  // (docs/cost-model.md, "Resource sharing") is not reproduced by a slice; the SMs they hold are.
  const core::Scenario s =
      scenario_3d({"cluster.gpu={\"base\":\"A100-SXM4-80GB\",\"hbm_sharing\":false}"});
  const core::Program p = core::lower(s);
  sim::SimExecutor sim(s);
  const core::ExecutionResult whole = sim.run(p, {});
  int gpu = -1;  // a representative of the last stage
  for (const Op& op : p.ops) {
    if (p.name_of(op).find("recv activations") != std::string::npos) {
      gpu = op.gpu;
      break;
    }
  }
  REQUIRE(gpu >= 0);
  const core::RankSlice slice = core::slice_rank(p, gpu, whole.timings);
  CHECK(slice.program.world_gpus == 1);
  CHECK(slice.replaced > 0);
  std::vector<core::OpId> original;  // the rank's ops, in the slice's order
  for (const Op& op : p.ops) {
    if (p.threads[static_cast<std::size_t>(op.thread)].gpu == gpu) original.push_back(op.id);
  }
  REQUIRE(original.size() == slice.program.ops.size());
  for (const Op& op : slice.program.ops) {
    CHECK(op.gpu == 0);
    if (op.kind == OpKind::kCollective) {
      CHECK(op.group == -1);
      CHECK(op.fixed_ns >= 0);
    }
  }
  core::Scenario one = s;
  one.cluster.gpus_per_node = 1;
  sim::SimExecutor alone_sim(one);
  const core::ExecutionResult alone = alone_sim.run(slice.program, {});
  for (std::size_t i = 0; i < original.size(); ++i) {
    const core::OpTiming& a = whole.timings[static_cast<std::size_t>(original[i])];
    const core::OpTiming& b = alone.timings[i];
    INFO(slice.program.name_of(slice.program.ops[i]));
    CHECK(b.start_ns == a.start_ns);
    CHECK(b.end_ns == a.end_ns);
  }
}
