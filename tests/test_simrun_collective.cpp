// simrun collective end to end, in-process (docs/collective.md): nccl-tests' columns, the same
// model as the simulator's collective cost API, bad input (exit 2, one line).
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include "core/cost/collective_cost.hpp"
#include "core/hardware/topology.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "tests/simrun_cli_support.hpp"
#include "tests/test_support.hpp"

using namespace csim;

namespace {

const std::string kDgxH100 = test::scenario_path("clusters/dgx_h100.json");
const std::string kDgxA100 = test::scenario_path("clusters/dgx_a100.json");

struct Row {
  long long size = 0, count = 0;
  std::string type, redop;
  int root = 0;
  double time_us = 0, algbw = 0, busbw = 0;
  std::string algo;
};

// The table's data lines (the ones not starting with '#').
std::vector<Row> rows_of(const std::string& out) {
  std::vector<Row> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    Row r;
    ls >> r.size >> r.count >> r.type >> r.redop >> r.root >> r.time_us >> r.algbw >> r.busbw >>
        r.algo;
    rows.push_back(r);
  }
  return rows;
}

int lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

}  // namespace

TEST_CASE("simrun collective: one row per size with nccl-tests' columns", "[cli][collective]") {
  const test::CliResult r =
      test::run_simrun({"collective", kDgxH100, "--op", "all_reduce", "-b", "1M", "-e", "8M"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("size") != std::string::npos);
  CHECK(r.out.find("busbw") != std::string::npos);
  const std::vector<Row> rows = rows_of(r.out);
  // -b 1M -e 8M -f 2 (the default factor): 1, 2, 4, 8 MiB.
  REQUIRE(rows.size() == 4);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    CHECK(row.size == (1LL << 20) << i);
    CHECK(row.count == row.size / 4);  // float
    CHECK(row.type == "float");
    CHECK(row.redop == "sum");
    CHECK(row.root == -1);
    // algbw = size / time (GB/s = bytes / us / 1e3)
    CHECK(row.algbw == Approx(static_cast<double>(row.size) / row.time_us / 1e3).epsilon(0.01));
    // nccl-tests' all-reduce busbw: each rank sends and receives 2(n-1)/n of the buffer over its
    // ring edge, so busbw = algbw x 2(n-1)/n = algbw x 2 x 7/8 = 1.75 x algbw on 8 GPUs
    // (printed with 2 decimals: within 0.01 GB/s of rounding each).
    CHECK(row.busbw == Approx(row.algbw * 1.75).margin(0.02));
  }
  // The busbw grows with the size (latency amortised).
  CHECK(rows.back().busbw > rows.front().busbw);
}

