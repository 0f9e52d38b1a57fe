// tracediff on the real PyTorch-profiler (Kineto) traces (tests/kineto_fixtures.hpp): every
// fixture opens, says "no memory data" (none was recorded with profile_memory) and diffs by op
// class; diff_control vs diff_test (different job shapes and stream ids) match streams by role.
// Part of tests_kineto_fixtures: skipped visibly when the fixtures are absent
// (kineto_fixtures.hpp).
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>

#include "kineto_fixtures.hpp"
#include "profiler/trace_diff.hpp"
#include "tools/tracediff_app.hpp"

using namespace csim;

namespace {

using test::kineto_fixture;
std::string fixture(const std::string& name) {
  return kineto_fixture(name);
}

// The fixtures recorded without profile_memory (df_index_resolver has [memory] events).
constexpr const char* kFixtures[] = {"sampled_rank-0.json.gz", "sampled_rank-1.json.gz",
                                     "diff_control.json.gz", "diff_test.json.gz",
                                     "nccl_data.json.gz"};

int tracediff(const std::vector<std::string>& args, std::string* out) {
  std::ostringstream o, e;
  const int code = app::tracediff_main(args, o, e);
  *out = o.str() + e.str();
  return code;
}

}  // namespace

TEST_CASE("every Kineto fixture opens and reports no memory data", "[tracediff][kineto]") {
  for (const char* f : kFixtures) {
    SECTION(f) {
      const prof::RunMetrics r = app::load_run(fixture(f));
      CHECK(r.gpus.size() >= 1);
      CHECK(std::find(r.notes.begin(), r.notes.end(), "no memory data") != r.notes.end());
      CHECK(r.metrics.count("peak_memory/max") == 0);
      CHECK(r.metrics.at("step_time").value > 0);
      CHECK(r.families.count(prof::kFamilyTime) == 1);
      // The same file against itself: nothing changed, exit 0, the note printed.
      std::string out;
      CHECK(tracediff({fixture(f), fixture(f)}, &out) == app::kDiffOk);
      INFO(out);
      CHECK(out.find("no metric changed") != std::string::npos);
      CHECK(out.find(": no memory data") != std::string::npos);
    }
  }
}

TEST_CASE("nccl_data: NCCL kernels are communication, launch flows give a critical path",
          "[tracediff][kineto]") {
  const prof::RunMetrics r = app::load_run(fixture("nccl_data.json.gz"));
  bool comm = false;
  for (const auto& [k, m] : r.metrics) {
    if (k.rfind("time/mean/comm/", 0) == 0 && m.value > 0) comm = true;
  }
  CHECK(comm);
  CHECK(r.families.count(prof::kFamilyCritical) == 1);
  CHECK(r.metrics.count("exposed_comm") == 1);
}

TEST_CASE("diff_control vs diff_test: different job shapes diffed by op class",
          "[tracediff][kineto]") {
  const prof::RunMetrics base = app::load_run(fixture("diff_control.json.gz"));
  const prof::RunMetrics next = app::load_run(fixture("diff_test.json.gz"));
  const prof::DiffResult d = prof::diff_runs({base}, {next}, {});
  bool compute_class = false;
  for (const auto& m : d.rows) {
    if (m.key.rfind("time/mean/compute/", 0) == 0) compute_class = true;
  }
  CHECK(compute_class);
  bool step = false;
  for (const auto& m : d.rows) step = step || m.key == "step_time";
  CHECK(step);
  std::string out;
  const int code = tracediff({fixture("diff_control.json.gz"), fixture("diff_test.json.gz")}, &out);
  INFO(out);
  CHECK((code == app::kDiffOk || code == app::kDiffRegression));
  CHECK(out.find("verdict:") != std::string::npos);
}
