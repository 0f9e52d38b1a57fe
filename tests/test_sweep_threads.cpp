// The sweep's worker threads (sweep/sweep_runner.hpp) and tune's batches: what ThreadSanitizer
// runs (the tsan preset builds this executable, which links the sweep library only).
#include <catch2/catch.hpp>

#include <atomic>

#include "core/json_diagnostics.hpp"
#include "sweep/sweep_runner.hpp"
#include "sweep/tune.hpp"
#include "test_support.hpp"

using namespace csim;

namespace {

nlohmann::json scenario_doc(const std::string& path) {
  return core::parse_json_strict(test::read_file(path), path);
}

}  // namespace

TEST_CASE("worker threads give the rows one thread gives, in the variants' order", "[sweep]") {
  const std::string path = test::scenario_path("linear_5x2_dp2.json");
  const std::vector<sweep::Knob> knobs{
      {"training.global_batch", {"2", "4", "6", "8", "10", "12", "14", "16"}},
      {"strategy.kind", {"data_parallel", "ddp"}}};
  const std::vector<sweep::Variant> vs = sweep::grid_variants(knobs, 100);
  sweep::SweepRunOptions one, four;
  four.threads = 4;
  std::size_t progress_calls = 0;
  four.on_progress = [&](const sweep::SweepProgress& p) {
    ++progress_calls;
    CHECK(p.done <= p.total);
  };
  const nlohmann::json doc = scenario_doc(path);
  const sweep::SweepRunOutcome a = sweep::run_variants(doc, path, {}, knobs, vs, one);
  const sweep::SweepRunOutcome b = sweep::run_variants(doc, path, {}, knobs, vs, four);
  REQUIRE(a.rows.size() == vs.size());
  REQUIRE(b.rows.size() == vs.size());
  CHECK(progress_calls >= 1);  // at least the final report
  for (std::size_t i = 0; i < vs.size(); ++i) {
    CHECK(a.rows[i].index == vs[i].index);
    CHECK(b.rows[i].index == vs[i].index);
    CHECK(a.rows[i].step_time_s == b.rows[i].step_time_s);  // the simulator is deterministic
    CHECK(a.rows[i].peak_gib == b.rows[i].peak_gib);
  }
}

TEST_CASE("an interrupted sweep keeps what finished, marked incomplete", "[sweep]") {
  // Cancel at the first checkpoint (checkpoints every 0 s: after the first poll), as Ctrl-C does.
  const std::string path = test::scenario_path("dp_vs_ddp_4x1080ti.json");
  const std::vector<sweep::Knob> knobs{
      {"training.global_batch", {"32", "64", "128", "256", "384", "448"}}};
  const std::vector<sweep::Variant> vs = sweep::grid_variants(knobs, 100);
  std::atomic<bool> cancel{false};
  sweep::SweepRunOptions o;
  o.threads = 2;
  o.cancel = &cancel;
  o.checkpoint_every_s = 0;
  std::size_t checkpoints = 0;
  o.on_checkpoint = [&](const std::vector<sweep::VariantResult>&) {
    ++checkpoints;
    cancel = true;
  };
  const sweep::SweepRunOutcome out =
      sweep::run_variants(scenario_doc(path), path, {}, knobs, vs, o);
  CHECK(checkpoints >= 1);
  CHECK_FALSE(out.complete);
  CHECK(out.rows.size() < vs.size());
  for (const sweep::VariantResult& r : out.rows) CHECK(r.status == sweep::VariantStatus::kOk);
}

TEST_CASE("tune simulates its batches on threads", "[sweep][tune]") {
  const std::string path = test::repo_path("tests/data/sweep/gpt_tiny_2xa100.json");
  sweep::TuneOptions o;
  o.threads = 3;
  o.micro_batch_sizes = {4, 8};
  const sweep::TuneResult r = sweep::tune(scenario_doc(path), path, {}, o);
  CHECK(r.complete);
  CHECK(r.simulated > 3);
  CHECK_FALSE(r.ranking().empty());
}