TEST_CASE("simrun collective: the times are plan_collective's, the simulator's own model",
          "[cli][collective]") {
  const test::CliResult r = test::run_simrun(
      {"collective", kDgxH100, "--gpus", "16", "-b", "64M", "-e", "64M", "--algo", "ring"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("2 nodes x 8") != std::string::npos);
  const std::vector<Row> rows = rows_of(r.out);
  REQUIRE(rows.size() == 1);
  const core::ClusterSpec c = core::parse_cluster_file(kDgxH100, {"cluster.nodes=2"});
  const core::Topology t(c);
  core::CommParams params;
  params.algo = core::CollectiveAlgo::kRing;
  std::vector<int> g(16);
  for (int i = 0; i < 16; ++i) g[static_cast<std::size_t>(i)] = i;
  const core::TransferPlan plan = core::plan_collective(
      t, params, core::CollectiveKind::kAllReduce, core::CollectiveAlgo::kRing, g, -1, 64 << 20);
  CHECK(rows[0].time_us == Approx(static_cast<double>(plan.predicted_ns) / 1e3).margin(0.5));
  // 16 ranks: busbw = algbw x 2 x 15/16
  CHECK(rows[0].busbw == Approx(rows[0].algbw * 30.0 / 16).margin(0.02));
  CHECK(rows[0].algo.rfind("ring/", 0) == 0);
}

TEST_CASE("simrun collective: all_gather splits the buffer as nccl-tests does",
          "[cli][collective]") {
  const test::CliResult r =
      test::run_simrun({"collective", kDgxH100, "--op", "all_gather", "-b", "1000", "-e", "1000"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::vector<Row> rows = rows_of(r.out);
  REQUIRE(rows.size() == 1);
  // 1000 B of float = 250 elements; per rank (250 / 8) rounded down to 16 bytes' worth (4
  // floats): 28; the gathered buffer 28 x 8 ranks x 4 B = 896 B. No reduction, no root.
  CHECK(rows[0].count == 250);
  CHECK(rows[0].size == 896);
  CHECK(rows[0].redop == "none");
  // all-gather busbw = algbw x (n-1)/n = 7/8 algbw
  CHECK(rows[0].busbw == Approx(rows[0].algbw * 7 / 8).margin(0.02));
  const test::CliResult b =
      test::run_simrun({"collective", kDgxH100, "--op", "broadcast", "-b", "1M", "-e", "1M"});
  REQUIRE(b.code == 0);
  const std::vector<Row> br = rows_of(b.out);
  REQUIRE(br.size() == 1);
  CHECK(br[0].root == 0);
  CHECK(br[0].busbw == Approx(br[0].algbw).margin(0.01));  // broadcast: factor 1
}

TEST_CASE("simrun collective: NIC latency moves the small multi-node all-reduce",
          "[cli][collective][nic]") {
  auto small = [](const std::vector<std::string>& sets) {
    std::vector<std::string> args{"collective", kDgxH100, "--gpus", "16", "-b", "8", "-e", "8"};
    for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
    const test::CliResult r = test::run_simrun(args);
    INFO(r.err);
    REQUIRE(r.code == 0);
    return rows_of(r.out).at(0).time_us;
  };
  // A slower NIC hop can only slow an 8-byte all-reduce across two nodes, which is all latency.
  CHECK(small({"cluster.nic.latency_us=30"}) > small({}) + 10);
}

TEST_CASE("simrun collective: bad input exits 2 with one line", "[cli][collective]") {
  struct Bad {
    std::vector<std::string> args;
    const char* names;
  };
  const std::vector<Bad> cases = {
      {{"collective", kDgxH100, "--op", "allreduce"}, "--op"},
      {{"collective", kDgxH100, "-b", "1X"}, "-b"},
      {{"collective", kDgxH100, "-b", "8M", "-e", "1M"}, "-e"},
      {{"collective", kDgxH100, "--algo", "rings"}, "--algo"},
      {{"collective", kDgxH100, "--proto", "ll64"}, "--proto"},
      // A forced algorithm meets the gates a scenario's nccl.algo meets: A100 (sm_80) has no
      // NVLS, so neither NVLS nor NVLSTree; PAT needs one GPU per node.
      {{"collective", kDgxA100, "--algo", "nvls", "--gpus", "8"}, "cannot run here"},
      {{"collective", kDgxA100, "--algo", "nvlstree", "--gpus", "16"}, "cannot run here"},
      {{"collective", kDgxH100, "--algo", "pat", "--gpus", "16"}, "cannot run here"},
      {{"collective", kDgxH100, "--dtype", "float7"}, "--dtype"},
      {{"collective", kDgxH100, "--gpus", "12"}, "--gpus"},
      {{"collective", kDgxH100, "--gpus", "16", "--set", "cluster.nodes=4"}, "cluster.nodes"},
      {{"collective", kDgxH100, "--set", "cluster.nic.stack=ib"}, "cluster.nic.stack"},
      {{"collective", kDgxH100, "--set", "strategy.kind=ddp"}, "cluster.* keys"},
      {{"collective", "/nonexistent/cluster.json"}, "cannot read the cluster file"},
  };
  for (const Bad& b : cases) {
    const test::CliResult r = test::run_simrun(b.args);
    INFO(b.args.back() << ": " << r.err);
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find(b.names) != std::string::npos);
    CHECK(r.out.empty());
  }
}
