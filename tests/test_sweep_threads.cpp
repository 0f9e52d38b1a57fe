// The sweep's worker threads (sweep/sweep_runner.hpp) and tune's batches: what ThreadSanitizer
// runs (the tsan preset builds this executable, which links the sweep library only).
#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>

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
  // Cancel from a checkpoint that holds a finished row, as Ctrl-C does, whatever the machine's
  // speed: the first worker to finish a row waits in on_row until a checkpoint (every poll,
  // checkpoint_every_s = 0) has seen a row, and that checkpoint cancels. Each worker then stops
  // before its next variant, so at most one row per worker exists: 2 of the 6 variants.
  const std::string path = test::scenario_path("dp_vs_ddp_4x1080ti.json");
  const std::vector<sweep::Knob> knobs{
      {"training.global_batch", {"32", "64", "128", "256", "384", "448"}}};
  const std::vector<sweep::Variant> vs = sweep::grid_variants(knobs, 100);
  std::atomic<bool> cancel{false};
  sweep::SweepRunOptions o;
  o.threads = 2;
  o.cancel = &cancel;
  o.checkpoint_every_s = 0;
  std::mutex mu;
  std::condition_variable seen;
  std::size_t rows_at_cancel = 0;  // under mu; 0 until the cancelling checkpoint
  o.on_checkpoint = [&](const std::vector<sweep::VariantResult>& rows) {
    if (rows.empty()) return;  // a poll before any variant finished
    {
      std::lock_guard<std::mutex> lock(mu);
      if (rows_at_cancel == 0) rows_at_cancel = rows.size();
    }
    cancel = true;
    seen.notify_all();
  };
  o.on_row = [&](const sweep::VariantResult&) {
    std::unique_lock<std::mutex> lock(mu);
    seen.wait(lock, [&] { return rows_at_cancel > 0; });
  };
  const sweep::SweepRunOutcome out =
      sweep::run_variants(scenario_doc(path), path, {}, knobs, vs, o);
  CHECK(rows_at_cancel >= 1);
  CHECK_FALSE(out.complete);
  CHECK(out.rows.size() >= rows_at_cancel);  // what finished before the cancel is kept
  CHECK(out.rows.size() <= static_cast<std::size_t>(o.threads));
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
