// backend::summarize_run (docs/summary.md, "Without a trace") against prof::summarize of the
// trace build_trace makes from the same run: the same Summary, every figure to the bit, on
// scenarios that exercise each part the summary reads (DDP and its buckets, GIL waits of
// DataParallel threads, data-loader workers, pipeline and 3D under rank symmetry, FSDP, several
// steps, an OOM verdict, the caching allocator).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/common/run_summary.hpp"
#include "backends/common/trace_builder.hpp"
#include "backends/sim/sim_executor.hpp"
#include "core/lowering/lowering.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "profiler/summary.hpp"
#include "test_support.hpp"

using namespace csim;

namespace {

prof::Summary same_summary(const std::string& file, const std::vector<std::string>& sets = {}) {
  INFO(file);
  const core::Scenario sc = core::parse_scenario_file(test::scenario_path(file), sets);
  const core::Program p = core::lower(sc);
  sim::SimExecutor exec(sc);
  const core::ExecutionResult res = exec.run(p, {});
  const core::MemoryReport mem = core::memory_timeline(p, res.timings, sc.cluster);
  const prof::Summary full = prof::summarize(backend::build_trace(sc, p, res, mem));
  const prof::Summary lean = backend::summarize_run(sc, p, res, mem);
  // Expected: identical. summary_to_json writes every figure (doubles at full precision).
  CHECK(prof::summary_to_json(lean).dump() == prof::summary_to_json(full).dump());
  CHECK(lean.step_time_s == full.step_time_s);
  CHECK(lean.exposed_comm_s == full.exposed_comm_s);
  CHECK(lean.per_gpu.size() == full.per_gpu.size());
  CHECK(lean.oom.has_value() == full.oom.has_value());
  return lean;
}

}  // namespace

TEST_CASE("summary without a trace equals the trace's summary", "[summary][run_summary]") {
  same_summary("gpt2_small_8xa100.json");
  same_summary("gpt2_small_8xa100.json", {"strategy.kind=ddp"});
  same_summary("mlp_gil_4x1080ti.json");
  same_summary("ddp_batch512_workers.json");
  same_summary("dp_vs_ddp_4x1080ti.json");
  same_summary("gpt_pipeline_8xa100.json");
  same_summary("gpt_20b_64xa100_3d.json", {"training.steps=3"});
  same_summary("llama3_8b_64xh100_fsdp.json");
  same_summary("resnet50_model_parallel_2gpu.json");
  // GPipe holds every micro-batch's activations: an OOM verdict.
  same_summary("gpt_20b_64xa100_3d.json", {"strategy.schedule=gpipe"});
  // A loss kept as a tensor grows memory every step: "Memory growth" reads the level at each
  // step end, which summarize_run keeps of the memory samples (the last of each stretch).
  const prof::Summary leak = same_summary(
      "dp_vs_ddp_4x1080ti.json", {"training.leaks.loss_as_tensor=true", "training.steps=6"});
  CHECK(!leak.memory_growth.empty());
}

TEST_CASE("a GPU power cap is a summary note with its compute factor", "[summary][power]") {
  // H100 SXM capped at 500 W: the catalog's points (400 W, 0.766) and the TDP (700 W, 1) give
  // 0.766 + (500 - 400) / (700 - 400) * (1 - 0.766) = 0.844 (docs/cost-model.md, "Power limit").
  const prof::Summary capped = same_summary("llama3_1_8b_8xh100_fsdp2.json",
                                            {"cluster.gpu_power_limit_w=500", "training.steps=2"});
  const std::string note = "GPU power cap 500 W: compute throughput x 0.844";
  bool found = false;
  for (const std::string& n : capped.notes) found = found || n.rfind(note, 0) == 0;
  CHECK(found);
  // Without a cap, no such note, and the step is faster (every kernel's compute term is / 0.844).
  const prof::Summary full = same_summary("llama3_1_8b_8xh100_fsdp2.json", {"training.steps=2"});
  for (const std::string& n : full.notes) CHECK(n.rfind("GPU power cap", 0) == std::string::npos);
  CHECK(full.step_time_s < capped.step_time_s);
}
