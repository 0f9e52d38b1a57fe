// The rank job (backends/real/rank_job.hpp, program_codec.hpp): what the launcher of launch mode
// processes hands the ranks it starts by exec. A decoded Program must be the encoded one, which
// the tests check the strongest way available: its bytes encode again to the same bytes, every
// op's name reads the same, and the simulator gives the same timing to every op.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/real/program_codec.hpp"
#include "backends/real/rank_job.hpp"
#include "backends/sim/sim_executor.hpp"
#include "core/lowering/lowering.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "tests/test_support.hpp"

using namespace csim;

namespace {

core::Scenario scenario(const std::string& file, std::vector<std::string> sets = {}) {
  return core::parse_scenario_file(test::scenario_path(file), std::move(sets));
}

bool same_timings(const core::ExecutionResult& a, const core::ExecutionResult& b) {
  if (a.timings.size() != b.timings.size()) return false;
  for (std::size_t i = 0; i < a.timings.size(); ++i) {
    const core::OpTiming &x = a.timings[i], &y = b.timings[i];
    if (x.start_ns != y.start_ns || x.end_ns != y.end_ns || x.ready_ns != y.ready_ns ||
        x.issue_end_ns != y.issue_end_ns)
      return false;
  }
  return true;
}

}  // namespace

TEST_CASE("rank job: a decoded Program is the lowered one", "[real][rank_job]") {
  // Scenarios whose Programs use the fields in question: DataParallel (host threads, the GIL,
  // scatter/gather copies), DDP buckets, a GPipe pipeline (peer copies, micro-batch name
  // patterns), FSDP2 (record_stream frees, all-gathers), expert parallelism (all-to-all), a
  // 3D layout with rank symmetry (RankSymmetry's images and weights).
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"dp_vs_ddp_4x1080ti.json", {}},
      {"dp_vs_ddp_4x1080ti.json", {"strategy.kind=ddp"}},
      {"gpt_pipeline_8xa100.json", {}},
      {"llama3_1_8b_8xh100_fsdp2.json", {}},
      {"mixtral_8x7b_64xh100_ep8.json", {"training.steps=2"}},
      {"gpt_20b_64xa100_3d.json", {"training.steps=2"}},
  };
  for (const auto& [file, sets] : cases) {
    INFO(file);
    const core::Scenario s = scenario(file, sets);
    const core::Program p = core::lower(s);
    real::RankSetup setup;
    setup.standin_busy_ns.assign(p.ops.size(), 7);
    setup.time_scale = 2.5;
    setup.options.emulate_gil = false;
    setup.heartbeat_ms = 123;
    const std::string bytes = real::encode_rank_job(p, setup);
    core::Program q;
    real::RankSetup back;
    std::string why;
    REQUIRE(real::decode_rank_job(bytes, &q, &back, &why));
    CHECK(why.empty());
    CHECK(back.standin_busy_ns == setup.standin_busy_ns);
    CHECK(back.time_scale == 2.5);
    CHECK_FALSE(back.options.emulate_gil);
    CHECK(back.heartbeat_ms == 123);
    // Re-encoding gives the same bytes (every field came back), the names read the same (the
    // pool's ids and patterns came back), and the simulator times every op the same.
    CHECK(real::encode_rank_job(q, back) == bytes);
    CHECK(q.names.size() == p.names.size());
    bool names_equal = q.ops.size() == p.ops.size();
    for (std::size_t i = 0; names_equal && i < p.ops.size(); ++i)
      names_equal = q.name_of(q.ops[i]) == p.name_of(p.ops[i]);
    CHECK(names_equal);
    CHECK(q.symmetry.enabled() == p.symmetry.enabled());
    CHECK(core::validate_program(q).empty());
    sim::SimExecutor sim(s);
    CHECK(same_timings(sim.run(p, {}), sim.run(q, {})));
  }
}

TEST_CASE("rank job: bytes that are not this build's job are refused in one line",
          "[real][rank_job]") {
  const core::Scenario s = scenario("linear_5x2_dp2.json", {"strategy.kind=ddp"});
  const core::Program p = core::lower(s);
  real::RankSetup setup;
  setup.standin_busy_ns.assign(p.ops.size(), 1);
  const std::string bytes = real::encode_rank_job(p, setup);
  core::Program q;
  real::RankSetup back;
  std::string why;
  // Not a job at all.
  CHECK_FALSE(real::decode_rank_job("hello", &q, &back, &why));
  CHECK_THAT(why, Catch::Contains("not a rank job"));
  // Another format version: the 4 bytes after the 8-byte magic.
  std::string other = bytes;
  other[8] = static_cast<char>(other[8] + 1);
  CHECK_FALSE(real::decode_rank_job(other, &q, &back, &why));
  CHECK_THAT(why, Catch::Contains("another build"));
  // Cut short anywhere: refused, never read past the end (ASan would see it).
  for (std::size_t cut : {std::size_t{20}, bytes.size() / 2, bytes.size() - 1}) {
    why.clear();
    CHECK_FALSE(real::decode_rank_job(std::string_view(bytes).substr(0, cut), &q, &back, &why));
    CHECK_FALSE(why.empty());
    CHECK(why.find('\n') == std::string::npos);
  }
  // Stand-in durations that do not match the Program's ops.
  setup.standin_busy_ns.pop_back();
  CHECK_FALSE(real::decode_rank_job(real::encode_rank_job(p, setup), &q, &back, &why));
  CHECK_THAT(why, Catch::Contains("stand-in durations"));
}

TEST_CASE("rank job: the rank's command line round-trips and refuses anything else",
          "[real][rank_job]") {
  real::RankArgs a;
  a.port = 40123;
  a.rank = 3;
  a.clock_zero_ns = 987654321012345;
  a.job_fd = 3;
  const std::vector<std::string> argv = real::rank_argv("/x/csim-rank", a);
  std::vector<const char*> c;
  for (const std::string& s : argv) c.push_back(s.c_str());
  real::RankArgs b;
  std::string why;
  REQUIRE(real::parse_rank_args(static_cast<int>(c.size()), c.data(), &b, &why));
  CHECK(b.host == "127.0.0.1");
  CHECK(b.port == 40123);
  CHECK(b.rank == 3);
  CHECK(b.clock_zero_ns == 987654321012345);
  CHECK(b.job_fd == 3);
  c.pop_back();  // --job-fd without its value
  CHECK_FALSE(real::parse_rank_args(static_cast<int>(c.size()), c.data(), &b, &why));
  CHECK_THAT(why, Catch::Contains("usage: csim-rank"));
}
